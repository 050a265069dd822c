"""A host's remote consoles: the URL that opens a guest's console through a proxy.

``get_vnc_console`` / ``get_serial_console`` (calls, bound by the manager)
ask the driver where the guest's console listens, record a single-use token
for it in the cell database (novella/db/console_auth_tokens.py) and answer
the URL of the console proxy with that token (``[vnc]
novncproxy_base_url``, ``[serial_console] base_url``). Nothing is recorded
before the driver answers and a token is its own record, so there is no
step to finish after a crash: a client whose call was lost asks again.
"""
import urllib.parse

from novella.compute import guest
from novella.db import console_auth_tokens
from novella.virt.driver import ConsoleTypeUnavailable


class ConsoleTypeInvalid(Exception):
    """The console type is not one of the protocol's."""

    def __init__(self, console_type):
        super().__init__(f"Invalid console type {console_type}")


def get_vnc_console(compute, ctxt, instance_uuid, console_type):
    """(call) ``{"url"}`` of the guest's noVNC console."""
    token = _authorize(compute, instance_uuid, console_type, compute.conf.vnc.enabled, "novnc",
                       lambda told: compute.driver.get_vnc_console(ctxt, told))
    # noVNC takes the websocket's path (and so the token) from its page's
    # ``path`` parameter.
    base = urllib.parse.urlsplit(compute.conf.vnc.novncproxy_base_url)
    query = urllib.parse.parse_qs(base.query)
    query["path"] = [f"{query.get('path', [''])[0]}?token={token}"]
    return {"url": base._replace(query=urllib.parse.urlencode(query, doseq=True)).geturl()}


def get_serial_console(compute, ctxt, instance_uuid, console_type, index=0):
    """(call) ``{"url"}`` of the guest's serial console (its port ``index``)."""
    token = _authorize(compute, instance_uuid, console_type,
                       compute.conf.serial_console.enabled, "serial",
                       lambda told: compute.driver.get_serial_console(ctxt, told, index))
    return {"url": f"{compute.conf.serial_console.base_url}?token={token}"}


def _authorize(compute, instance_uuid, console_type, enabled, expected_type, locate):
    """A token for the console ``locate(the instance dict)`` says the guest has."""
    if not enabled:
        raise ConsoleTypeUnavailable(console_type)
    if console_type != expected_type:
        raise ConsoleTypeInvalid(console_type)
    address = locate(guest.instance_dict(guest.get(compute, instance_uuid)))
    return console_auth_tokens.authorize(compute.cell_db, instance_uuid, console_type, address,
                                         compute.conf.consoleauth.token_ttl)
