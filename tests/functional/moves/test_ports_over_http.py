"""A server's ports when the compute hosts reach the network service over its HTTP API.

The hosts' network client is ``NetworkHTTPClient``, each request sent
in-process to the embedded network service's HTTP API, which like Neutron
refuses a port attribute that is not Neutron's (400): the client sends only
Neutron's. Which ports go with a server is then known from the server's
records (novella/network/ownership.py), never from the port.

Boot (a port made on a network, a port the user gave), interface attach and
detach (of a network, of the user's port) and delete leave the right ports:
by ``device_id``, with their bindings, and the server's info cache. The
crash harness of test_interface_crash.py runs again over HTTP, every request
to the network service an effect the host may die before (so between the
port's creation and the info cache's write too), and a build dies before
each of its effects: once the server is deleted, no port is left for it and
the user's port is kept, unbound and released.
"""
import json

import pytest
import sqlalchemy as sa

from novella import clients
from novella.api.network.app import make_app as network_app
from novella.context import get_admin_context
from novella.db import cell_models as cm
from novella.db import cells as cells_mod
from novella.network.http_client import NetworkHTTPClient
from novella.placement.client import WSGIAdapter
from tests.functional.api_services.test_http_clients import _conf
from tests.functional.moves import test_compute_crash_recovery as crash
from tests.functional.moves import test_interface_crash as interface_crash
# The attach/detach harness, collected here with this module's fixtures (over HTTP).
from tests.functional.moves.test_interface_crash import (  # noqa: F401
    test_a_host_dying_inside_an_interface_attach_or_detach)

URL = "http://network.test"
PATH = "/servers/{}/os-interface"


class Strict:
    """The embedded network API, keeping the port bodies it refused."""

    def __init__(self, app):
        self.app, self.refused = app, []

    def __call__(self, environ, start_response):
        def start(status, headers, *rest):
            if status.startswith("400"):
                self.refused.append(environ["PATH_INFO"])
            return start_response(status, headers, *rest)
        return self.app(environ, start)


def _over_http(cloud):
    """Every compute host's network client made the HTTP one."""
    conf = _conf(neutron={"endpoint_override": URL})
    _image, http, _volume = clients.service_clients(conf, lambda: (None, None, None))
    assert isinstance(http, NetworkHTTPClient)
    cloud.strict = Strict(network_app(conf, cloud.aio.network_api))
    http.http.session.session.mount(URL, WSGIAdapter(cloud.strict))
    for compute in cloud.aio.computes.values():
        compute.network_api = http
    cloud.http = http
    return cloud


@pytest.fixture
def cloud(make_cloud):
    return _over_http(make_cloud(hosts=2, simulated={"resource_provider_bandwidths": [
        "physnet0:10000:10000"]}))


@pytest.fixture
def death(cloud, monkeypatch):
    """As the harness's, and each request to the network service is an effect."""
    death = crash.arm_host_deaths(cloud, monkeypatch)
    monkeypatch.setattr(NetworkHTTPClient, "_call",
                        death.effect("network request", NetworkHTTPClient._call))
    return death


def _private(cloud):
    return next(n for n in cloud.aio.network_api.list_networks(get_admin_context())
                if n["name"] == "private")


def _user_port(cloud, name="user"):
    return cloud.aio.network_api.create_port(get_admin_context(), {
        "network_id": _private(cloud)["id"], "name": name})["id"]


def _ports(cloud, sid):
    """{port id: (device, host of the active binding, every binding's host)} of the
    ports on 'private' and 'second' (the server's shown as 'server')."""
    db, out = cloud.aio.network_api, {}
    nets = [_private(cloud)["id"], interface_crash._net(cloud)["id"]]
    for p in db.list_ports(get_admin_context(), {"network_id": nets}):
        hosts = sorted(b["host"] for b in db.list_port_bindings(None, p["id"]))
        out[p["id"]] = ("server" if p["device_id"] == sid else p["device_id"],
                        p["binding:host_id"], hosts)
    return out


def _cache(cloud, sid):
    cell = cells_mod.instance_cell(cloud.aio.api_db, sid)
    with cells_mod.cell_database(cell).session() as s:
        text = s.scalars(sa.select(cm.InstanceInfoCache.network_info).where(
            cm.InstanceInfoCache.instance_uuid == sid)).first()
    return {v["id"]: v.get("preserve_on_delete") for v in json.loads(text or "[]")}


def test_a_port_body_with_an_attribute_neutron_does_not_have_is_refused(cloud):
    status = cloud.http._call
    with pytest.raises(Exception) as raised:
        status(get_admin_context(), "POST", "/ports", {"port": {
            "network_id": _private(cloud)["id"], "created_for_instance": True}}, admin=True)
    assert getattr(raised.value, "code", 400) == 400
    assert "Unrecognized attribute(s) 'created_for_instance'" in str(raised.value)
    assert cloud.strict.refused == ["/v2.0/ports"]


def test_boot_attach_detach_and_delete_leave_the_right_ports(cloud):
    before = _ports(cloud, None)
    given, attached = _user_port(cloud), _user_port(cloud, "attached")
    sid = cloud.boot(networks=[{"uuid": _private(cloud)["id"]}, {"port": given}])
    assert cloud.server(sid)["status"] == "ACTIVE"
    host = cloud.host_of(sid)
    ports = _ports(cloud, sid)
    made = [p for p, (device, _h, _b) in ports.items() if device == "server" and p != given]
    assert len(made) == 1
    assert ports[given] == ports[made[0]] == ("server", host, [host])
    assert _cache(cloud, sid) == {made[0]: False, given: True}

    # Attach a network (a port made for it) and the user's port; detach both.
    status, body = cloud.api("POST", PATH.format(sid), {"interfaceAttachment": {
        "net_id": interface_crash._net(cloud)["id"]}})
    assert status == 200, body
    on_net = body["interfaceAttachment"]["port_id"]
    status, body = cloud.api("POST", PATH.format(sid), {"interfaceAttachment": {
        "port_id": attached}})
    assert status == 200, body
    cloud.aio.wait_idle()
    ports = _ports(cloud, sid)
    assert ports[on_net] == ports[attached] == ("server", host, [host])
    assert _cache(cloud, sid) == {made[0]: False, given: True, on_net: False,
                                  attached: True}
    for port_id in (on_net, attached):
        assert cloud.api("DELETE", PATH.format(sid) + "/" + port_id)[0] == 202
        cloud.aio.wait_idle()
    ports = _ports(cloud, sid)
    assert on_net not in ports  # made for the server: deleted
    assert ports[attached] == ("", "", [])  # the user's: unbound and released
    assert _cache(cloud, sid) == {made[0]: False, given: True}

    # A move reads the ports back (Neutron cannot say whose they are); the delete
    # still knows, from the server's records.
    assert cloud.action(sid, {"migrate": None})[0] == 202
    cloud.aio.wait_idle()
    assert cloud.action(sid, {"confirmResize": None})[0] == 204
    cloud.aio.wait_idle()
    moved = cloud.host_of(sid)
    assert moved != host and _ports(cloud, sid)[given] == ("server", moved, [moved])
    assert cloud.api("DELETE", f"/servers/{sid}")[0] == 204
    cloud.aio.wait_idle()
    after = _ports(cloud, sid)
    assert not any(device == "server" for device, _h, _b in after.values())
    assert after[given] == after[attached] == ("", "", [])
    assert set(after) == set(before) | {given, attached}
    assert cloud.strict.refused == []


def test_a_build_dying_before_any_effect_leaves_no_port_and_keeps_the_users(cloud, death):
    def boot(at):
        given = _user_port(cloud)
        death.arm(at)
        status, body = cloud.api("POST", "/servers", {"server": {
            "name": "vm", "flavorRef": "1", "imageRef": cloud.aio.demo_image["id"],
            "networks": [{"uuid": _private(cloud)["id"]}, {"port": given}]}})
        assert status == 202, body
        cloud.aio.wait_idle()
        return body["server"]["id"], given

    def delete_and_check(sid, given, where):
        before = set(_ports(cloud, None)) - {given}
        crash._delete_and_check_empty(cloud, death, sid, where)
        after = _ports(cloud, sid)
        assert not any(device == "server" for device, _h, _b in after.values()), where
        assert after[given] == ("", "", []), where  # the user's, kept and released
        assert set(after) - {given} <= before, where
        cloud.aio.network_api.delete_port(get_admin_context(), given)

    sid, given = boot(None)
    effects = list(death.effects)
    assert "network request" in effects, effects
    assert _cache(cloud, sid)[given] is True
    delete_and_check(sid, given, "clean")
    for at in range(1, len(effects) + 1):
        sid, given = boot(at)
        assert death.reached.is_set(), f"never reached effect {at}"
        crash._restart(cloud, death, death.host)
        cloud.aio.wait_idle()
        delete_and_check(sid, given, (at, effects[at - 1]))
    assert cloud.strict.refused == []
