"""A server's remote consoles: the URL that opens one through a console proxy.

- ``POST /servers/{id}/action`` ``os-getVNCConsole`` (type ``novnc``) and
  ``os-getSerialConsole`` (type ``serial``): up to 2.5, answering
  ``{"console": {"type", "url"}}``; 404 from 2.6, as the reference.
- ``POST /servers/{id}/remote-consoles`` (2.6+): protocol ``vnc`` or
  ``serial`` (``spice``, ``mks`` and ``rdp`` are consoles Novella has none
  of: 400, as the reference answers a console type its hosts do not offer),
  answering ``{"remote_console": {"protocol", "type", "url"}}``.
- ``GET /os-console-auth-tokens/{token}`` (2.31+, admin): where the token's
  console listens, without using the token.

The server's host makes the token and the URL (novella/compute/consoles.py);
400 when the console type is not enabled there or the guest has none, 409
when the server is on no host or is being deleted or migrated.
"""
from novella import rpc
from novella.api.compute import actions, common, errors, instances, validation as v
from novella.compute.states import task_states
from novella.db import console_auth_tokens

POLICY = "os_compute_api:os-remote-consoles"
TOKENS_POLICY = "os_compute_api:os-console-auth-tokens"
# The compute client's method for each protocol Novella's hosts serve.
_METHODS = {"vnc": "get_vnc_console", "serial": "get_serial_console"}
_TYPES_V26 = ["novnc", "xvpvnc", "spice-html5", "serial", "rdp-html5"]
_PROTOCOLS_V26 = ["vnc", "spice", "serial", "rdp"]


def _action_schema(name, types):
    return v.obj({name: v.obj({"type": {"type": "string", "enum": types}}, ["type"])}, [name])


def _create_schema(protocols, types):
    return v.obj({"remote_console": v.obj({
        "protocol": {"type": "string", "enum": protocols},
        "type": {"type": "string", "enum": types}}, ["protocol", "type"])}, ["remote_console"])


_VNC_ACTION = _action_schema("os-getVNCConsole", ["novnc", "xvpvnc"])
_SERIAL_ACTION = _action_schema("os-getSerialConsole", ["serial"])
_CREATE = [((2, 6), (2, 7), _create_schema(_PROTOCOLS_V26, _TYPES_V26)),
           ((2, 8), (2, 98), _create_schema(_PROTOCOLS_V26 + ["mks"], _TYPES_V26 + ["webmks"])),
           ((2, 99), None, _create_schema(_PROTOCOLS_V26 + ["mks"],
                                          _TYPES_V26 + ["webmks", "spice-direct"]))]


def _console_url(req, rec, protocol, console_type):
    """The URL the server's host made for its console, or the reference's error."""
    if protocol == "rdp":  # the reference's hosts have had none since its 29.0.0
        raise errors.BadRequest("Unavailable console type rdp.")
    if rec["cell"] is None or not rec.get("host"):
        raise errors.Conflict(f"Instance {rec['uuid']} is not ready")
    if rec.get("task_state") in (task_states.DELETING, task_states.MIGRATING):
        raise errors.invalid_state(_METHODS.get(protocol, f"get_{protocol}_console"),
                                   rec["uuid"], "task_state", rec["task_state"])
    if protocol not in _METHODS:  # SPICE, MKS: as the reference's hosts with them disabled
        raise errors.BadRequest(f"Unavailable console type {console_type}.")
    client = actions.compute_client(rec)
    try:
        return getattr(client, _METHODS[protocol])(req.context, rec["host"], rec["uuid"],
                                                   console_type)["url"]
    except rpc.RemoteError as exc:
        if exc.exc_type in ("ConsoleTypeUnavailable", "ConsoleTypeInvalid"):
            raise errors.BadRequest(exc.message)
        if exc.exc_type == "InstanceNotFound":
            raise errors.instance_not_found(rec["uuid"])
        if exc.exc_type == "NotImplementedError":
            raise errors.APIError("Action not supported by the compute driver.", code=501)
        raise


def _legacy_action(name, protocol, schema):
    """``os-getVNCConsole`` / ``os-getSerialConsole``: 2.1 to 2.5 only."""
    def handler(req, rec, body):
        if req.at_least("2.6"):
            raise errors.NotFound("The resource could not be found.")
        v.validate(schema, body, req.version)
        req.authorize(POLICY)
        console_type = body[name]["type"]
        return 200, {"console": {"type": console_type,
                                 "url": _console_url(req, rec, protocol, console_type)}}
    handler.__name__ = name
    return actions.action(name)(handler)


get_vnc_console = _legacy_action("os-getVNCConsole", "vnc", _VNC_ACTION)
get_serial_console = _legacy_action("os-getSerialConsole", "serial", _SERIAL_ACTION)


def create(req, server_id):
    if not req.at_least("2.6"):
        raise errors.NotFound("The resource could not be found.")
    body = req.body_json(_CREATE)
    rec = instances.get(req, server_id, view=False)
    req.authorize(POLICY, {"project_id": rec["project_id"]})
    protocol, console_type = body["remote_console"]["protocol"], body["remote_console"]["type"]
    return 200, {"remote_console": {"protocol": protocol, "type": console_type,
                                    "url": _console_url(req, rec, protocol, console_type)}}


def show_token(req, token):
    if not req.at_least("2.31"):
        raise errors.BadRequest("The server could not comply with the request since it is "
                                "either malformed or otherwise incorrect.")
    common.check_query(req, since="2.99")
    req.authorize(TOKENS_POLICY)
    console = console_auth_tokens.find(req.api.api_db, token)
    if console is None:
        raise errors.NotFound("Token not found")
    # ``tls_port`` (2.99) is a SPICE direct console's; Novella serves none.
    return 200, {"console": {"instance_uuid": console["instance_uuid"],
                             "host": console["host"], "port": console["port"],
                             "internal_access_path": console["internal_access_path"]}}


ROUTES = [
    ("POST", "/servers/{server_id}/remote-consoles", create),
    ("GET", "/os-console-auth-tokens/{token}", show_token),
]
