"""/servers/{id}/os-interface: ports attached to and detached from a running server.

Each test looks at the ports (device, binding host, status), the server's
addresses, the guest's NICs (domain.json) and the server's allocations.
"""
import json
import os

from novella.context import get_admin_context

PATH = "/servers/{}/os-interface"


def _net(cloud, name="second", cidr="10.1.0.0/24"):
    return cloud.aio.network_api.create_network(get_admin_context(), name=name, cidr=cidr,
                                                shared=True)


def _port(cloud, net, **body):
    return cloud.aio.network_api.create_port(get_admin_context(),
                                             dict(body, network_id=net["id"]))


def _get_port(cloud, port_id):
    return cloud.aio.network_api.get_port(get_admin_context(), port_id)


def _ports_on(cloud, net):
    return cloud.aio.network_api.list_ports(get_admin_context(), {"network_id": net["id"]})


def _guest_nics(cloud, sid):
    host = cloud.host_of(sid)
    driver = cloud.aio.computes[host].driver
    with open(os.path.join(driver.instance_dir(sid), "domain.json")) as f:
        return sorted(n["id"] for n in json.load(f).get("network_info") or [])


def _boot(cloud):
    sid = cloud.boot(flavor="1")
    cloud.aio.wait_idle()
    return sid


def _state(cloud, sid, *nets):
    """Everything an attach or detach may change."""
    return {"addresses": cloud.server(sid)["addresses"], "nics": _guest_nics(cloud, sid),
            "ports": {n["id"]: sorted((p["id"], p["device_id"], p["binding:host_id"],
                                       p["status"]) for p in _ports_on(cloud, n))
                      for n in nets},
            "allocations": cloud.allocations(sid)}


def test_attach_and_detach_a_users_port(cloud):
    sid = _boot(cloud)
    host = cloud.host_of(sid)
    net = _net(cloud)
    port = _port(cloud, net, name="user-port")
    allocations = cloud.allocations(sid)
    status, body = cloud.api("POST", PATH.format(sid), {"interfaceAttachment": {
        "port_id": port["id"], "tag": "nic2"}}, version="2.70")
    assert status == 200, body
    att = body["interfaceAttachment"]
    assert att == {"port_id": port["id"], "net_id": net["id"], "mac_addr": port["mac_address"],
                   "port_state": "ACTIVE", "fixed_ips": port["fixed_ips"], "tag": "nic2"}
    p = _get_port(cloud, port["id"])
    assert (p["device_id"], p["device_owner"], p["binding:host_id"], p["status"]) == (
        sid, "compute:nova", host, "ACTIVE")
    assert [a["addr"] for a in cloud.server(sid)["addresses"]["second"]] == [
        port["fixed_ips"][0]["ip_address"]]
    assert port["id"] in _guest_nics(cloud, sid) and len(_guest_nics(cloud, sid)) == 2
    assert cloud.allocations(sid) == allocations

    status, body = cloud.api("GET", PATH.format(sid), version="2.70")
    assert status == 200
    listed = {a["port_id"]: a for a in body["interfaceAttachments"]}
    assert len(listed) == 2 and listed[port["id"]]["tag"] == "nic2"
    status, body = cloud.api("GET", PATH.format(sid) + "/" + port["id"], version="2.69")
    assert status == 200 and "tag" not in body["interfaceAttachment"]
    assert cloud.events(sid, "attach_interface") == {"compute_attach_interface": "Success"}

    # A move binds the ports on the new host and writes the cache again: the tag stays.
    assert cloud.action(sid, {"migrate": None})[0] == 202
    cloud.aio.wait_idle()
    assert cloud.action(sid, {"confirmResize": None})[0] == 204
    cloud.aio.wait_idle()
    moved_to = cloud.host_of(sid)
    assert moved_to != host
    assert _get_port(cloud, port["id"])["binding:host_id"] == moved_to
    status, body = cloud.api("GET", PATH.format(sid), version="2.70")
    assert {a["port_id"]: a["tag"] for a in body["interfaceAttachments"]}[port["id"]] == "nic2"

    status, _ = cloud.api("DELETE", PATH.format(sid) + "/" + port["id"])
    assert status == 202
    cloud.aio.wait_idle()
    p = _get_port(cloud, port["id"])  # the user's port stays, released and unbound
    assert (p["device_id"], p["device_owner"], p["binding:host_id"], p["status"]) == (
        "", "", "", "DOWN")
    assert "second" not in cloud.server(sid)["addresses"]
    assert port["id"] not in _guest_nics(cloud, sid) and len(_guest_nics(cloud, sid)) == 1
    assert cloud.api("GET", PATH.format(sid) + "/" + port["id"])[0] == 404
    assert cloud.events(sid, "detach_interface") == {"compute_detach_interface": "Success"}


def test_attach_by_network_with_a_fixed_ip_and_detach_deletes_the_port(cloud):
    sid = _boot(cloud)
    net = _net(cloud)
    status, body = cloud.api("POST", PATH.format(sid), {"interfaceAttachment": {
        "net_id": net["id"], "fixed_ips": [{"ip_address": "10.1.0.42"}]}})
    assert status == 200, body
    port_id = body["interfaceAttachment"]["port_id"]
    assert [ip["ip_address"] for ip in body["interfaceAttachment"]["fixed_ips"]] == ["10.1.0.42"]
    p = _get_port(cloud, port_id)
    assert (p["device_id"], p["binding:host_id"], p["status"]) == (
        sid, cloud.host_of(sid), "ACTIVE")
    assert [a["addr"] for a in cloud.server(sid)["addresses"]["second"]] == ["10.1.0.42"]
    assert port_id in _guest_nics(cloud, sid)

    status, _ = cloud.api("DELETE", PATH.format(sid) + "/" + port_id)
    assert status == 202
    cloud.aio.wait_idle()
    assert _ports_on(cloud, net) == []  # made for the attach: deleted
    assert "second" not in cloud.server(sid)["addresses"]
    assert port_id not in _guest_nics(cloud, sid)


def test_a_stopped_server_takes_a_port_and_a_suspended_one_does_not(cloud):
    sid = _boot(cloud)
    net = _net(cloud)
    assert cloud.action(sid, {"suspend": None})[0] == 202
    cloud.aio.wait_idle()
    before = _state(cloud, sid, net)
    status, body = cloud.api("POST", PATH.format(sid), {"interfaceAttachment": {
        "net_id": net["id"]}})
    assert status == 409 and "suspended" in body["conflictingRequest"]["message"], body
    assert _state(cloud, sid, net) == before
    assert cloud.action(sid, {"resume": None})[0] == 202
    cloud.aio.wait_idle()
    assert cloud.action(sid, {"os-stop": None})[0] == 202
    cloud.aio.wait_idle()
    status, body = cloud.api("POST", PATH.format(sid), {"interfaceAttachment": {
        "net_id": net["id"]}})
    assert status == 200, body
    assert len(_ports_on(cloud, net)) == 1


def test_bad_input_changes_nothing(cloud):
    sid = _boot(cloud)
    net = _net(cloud)
    other = cloud.boot(flavor="1", networks="none")  # two shared networks: "auto" is 409
    cloud.aio.wait_idle()
    free = _port(cloud, net, name="free")
    used = _port(cloud, net, name="used", device_id=other, device_owner="compute:nova")
    qos = _port(cloud, net, name="qos", resource_request={
        "request_groups": [{"id": "g1", "resources": {"NET_BW_EGR_KILOBIT_PER_SEC": 1000},
                            "required": ["CUSTOM_PHYSNET_PHYSNET0"]}], "same_subtree": ["g1"]})
    before = _state(cloud, sid, net)
    missing = "6f2b5c4e-8d0a-4a3b-9c1d-2e3f4a5b6c7d"
    cases = [
        ({"port_id": free["id"], "net_id": net["id"]}, 400),
        ({"port_id": free["id"], "fixed_ips": [{"ip_address": "10.1.0.9"}]}, 400),
        ({"net_id": net["id"], "fixed_ips": [{"ip_address": "not-an-ip"}]}, 400),
        ({"net_id": net["id"], "fixed_ips": [{"ip_address": "10.9.9.9"}]}, 400),
        ({"port_id": "not-a-uuid"}, 400),
        ({"port_id": free["id"], "bogus": 1}, 400),
        ({"port_id": free["id"], "tag": "t"}, 400),  # tag before 2.49
        ({"port_id": missing}, 404),
        ({"net_id": missing}, 404),
        ({"port_id": used["id"]}, 409),
        ({"port_id": qos["id"]}, 400),
    ]
    for body, code in cases:
        status, answer = cloud.api("POST", PATH.format(sid), {"interfaceAttachment": body},
                                   version="2.48")
        assert status == code, (body, answer)
        assert _state(cloud, sid, net) == before, body
    assert cloud.api("DELETE", PATH.format(sid) + "/" + free["id"])[0] == 404
    assert cloud.api("GET", PATH.format(sid) + "/" + missing)[0] == 404
    assert cloud.api("GET", PATH.format(sid) + "/" + used["id"])[0] == 404
    assert _state(cloud, sid, net) == before
    assert _get_port(cloud, used["id"])["device_id"] == other


def test_another_projects_server_is_not_found_and_policy_applies(cloud):
    sid = _boot(cloud)
    net = _net(cloud)
    status, _ = cloud.api("POST", PATH.format(sid), {"interfaceAttachment": {
        "net_id": net["id"]}}, token="u2:other")
    assert status == 404
    assert cloud.api("GET", PATH.format(sid), token="u2:other")[0] == 404
    assert _ports_on(cloud, net) == []


def _held(cloud, sid):
    names = {rp["uuid"]: rp["name"] for rp in cloud.aio.placement.list_resource_providers()}
    return {names[rp]: a["resources"] for rp, a in cloud.allocations(sid).items()}


def test_a_bandwidth_port_is_allocated_on_attach_and_given_back_on_detach(make_cloud):
    cloud = make_cloud(hosts=1, simulated={"resource_provider_bandwidths": [
        "physnet0:10000:10000"]})
    net_api, ctxt = cloud.aio.network_api, get_admin_context()
    policy = net_api.create_qos_policy(ctxt, "qos", [
        {"type": "minimum_bandwidth", "min_kbps": 1000, "direction": "egress"}])
    big = net_api.create_qos_policy(ctxt, "big", [
        {"type": "minimum_bandwidth", "min_kbps": 20000, "direction": "egress"}])
    net = net_api.create_network(ctxt, "phys", cidr="10.20.0.0/24", shared=True,
                                 physical_network="physnet0")
    port = net_api.create_port(ctxt, {"network_id": net["id"], "qos_policy_id": policy["id"]})
    sid = cloud.boot(networks=[{"port": port["id"]}])
    host = cloud.host_of(sid)
    bw = f"{host}:Open vSwitch agent:physnet0"
    egress = "NET_BW_EGR_KILOBIT_PER_SEC"
    held = _held(cloud, sid)
    assert held[bw] == {egress: 1000}

    # A second port: its bandwidth joins the server's allocation, its binding names it.
    other = net_api.create_port(ctxt, {"network_id": net["id"], "qos_policy_id": policy["id"]})
    status, body = cloud.api("POST", PATH.format(sid), {"interfaceAttachment": {
        "port_id": other["id"]}})
    assert status == 200, body
    assert _held(cloud, sid) == {host: held[host], bw: {egress: 2000}}
    p = _get_port(cloud, other["id"])
    rp = cloud.aio.computes[host].rt.provider_uuid
    assert p["binding:host_id"] == host and p["device_id"] == sid
    assert set(p["binding:profile"]["allocation"].values()) == {
        next(r["uuid"] for r in cloud.aio.placement.list_resource_providers() if r["name"] == bw)}
    assert rp not in p["binding:profile"]["allocation"].values()
    # More than the host has: 400, and nothing changes.
    greedy = net_api.create_port(ctxt, {"network_id": net["id"], "qos_policy_id": big["id"]})
    before = (_held(cloud, sid), _guest_nics(cloud, sid))
    status, body = cloud.api("POST", PATH.format(sid), {"interfaceAttachment": {
        "port_id": greedy["id"]}})
    assert status == 400 and "allocate" in body["badRequest"]["message"], body
    g = _get_port(cloud, greedy["id"])
    assert (g["device_id"], g["binding:host_id"], g["status"]) == ("", "", "DOWN")
    assert (_held(cloud, sid), _guest_nics(cloud, sid)) == before

    for port_id, left in ((port["id"], 1000), (other["id"], 0)):
        assert cloud.api("DELETE", PATH.format(sid) + "/" + port_id)[0] == 202
        cloud.aio.wait_idle()
        assert _held(cloud, sid) == ({host: held[host], bw: {egress: left}} if left
                                     else {host: held[host]})
        assert cloud.usages()[bw][egress] == left
        p = _get_port(cloud, port_id)
        assert (p["device_id"], p["binding:host_id"], p["status"]) == ("", "", "DOWN")
    assert _guest_nics(cloud, sid) == []
