"""A compute service dies before any one of the effects of a port attach or detach.

As in test_compute_crash_recovery.py: the operation runs once cleanly to
learn its effects, then, for each effect, on a new server, the host's
service dies just before it and a fresh service starts on the same
databases and disks. A detach (noted by the API before its cast) and an
attach the host had noted are finished; an attach whose host died before
noting it never happened (the caller was answered 500). Either way the
books are exact: the ports' devices, bindings and statuses, the server's
addresses, the guest's NICs, the allocations and usages (with a port that
asks for bandwidth: its share of the server's allocation).
"""
import json
import os

import pytest

from novella.context import get_admin_context
from tests.functional.moves import test_compute_crash_recovery as crash

PATH = "/servers/{}/os-interface"


@pytest.fixture
def cloud(make_cloud):
    """Two hosts, each with 10000 kbps each way on physnet0 (for the QoS port)."""
    return make_cloud(hosts=2, simulated={"resource_provider_bandwidths": [
        "physnet0:10000:10000"]})


@pytest.fixture
def death(cloud, monkeypatch):
    return crash.arm_host_deaths(cloud, monkeypatch)


def _net(cloud):
    nets = [n for n in cloud.aio.network_api.list_networks(get_admin_context())
            if n["name"] == "second"]
    return nets[0] if nets else cloud.aio.network_api.create_network(
        get_admin_context(), name="second", cidr="10.1.0.0/24", shared=True,
        physical_network="physnet0")


def _qos_policy(cloud):
    api = cloud.aio.network_api
    found = [p for p in api.list_qos_policies(get_admin_context()) if p["name"] == "bw"]
    return found[0] if found else api.create_qos_policy(get_admin_context(), "bw", [
        {"type": "minimum_bandwidth", "min_kbps": 1000, "direction": "egress"}])


def _books(cloud, sid, user_port):
    books = crash.books(cloud, sid)
    net = _net(cloud)
    ports = cloud.aio.network_api.list_ports(get_admin_context(), {"network_id": net["id"]})
    books["ports"] = sorted(("user" if p["id"] == user_port else "made",
                             "server" if p["device_id"] == sid else p["device_id"],
                             p["binding:host_id"], p["status"]) for p in ports)
    if books["status"] != "DELETED":
        server = cloud.server(sid)
        books["addresses"] = sorted(server["addresses"])
        driver = cloud.aio.computes[server["OS-EXT-SRV-ATTR:host"]].driver
        with open(os.path.join(driver.instance_dir(sid), "domain.json")) as f:
            nics = [n["id"] for n in json.load(f).get("network_info") or []]
        books["nics"] = sorted("user" if n == user_port else "other" for n in nics)
    return books


def _attach_body(cloud, kind, user_port):
    if kind in ("port", "qos"):
        return {"interfaceAttachment": {"port_id": user_port}}
    return {"interfaceAttachment": {"net_id": _net(cloud)["id"]}}


def _run(cloud, death, operation, at):
    """A server (with the port attached, for a detach), then the request, its host
    dying before effect ``at``; returns (server, user port, books before)."""
    op, kind = operation.split("-")
    body = {"network_id": _net(cloud)["id"], "name": "user"}
    if kind == "qos":
        body["qos_policy_id"] = _qos_policy(cloud)["id"]
    user_port = cloud.aio.network_api.create_port(get_admin_context(), body)["id"]
    death.arm(-1)
    private = next(n for n in cloud.aio.network_api.list_networks(get_admin_context())
                   if n["name"] == "private")
    sid = cloud.boot(networks=[{"uuid": private["id"]}])
    cloud.aio.wait_idle()
    if op == "detach":
        status, body = cloud.api("POST", PATH.format(sid), _attach_body(cloud, kind, user_port))
        assert status == 200, body
        port_id = body["interfaceAttachment"]["port_id"]
    before = _books(cloud, sid, user_port)
    death.arm(at)
    if op == "attach":
        status, body = cloud.api("POST", PATH.format(sid), _attach_body(cloud, kind, user_port))
        assert status == 200 or (at is not None and status == 500), body
    else:
        status, body = cloud.api("DELETE", PATH.format(sid) + "/" + port_id)
        assert status == 202, body
    cloud.aio.wait_idle()
    return sid, user_port, before


def _delete_and_check_empty(cloud, death, sid, user_port, where=None):
    crash._delete_and_check_empty(cloud, death, sid, where)
    net = _net(cloud)
    for p in cloud.aio.network_api.list_ports(get_admin_context(), {"network_id": net["id"]}):
        assert p["id"] == user_port or p["device_id"] != sid, where  # none left for it
        if p["device_id"] == "":
            assert (p["binding:host_id"], p["status"]) == ("", "DOWN"), where
        if p["id"] == user_port:
            cloud.aio.network_api.delete_port(get_admin_context(), p["id"])


@pytest.mark.parametrize("operation", ["attach-port", "attach-net", "attach-qos",
                                       "detach-port", "detach-net", "detach-qos"])
def test_a_host_dying_inside_an_interface_attach_or_detach(cloud, death, operation):
    sid, user_port, before = _run(cloud, death, operation, None)
    finished = _books(cloud, sid, user_port)
    effects = list(death.effects)
    assert finished != before and "set_system_metadata" in effects, (finished, effects)
    if operation.endswith("qos"):  # the port's bandwidth held while it is attached
        held = finished if operation.startswith("attach") else before
        free = before if operation.startswith("attach") else finished
        assert any(name.endswith(":physnet0") for name in held["usages"]), held
        assert not any(name.endswith(":physnet0") for name in free["usages"]), free
    noted = effects.index("set_system_metadata") + 1  # the host's note, for an attach
    _delete_and_check_empty(cloud, death, sid, user_port)

    for at in range(1, len(effects) + 1):
        sid, user_port, before = _run(cloud, death, operation, at)
        assert death.reached.is_set(), f"{operation}: never reached effect {at}"
        crash._restart(cloud, death, death.host)
        cloud.aio.wait_idle()
        after = _books(cloud, sid, user_port)
        where = (operation, at, effects[at - 1])
        if operation.startswith("attach") and at <= noted:
            assert after == before, where
        else:
            assert after == finished, where
        _delete_and_check_empty(cloud, death, sid, user_port, where)
