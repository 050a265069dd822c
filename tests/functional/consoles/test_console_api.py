"""The remote consoles' API: the deprecated actions (2.1-2.5), remote-consoles
(2.6+) and os-console-auth-tokens (2.31+, 2.99), with the reference's bodies,
status codes and errors, over an all-in-one of simulated hosts."""
import time
import urllib.parse

import jsonschema
import pytest
import webob

from novella.conf import CONF
from novella.db import cells as cells_mod, console_auth_tokens
from novella.virt import simulated
from tests.functional.moves.conftest import make_cloud  # noqa: F401 - fixture

MEMBER = "demo:demo"

# The reference's response bodies (its API reference).
_URL = {"type": "string", "format": "uri"}
ACTION_BODY = {"type": "object", "required": ["console"], "additionalProperties": False,
               "properties": {"console": {
                   "type": "object", "required": ["type", "url"], "additionalProperties": False,
                   "properties": {"type": {"enum": ["novnc", "serial"]}, "url": _URL}}}}
REMOTE_CONSOLE_BODY = {
    "type": "object", "required": ["remote_console"], "additionalProperties": False,
    "properties": {"remote_console": {
        "type": "object", "required": ["protocol", "type", "url"], "additionalProperties": False,
        "properties": {"protocol": {"enum": ["vnc", "serial"]},
                       "type": {"enum": ["novnc", "serial"]}, "url": _URL}}}}
TOKEN_BODY = {
    "type": "object", "required": ["console"], "additionalProperties": False,
    "properties": {"console": {
        "type": "object", "additionalProperties": False,
        "required": ["instance_uuid", "host", "port", "internal_access_path"],
        "properties": {"instance_uuid": {"type": "string"}, "host": {"type": ["string", "null"]},
                       "port": {"type": ["integer", "null"]},
                       "internal_access_path": {"type": ["string", "null"]}}}}}


@pytest.fixture
def cloud(make_cloud):  # noqa: F811
    return make_cloud(hosts=1, serial_console={"enabled": True})


@pytest.fixture
def server(cloud):
    return cloud.boot(token=MEMBER)


def _post(cloud, sid, body, version, token=MEMBER):
    return cloud.api("POST", f"/servers/{sid}/action", body, token=token, version=version)


def _remote(cloud, sid, protocol, console_type, version="2.6", token=MEMBER):
    return cloud.api("POST", f"/servers/{sid}/remote-consoles",
                     {"remote_console": {"protocol": protocol, "type": console_type}},
                     token=token, version=version)


def _token(url):
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
    if "path" in query:
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(query["path"][0]).query)
    return query["token"][0]


def test_serial_console_action_and_remote_console(cloud, server):
    status, body = _post(cloud, server, {"os-getSerialConsole": {"type": "serial"}}, "2.1")
    assert status == 200, body
    jsonschema.validate(body, ACTION_BODY)
    assert body["console"]["type"] == "serial"
    assert body["console"]["url"].startswith("ws://127.0.0.1:6083/?token=")
    for version in ("2.6", "2.8", "2.99", "2.104"):
        status, body = _remote(cloud, server, "serial", "serial", version)
        assert status == 200, body
        jsonschema.validate(body, REMOTE_CONSOLE_BODY)
        assert body["remote_console"]["protocol"] == "serial"
    # Each URL has a token of its own.
    status, again = _remote(cloud, server, "serial", "serial")
    assert _token(again["remote_console"]["url"]) != _token(body["remote_console"]["url"])


def test_the_deprecated_actions_end_at_2_5(cloud, server):
    for name, kind in (("os-getSerialConsole", "serial"), ("os-getVNCConsole", "novnc")):
        status, body = _post(cloud, server, {name: {"type": kind}}, "2.6")
        assert (status, body) == (404, {"itemNotFound": {
            "code": 404, "message": "The resource could not be found."}})
    status, body = _remote(cloud, server, "serial", "serial", version="2.5")
    assert status == 404, body


def test_vnc_of_a_simulated_guest_is_unavailable(cloud, server):
    status, body = _post(cloud, server, {"os-getVNCConsole": {"type": "novnc"}}, "2.5")
    assert (status, body) == (400, {"badRequest": {
        "code": 400, "message": "Unavailable console type vnc."}})
    status, body = _remote(cloud, server, "vnc", "novnc")
    assert (status, body["badRequest"]["message"]) == (400, "Unavailable console type vnc.")


@pytest.mark.parametrize("body, message", [
    ({"os-getVNCConsole": {"type": "spice-html5"}}, "is not one of"),
    ({"os-getVNCConsole": {}}, "'type' is a required property"),
    ({"os-getSerialConsole": {"type": "novnc"}}, "is not one of"),
    ({"os-getVNCConsole": {"type": "xvpvnc"}}, "Invalid console type xvpvnc"),
])
def test_bad_action_bodies(cloud, server, body, message):
    status, resp = _post(cloud, server, body, "2.1")
    assert status == 400 and message in resp["badRequest"]["message"], resp


@pytest.mark.parametrize("protocol, kind, version, message", [
    ("vnc", "serial", "2.6", "Invalid console type serial"),
    ("serial", "novnc", "2.6", "Invalid console type novnc"),
    ("spice", "spice-html5", "2.6", "Unavailable console type spice-html5."),
    ("rdp", "rdp-html5", "2.6", "Unavailable console type rdp."),
    ("mks", "webmks", "2.8", "Unavailable console type webmks."),
    ("mks", "webmks", "2.6", "is not one of"),
    ("spice", "spice-direct", "2.98", "is not one of"),
    ("telnet", "serial", "2.6", "is not one of"),
])
def test_bad_protocols_and_types(cloud, server, protocol, kind, version, message):
    status, body = _remote(cloud, server, protocol, kind, version)
    assert status == 400 and message in body["badRequest"]["message"], body


def test_console_type_not_enabled_on_the_host(cloud, server):
    CONF.set_override("enabled", False, group="serial_console")
    CONF.set_override("enabled", False, group="vnc")
    try:
        for protocol, kind in (("serial", "serial"), ("vnc", "novnc")):
            status, body = _remote(cloud, server, protocol, kind)
            assert (status, body["badRequest"]["message"]) == (
                400, f"Unavailable console type {kind}."), body
    finally:
        CONF.set_override("enabled", True, group="serial_console")
        CONF.clear_override("enabled", group="vnc")


def test_server_not_found_not_ready_or_not_running(cloud, server):
    status, body = _remote(cloud, "6b5ba4a6-49c8-4cd4-b3f9-1d6ab1f4b0b8", "serial", "serial")
    assert status == 404 and body["itemNotFound"]["message"].endswith("could not be found.")
    # Another project's server is not found either.
    status, body = _remote(cloud, server, "serial", "serial", token="other:other")
    assert status == 404, body
    # A server being migrated or deleted: 409.
    cell_db = cells_mod.cell_database(cloud.aio.cells[0])
    from novella.db import records
    records.update_instance(cell_db, server, task_state="migrating")
    status, body = _remote(cloud, server, "serial", "serial")
    assert (status, body["conflictingRequest"]["message"]) == (
        409, f"Cannot 'get_serial_console' instance {server} while it is in task_state "
             "migrating"), body
    records.update_instance(cell_db, server, task_state=None, host=None)
    status, body = _remote(cloud, server, "serial", "serial")
    assert (status, body["conflictingRequest"]["message"]) == (
        409, f"Instance {server} is not ready"), body
    records.update_instance(cell_db, server, host="cell1-host1")
    # A stopped guest has no serial port to offer.
    status, body = cloud.api("POST", f"/servers/{server}/action", {"os-stop": None},
                             token=MEMBER)
    assert status == 202, body
    cloud.aio.wait_idle()
    status, body = _remote(cloud, server, "serial", "serial")
    assert (status, body["badRequest"]["message"]) == (400, "Unavailable console type serial.")


def test_guest_gone_from_its_host_is_not_found(cloud, server):
    simulated.inject_fault(cloud.host_of(server), "get_serial_console", server,
                           exc=simulated.InstanceNotFound("gone"))
    status, body = _remote(cloud, server, "serial", "serial")
    assert status == 404, body


def test_policy(cloud, server):
    status, body = _remote(cloud, server, "serial", "serial", token="admin:admin")
    assert status == 200, body  # an administrator opens anyone's console
    # The reader role alone may not (project_member_or_admin).
    req = webob.Request.blank(f"/v2.1/servers/{server}/remote-consoles", method="POST")
    req.headers.update({"X-Auth-Token": MEMBER, "X-Roles": "reader",
                        "OpenStack-API-Version": "compute 2.6"})
    req.json_body = {"remote_console": {"protocol": "serial", "type": "serial"}}
    resp = req.get_response(cloud.aio.compute_api_app)
    assert resp.status_int == 403, resp.json_body
    assert resp.json_body["forbidden"]["message"] == (
        "Policy doesn't allow os_compute_api:os-remote-consoles to be performed.")


def test_console_auth_tokens(cloud, server):
    status, body = _remote(cloud, server, "serial", "serial")
    token = _token(body["remote_console"]["url"])
    host = cloud.aio.computes[cloud.host_of(server)].driver
    port = host.get_serial_console(None, {"uuid": server})["port"]
    for version in ("2.31", "2.98", "2.99", "2.104"):
        status, body = cloud.api("GET", f"/os-console-auth-tokens/{token}", version=version)
        assert status == 200, body
        jsonschema.validate(body, TOKEN_BODY)  # no tls_port: that is a SPICE direct console's
        assert body["console"] == {"instance_uuid": server, "host": "127.0.0.1", "port": port,
                                   "internal_access_path": None}
    # Showing a token does not use it; only a hash of it is stored.
    status, body = cloud.api("GET", f"/os-console-auth-tokens/{token}", version="2.31")
    assert status == 200
    cell_db = cells_mod.cell_database(cloud.aio.cells[0])
    assert console_auth_tokens.show(cell_db, token)["instance_uuid"] == server
    with cell_db.reader() as conn:
        stored = conn.exec_driver_sql("SELECT token_hash FROM console_auth_tokens").scalars().all()
    assert token not in stored and console_auth_tokens.token_hash(token) in stored
    # Before 2.31: 400 whatever the token; an unknown one: 404; members may not.
    status, body = cloud.api("GET", f"/os-console-auth-tokens/{token}", version="2.30")
    assert status == 400, body
    status, body = cloud.api("GET", "/os-console-auth-tokens/nope", version="2.31")
    assert (status, body) == (404, {"itemNotFound": {"code": 404, "message": "Token not found"}})
    status, body = cloud.api("GET", f"/os-console-auth-tokens/{token}", version="2.31",
                             token=MEMBER)
    assert status == 403, body
    # 2.99 closes the query string.
    status, body = cloud.api("GET", f"/os-console-auth-tokens/{token}?x=1", version="2.99")
    assert status == 400, body
    status, body = cloud.api("GET", f"/os-console-auth-tokens/{token}?x=1", version="2.98")
    assert status == 200, body


def test_tokens_expire(cloud, server):
    CONF.set_override("token_ttl", 1, group="consoleauth")
    try:
        status, body = _remote(cloud, server, "serial", "serial")
    finally:
        CONF.clear_override("token_ttl", group="consoleauth")
    token = _token(body["remote_console"]["url"])
    assert cloud.api("GET", f"/os-console-auth-tokens/{token}", version="2.31")[0] == 200
    time.sleep(1.1)
    assert cloud.api("GET", f"/os-console-auth-tokens/{token}", version="2.31")[0] == 404
    cell_db = cells_mod.cell_database(cloud.aio.cells[0])
    assert console_auth_tokens.consume(cell_db, token) is None
    # The next token of the cell clears the expired rows away.
    _remote(cloud, server, "serial", "serial")
    with cell_db.reader() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM console_auth_tokens").scalar() == 1
