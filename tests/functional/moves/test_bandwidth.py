"""Servers whose ports ask for minimum bandwidth, booted and moved inside a cell.

Two hosts, each reporting 10000 kbps each way on physnet0 as a child provider
of its node. The server's port is on a physnet0 network with a 1000 kbps
minimum-bandwidth rule each way: its allocation takes bandwidth from the
host's child provider, and the port's binding profile names that provider
(``allocation``: {request group: provider}) wherever the server is.
"""
import pytest

from novella.context import get_admin_context
from novella.virt import simulated

TINY = {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}
BW = {"NET_BW_EGR_KILOBIT_PER_SEC": 1000, "NET_BW_IGR_KILOBIT_PER_SEC": 1000}
NONE = {}


@pytest.fixture
def cloud(make_cloud):
    return make_cloud(hosts=2, simulated={"resource_provider_bandwidths": ["physnet0:10000:10000"]})


BW_RULES = [{"type": "minimum_bandwidth", "min_kbps": 1000, "direction": "egress"},
            {"type": "minimum_bandwidth", "min_kbps": 1000, "direction": "ingress"}]


def _port(cloud, rules=BW_RULES):
    """A port on a new physnet0 network, with a QoS policy of ``rules``."""
    net_api, ctxt = cloud.aio.network_api, get_admin_context()
    policy = net_api.create_qos_policy(ctxt, "qos", rules)
    net = net_api.create_network(ctxt, "phys", cidr="10.20.0.0/24", shared=True,
                                 physical_network="physnet0")
    return net_api.create_port(ctxt, {"network_id": net["id"], "qos_policy_id": policy["id"]})


def _boot(cloud, port):
    sid = cloud.boot(networks=[{"port": port["id"]}])
    assert cloud.server(sid)["status"] == "ACTIVE", cloud.fault(sid)
    return sid


def _names(cloud):
    return {rp["uuid"]: rp["name"] for rp in cloud.aio.placement.list_resource_providers()}


def _bw(host):
    return f"{host}:Open vSwitch agent:physnet0"


def _held(cloud, consumer):
    """{provider name: resources} the consumer holds."""
    names = _names(cloud)
    return {names[rp]: a["resources"] for rp, a in cloud.allocations(consumer).items()}


def _bound(cloud, port):
    """(the host of the port's active binding, the provider names its profile gives)."""
    p = cloud.aio.network_api.get_port(get_admin_context(), port["id"])
    names = _names(cloud)
    allocation = p["binding:profile"].get("allocation") or {}
    return p["binding:host_id"], sorted({names[rp] for rp in allocation.values()})


def _bandwidth_used(cloud):
    """{bandwidth provider name: its NET_BW usages}."""
    return {name: {rc: n for rc, n in u.items() if rc.startswith("NET_BW")}
            for name, u in cloud.usages().items()
            if "Open vSwitch agent:" in name}


def _act(cloud, sid, body, expect=202):
    status, resp = cloud.action(sid, body)
    assert status == expect, resp
    cloud.aio.wait_idle()


def _migration(cloud, sid):
    return sorted(cloud.migrations(sid), key=lambda m: m["created_at"])[-1]


def test_bandwidth_follows_the_server_through_migrate_revert_confirm_and_delete(cloud):
    port = _port(cloud)
    sid = _boot(cloud, port)
    src = cloud.host_of(sid)
    dest = next(h for h in cloud.aio.computes if h != src)
    assert _held(cloud, sid) == {src: TINY, _bw(src): BW}
    assert _bound(cloud, port) == (src, [_bw(src)])
    assert _bandwidth_used(cloud) == {_bw(src): BW, _bw(dest): {rc: 0 for rc in BW}}

    _act(cloud, sid, {"migrate": None})
    mig = _migration(cloud, sid)["uuid"]
    assert cloud.host_of(sid) == dest
    assert _held(cloud, sid) == {dest: TINY, _bw(dest): BW}
    assert _held(cloud, mig) == {src: TINY, _bw(src): BW}
    assert _bound(cloud, port) == (dest, [_bw(dest)])

    _act(cloud, sid, {"revertResize": None})
    assert cloud.host_of(sid) == src
    assert _held(cloud, sid) == {src: TINY, _bw(src): BW} and _held(cloud, mig) == NONE
    assert _bound(cloud, port) == (src, [_bw(src)])
    assert _bandwidth_used(cloud) == {_bw(src): BW, _bw(dest): {rc: 0 for rc in BW}}

    _act(cloud, sid, {"migrate": None})
    mig = _migration(cloud, sid)["uuid"]
    _act(cloud, sid, {"confirmResize": None}, expect=204)
    assert cloud.host_of(sid) == dest
    assert _held(cloud, sid) == {dest: TINY, _bw(dest): BW} and _held(cloud, mig) == NONE
    assert _bound(cloud, port) == (dest, [_bw(dest)])
    assert _bandwidth_used(cloud) == {_bw(dest): BW, _bw(src): {rc: 0 for rc in BW}}

    assert cloud.api("DELETE", f"/servers/{sid}")[0] == 204
    cloud.aio.wait_idle()
    assert _held(cloud, sid) == NONE
    assert _bandwidth_used(cloud) == {_bw(h): {rc: 0 for rc in BW} for h in (src, dest)}


def test_a_failed_move_leaves_the_bandwidth_and_the_binding_on_the_source(cloud):
    port = _port(cloud)
    sid = _boot(cloud, port)
    src = cloud.host_of(sid)
    dest = next(h for h in cloud.aio.computes if h != src)
    simulated.inject_fault(dest, "finish_migration", instance_uuid=sid)
    _act(cloud, sid, {"migrate": None})
    mig = _migration(cloud, sid)
    assert mig["status"] == "error" and cloud.host_of(sid) == src
    assert _held(cloud, sid) == {src: TINY, _bw(src): BW} and _held(cloud, mig["uuid"]) == NONE
    assert _bound(cloud, port) == (src, [_bw(src)])
    assert _bandwidth_used(cloud) == {_bw(src): BW, _bw(dest): {rc: 0 for rc in BW}}


def test_no_host_with_the_bandwidth_left_means_no_valid_host(make_cloud):
    cloud = make_cloud(hosts=1, simulated={"resource_provider_bandwidths": ["physnet0:1500:1500"]})
    first = _boot(cloud, _port(cloud))
    host = cloud.host_of(first)
    second = _port(cloud)
    sid = cloud.boot(networks=[{"port": second["id"]}])
    assert cloud.server(sid)["status"] == "ERROR"
    assert "No valid host" in cloud.fault(sid) or "No valid host" in cloud.server(sid)["fault"]["message"]
    assert _bandwidth_used(cloud) == {_bw(host): BW}
    assert _bound(cloud, second) == ("", [])



def test_a_rescheduled_build_binds_the_port_to_the_alternate_provider(cloud):
    port = _port(cloud)
    simulated.inject_fault(None, "spawn", times=1)   # the first host tried fails once
    sid = _boot(cloud, port)
    host = cloud.host_of(sid)
    other = next(h for h in cloud.aio.computes if h != host)
    assert not simulated.pending_faults(None)
    assert _held(cloud, sid) == {host: TINY, _bw(host): BW}
    assert _bound(cloud, port) == (host, [_bw(host)])
    assert _bandwidth_used(cloud) == {_bw(host): BW, _bw(other): {rc: 0 for rc in BW}}


def test_a_port_with_bandwidth_and_packet_rate_takes_both_from_one_agent(make_cloud):
    cloud = make_cloud(hosts=2, simulated={
        "resource_provider_bandwidths": ["physnet0:10000:10000"],
        "resource_provider_packet_processing_without_direction": 100})
    port = _port(cloud, [{"type": "minimum_bandwidth", "min_kbps": 1000, "direction": "egress"},
                         {"type": "minimum_packet_rate", "min_kpps": 10, "direction": "any"}])
    sid = _boot(cloud, port)
    src = cloud.host_of(sid)
    agent = f"{src}:Open vSwitch agent"
    assert _held(cloud, sid) == {src: TINY, _bw(src): {"NET_BW_EGR_KILOBIT_PER_SEC": 1000},
                                 agent: {"NET_PACKET_RATE_KILOPACKET_PER_SEC": 10}}
    assert _bound(cloud, port) == (src, sorted([_bw(src), agent]))

    _act(cloud, sid, {"migrate": None})
    _act(cloud, sid, {"confirmResize": None}, expect=204)
    dest = cloud.host_of(sid)
    assert dest != src
    assert _held(cloud, sid) == {dest: TINY, _bw(dest): {"NET_BW_EGR_KILOBIT_PER_SEC": 1000},
                                 f"{dest}:Open vSwitch agent":
                                     {"NET_PACKET_RATE_KILOPACKET_PER_SEC": 10}}
    assert _bound(cloud, port) == (dest, sorted([_bw(dest), f"{dest}:Open vSwitch agent"]))
    usages = cloud.usages()
    assert usages[agent]["NET_PACKET_RATE_KILOPACKET_PER_SEC"] == 0
