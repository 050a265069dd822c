"""Servers with an SR-IOV (``direct``) port whose QoS policy asks for bandwidth.

Each host has two SR-IOV NICs on physnet0 (``[simulated] sriov_nics``, put on
the physical network by ``[pci] device_spec``): ``ens1`` reports too little
bandwidth for the port's 1000 kbps, ``ens2`` enough, so placement can only
give the port ens2's bandwidth — and ens1's VFs, which come first by
address, must not be the ones claimed. At every step the books are read
whole: allocations by consumer on the PF providers, the device claimed for
the port on each host (from the cell database, as a restarted host counts
it), the port's binding, and that its VF and its bandwidth are on one PF.
"""
import pytest

from novella.context import get_admin_context
from novella.virt import simulated
from tests.functional.cross_cell import conftest as cross_cell
from tests.functional.cross_cell.test_crash_recovery import OPERATIONS as CROSS_CELL_OPERATIONS
from tests.functional.moves import test_compute_crash_recovery as host_death
from tests.functional.moves.test_crash_recovery import (MOVES, OPERATIONS, _force_down,
                                                        _hosts_back_up, arm_crashes,
                                                        crash_at_every_boundary)

BW = {"NET_BW_EGR_KILOBIT_PER_SEC": 1000, "NET_BW_IGR_KILOBIT_PER_SEC": 1000}
BW_RULES = [{"type": "minimum_bandwidth", "min_kbps": 1000, "direction": d}
            for d in ("egress", "ingress")]
SRIOV = {
    "simulated": {"sriov_nics": ["ens1:2:500:500", "ens2:2:10000:10000"]},
    "pci": {"device_spec": ['{"devname": "ens1", "physical_network": "physnet0"}',
                            '{"devname": "ens2", "physical_network": "physnet0"}']},
}


make_xcloud = cross_cell.make_xcloud  # two cells of one host
# The moves whose hosts claim devices (a resize claims as a cold migration does; a
# confirm only frees the source's).
HOST_DEATH_MOVES = sorted(set(host_death.MOVES) - {"resize", "confirm"})


def sriov_cloud(make_cloud, hosts=2):
    return make_cloud(hosts=hosts, **SRIOV)


@pytest.fixture
def cloud(make_cloud):
    return sriov_cloud(make_cloud)


def direct_port(cloud, vnic_type="direct", rules=BW_RULES):
    """A port of ``vnic_type`` on a new physnet0 network, with a QoS policy of ``rules``."""
    net_api, ctxt = cloud.aio.network_api, get_admin_context()
    policy = net_api.create_qos_policy(ctxt, "qos", rules) if rules else None
    net = net_api.create_network(ctxt, "phys", cidr="10.30.0.0/24", shared=True,
                                 physical_network="physnet0", network_type="vlan")
    return net_api.create_port(ctxt, {"network_id": net["id"], "binding:vnic_type": vnic_type,
                                      "qos_policy_id": policy and policy["id"]})


def boot(cloud, port, expect="ACTIVE"):
    sid = cloud.boot(networks=[{"port": port["id"]}])
    assert cloud.server(sid)["status"] == expect, cloud.fault(sid)
    return sid


def _names(cloud):
    return {rp["uuid"]: rp["name"] for rp in cloud.aio.placement.list_resource_providers()}


def _devices(cloud, host):
    return {d["address"]: d for d in cloud.aio.computes[host].driver.sriov_devices()}


def claimed(cloud):
    """{host: {(pf, address)}} of the NIC devices each host counts as given out."""
    out = {}
    for host, compute in cloud.aio.computes.items():
        devices = _devices(cloud, host)
        held = {(devices[a].get("parent_ifname") or devices[a]["devname"], a)
                for a in compute.rt.usage()["pci"] if a in devices}
        if held:
            out[host] = held
    return out


def books(cloud, sid, port, *consumers):
    """Everything SR-IOV a move changes: PF allocations by consumer, the devices each
    host claimed, the port's active binding (host, PF of its allocation, its device)."""
    names = _names(cloud)
    allocations = {}
    for consumer in (sid,) + consumers:
        held = {names[rp]: a["resources"] for rp, a in cloud.allocations(consumer).items()
                if "NIC Switch agent:" in names[rp]}
        if held:
            allocations[consumer] = held
    p = cloud.aio.network_api.get_port(get_admin_context(), port["id"])
    profile = p["binding:profile"]
    binding = {"host": p["binding:host_id"], "vnic_type": p["binding:vnic_type"],
               "vif_type": p["binding:vif_type"],
               "allocation": sorted(names[rp] for rp in (profile.get("allocation") or {}).values()),
               "pci_slot": profile.get("pci_slot"),
               "physical_network": profile.get("physical_network"),
               "pci_vendor_info": profile.get("pci_vendor_info")}
    return {"allocations": allocations, "claimed": claimed(cloud), "binding": binding}


def assert_same_pf(cloud, state):
    """The bound port's VF (or PF) is on the PF its bandwidth was allocated from, and is
    a device the host counts as the port's."""
    b = state["binding"]
    host = b["host"]
    device = _devices(cloud, host)[b["pci_slot"]]
    pf = device.get("parent_ifname") or device["devname"]
    if b["allocation"]:
        assert b["allocation"] == [f"{host}:NIC Switch agent:{pf}"], state
    assert (pf, b["pci_slot"]) in state["claimed"][host], state
    assert b["physical_network"] == "physnet0"
    assert b["pci_vendor_info"] == f"8086:{device['product_id']}"


def assert_settled_on(cloud, sid, port, host, *consumers):
    """The move is over: the server's bandwidth and VF are on ``host`` alone, on one PF."""
    after = books(cloud, sid, port, *consumers)
    assert after["allocations"] == {sid: {pf_rp(host): BW}}
    assert after["claimed"] == {host: {("ens2", after["binding"]["pci_slot"])}}
    assert after["binding"]["host"] == host
    assert_same_pf(cloud, after)
    return after


def pf_rp(host, pf="ens2"):
    return f"{host}:NIC Switch agent:{pf}"


def _act(cloud, sid, body, expect=202, version="2.79"):
    status, resp = cloud.action(sid, body, version=version)
    assert status == expect, resp
    cloud.aio.wait_idle()


def _migration(cloud, sid):
    return sorted(cloud.migrations(sid), key=lambda m: m["created_at"])[-1]


def _other(cloud, host):
    return next(h for h in cloud.aio.computes if h != host)


def _booted(cloud, vnic_type="direct"):
    port = direct_port(cloud, vnic_type)
    sid = boot(cloud, port)
    src = cloud.host_of(sid)
    state = books(cloud, sid, port)
    vf = state["binding"]["pci_slot"]
    assert state["allocations"] == {sid: {pf_rp(src): BW}}
    assert state["claimed"] == {src: {("ens2", vf)}}
    assert state["binding"]["host"] == src and state["binding"]["vif_type"] == "hw_veb"
    assert_same_pf(cloud, state)
    return port, sid, src, state


# -- boot ---------------------------------------------------------------------------------

def test_a_direct_port_takes_a_vf_of_the_pf_its_bandwidth_comes_from(cloud):
    port, sid, src, state = _booted(cloud)
    # ens1's VFs come first by address; its bandwidth is too small for the port.
    assert state["binding"]["pci_slot"] == "0000:3c:02.0"
    names = {rp["name"] for rp in cloud.aio.placement.list_resource_providers()}
    assert {f"{h}:NIC Switch agent:{pf}" for h in cloud.aio.computes
            for pf in ("ens1", "ens2")} <= names
    assert cloud.api("DELETE", f"/servers/{sid}")[0] == 204
    cloud.aio.wait_idle()
    assert claimed(cloud) == {} and cloud.allocations(sid) == {}


def test_macvtap_and_direct_physical_ports(cloud):
    macvtap = direct_port(cloud, "macvtap")
    sid = boot(cloud, macvtap)
    state = books(cloud, sid, macvtap)
    assert state["binding"]["vif_type"] == "hw_veb" and state["binding"]["vnic_type"] == "macvtap"
    assert_same_pf(cloud, state)
    # A whole PF: ens2 has a VF given out on the macvtap port's host, so a direct-physical
    # port there cannot have it; its bandwidth and the PF come from the other host.
    physical = direct_port(cloud, "direct-physical")
    other = boot(cloud, physical)
    state = books(cloud, other, physical)
    host = state["binding"]["host"]
    assert state["binding"]["vif_type"] == "hostdev_physical"
    assert state["binding"]["pci_slot"] == "0000:3c:00.0"  # ens2 itself
    assert state["claimed"][host] == {("ens2", "0000:3c:00.0")}
    assert_same_pf(cloud, state)


def test_two_direct_ports_take_two_vfs_of_the_pf_of_their_bandwidth_and_move_with_it(cloud):
    ports = [direct_port(cloud), direct_port(cloud)]
    sid = cloud.boot(networks=[{"port": p["id"]} for p in ports])
    assert cloud.server(sid)["status"] == "ACTIVE", cloud.fault(sid)

    def check(host):
        states = [books(cloud, sid, p) for p in ports]
        for state in states:
            assert_same_pf(cloud, state)
        slots = {state["binding"]["pci_slot"] for state in states}
        assert len(slots) == 2
        assert claimed(cloud) == {host: {("ens2", slot) for slot in slots}}
        assert states[0]["allocations"] == {sid: {pf_rp(host): {rc: 2 * n
                                                                for rc, n in BW.items()}}}

    check(cloud.host_of(sid))
    _act(cloud, sid, {"migrate": None})
    _act(cloud, sid, {"confirmResize": None}, expect=204)
    check(cloud.host_of(sid))


def test_a_direct_port_without_a_policy_takes_any_free_vf_of_its_physnet(cloud):
    port = direct_port(cloud, rules=None)
    sid = boot(cloud, port)
    state = books(cloud, sid, port)
    host = cloud.host_of(sid)
    assert state["allocations"] == {}
    assert state["claimed"] == {host: {("ens1", "0000:3b:02.0")}}
    assert state["binding"]["pci_slot"] == "0000:3b:02.0" and state["binding"]["allocation"] == []


def test_no_free_vf_on_the_pf_with_the_bandwidth_means_no_valid_host(make_cloud):
    cloud = make_cloud(hosts=1, simulated={"sriov_nics": ["ens1:1:10000:10000"]},
                       pci={"device_spec": ['{"devname": "ens1", "physical_network": "physnet0"}']})
    # A port without bandwidth took ens1's only VF: placement still has the bandwidth.
    first = boot(cloud, direct_port(cloud, rules=None))
    host = cloud.host_of(first)
    port = direct_port(cloud)
    sid = boot(cloud, port, expect="ERROR")
    assert cloud.allocations(sid) == {}
    assert claimed(cloud) == {host: {("ens1", "0000:3b:02.0")}}
    assert books(cloud, sid, port)["binding"]["host"] == ""


def test_a_rescheduled_build_takes_the_vf_on_the_alternate(make_cloud):
    cloud = sriov_cloud(make_cloud)
    simulated.inject_fault(None, "spawn", times=1)
    port = direct_port(cloud)
    sid = boot(cloud, port)
    host = cloud.host_of(sid)
    state = books(cloud, sid, port)
    assert state["allocations"] == {sid: {pf_rp(host): BW}}
    assert state["claimed"] == {host: {("ens2", "0000:3c:02.0")}}
    assert_same_pf(cloud, state)


# -- moves --------------------------------------------------------------------------------

def test_cold_migrate_revert_gives_back_the_source_vf_and_confirm_frees_it(cloud):
    port, sid, src, before = _booted(cloud)
    dest = _other(cloud, src)
    _act(cloud, sid, {"migrate": None})
    mig = _migration(cloud, sid)["uuid"]
    moved = books(cloud, sid, port, mig)
    assert moved["allocations"] == {sid: {pf_rp(dest): BW}, mig: {pf_rp(src): BW}}
    dest_vf = moved["binding"]["pci_slot"]
    assert moved["claimed"] == {src: before["claimed"][src], dest: {("ens2", dest_vf)}}
    assert moved["binding"]["host"] == dest
    assert_same_pf(cloud, moved)

    _act(cloud, sid, {"revertResize": None})
    assert books(cloud, sid, port, mig) == before

    _act(cloud, sid, {"migrate": None})
    mig = _migration(cloud, sid)["uuid"]
    _act(cloud, sid, {"confirmResize": None}, expect=204)
    assert_settled_on(cloud, sid, port, dest, mig)


def test_resize_and_confirm(cloud):
    port, sid, src, before = _booted(cloud)
    _act(cloud, sid, {"resize": {"flavorRef": "2"}})
    assert cloud.server(sid)["status"] == "VERIFY_RESIZE"
    dest = cloud.host_of(sid)
    mig = _migration(cloud, sid)["uuid"]
    moved = books(cloud, sid, port, mig)
    assert moved["allocations"] == {sid: {pf_rp(dest): BW}, mig: {pf_rp(src): BW}}
    assert_same_pf(cloud, moved)
    _act(cloud, sid, {"confirmResize": None}, expect=204)
    assert_settled_on(cloud, sid, port, dest, mig)


def test_a_failed_resize_claim_reschedules_to_an_alternate_with_its_vf(make_cloud):
    cloud = sriov_cloud(make_cloud, hosts=3)
    port, sid, src, before = _booted(cloud)
    simulated.inject_fault(None, "prep_resize", instance_uuid=sid)  # the first host tried
    _act(cloud, sid, {"migrate": None})
    assert cloud.server(sid)["status"] == "VERIFY_RESIZE"
    dest = cloud.host_of(sid)
    mig = _migration(cloud, sid)["uuid"]
    moved = books(cloud, sid, port, mig)
    assert moved["allocations"] == {sid: {pf_rp(dest): BW}, mig: {pf_rp(src): BW}}
    assert set(moved["claimed"]) == {src, dest}
    assert_same_pf(cloud, moved)
    _act(cloud, sid, {"revertResize": None})
    assert books(cloud, sid, port, mig) == before


@pytest.mark.parametrize("move,method", [("live-migrate", "pre_live_migration"),
                                         ("evacuate", "spawn"), ("unshelve", "spawn")])
def test_a_move_rescheduled_to_an_alternate_takes_its_vf_there(make_cloud, move, method):
    """Three hosts: the first destination tried fails and keeps nothing; the alternate
    has the bandwidth and a VF of the same PF."""
    cloud = sriov_cloud(make_cloud, hosts=3)
    port, sid, src, before = _booted(cloud)
    if move == "evacuate":
        _force_down(cloud, src, True)
    if move == "unshelve":
        _act(cloud, sid, {"shelve": None})
        body, version, expect = {"unshelve": None}, "2.79", 202
    else:
        body, version, expect = REQUESTS[move]
    simulated.inject_fault(None, method, instance_uuid=sid)  # the first host tried
    _act(cloud, sid, body, expect=expect, version=version)
    assert not simulated.pending_faults(None)
    host = cloud.host_of(sid)
    assert cloud.server(sid)["status"] == "ACTIVE"
    assert host != src or move == "unshelve"
    consumers = () if move == "unshelve" else (_migration(cloud, sid)["uuid"],)
    if move == "evacuate":  # the migration holds the down source's until it is back
        state = books(cloud, sid, port, *consumers)
        assert state["allocations"] == {sid: {pf_rp(host): BW}, consumers[0]: {pf_rp(src): BW}}
        _hosts_back_up(cloud)
        cloud.aio.wait_idle()
    assert_settled_on(cloud, sid, port, host, *consumers)


def test_live_migration_and_its_rollback(cloud):
    port, sid, src, before = _booted(cloud)
    dest = _other(cloud, src)
    simulated.inject_fault(src, "live_migration", instance_uuid=sid)
    _act(cloud, sid, {"os-migrateLive": {"host": None, "block_migration": "auto"}},
         version="2.30")
    mig = _migration(cloud, sid)
    assert mig["status"] == "error" and cloud.host_of(sid) == src
    assert books(cloud, sid, port, mig["uuid"]) == before

    _act(cloud, sid, {"os-migrateLive": {"host": None, "block_migration": "auto"}},
         version="2.30")
    mig = _migration(cloud, sid)["uuid"]
    assert cloud.host_of(sid) == dest
    assert_settled_on(cloud, sid, port, dest, mig)


def test_evacuate_takes_a_vf_on_the_new_host_and_the_old_one_frees_its_own(cloud):
    port, sid, src, before = _booted(cloud)
    dest = _other(cloud, src)
    _force_down(cloud, src, True)
    _act(cloud, sid, {"evacuate": {}}, expect=200)
    mig = _migration(cloud, sid)["uuid"]
    moved = books(cloud, sid, port, mig)
    assert cloud.host_of(sid) == dest
    assert moved["allocations"] == {sid: {pf_rp(dest): BW}, mig: {pf_rp(src): BW}}
    assert moved["claimed"] == {dest: {("ens2", moved["binding"]["pci_slot"])}}
    assert_same_pf(cloud, moved)
    _hosts_back_up(cloud)
    cloud.aio.wait_idle()
    assert assert_settled_on(cloud, sid, port, dest, mig)["claimed"] == moved["claimed"]


def test_shelve_offload_frees_the_vf_and_unshelve_takes_one_again(cloud):
    port, sid, src, before = _booted(cloud)
    _act(cloud, sid, {"shelve": None})
    assert cloud.server(sid)["status"] == "SHELVED_OFFLOADED"
    shelved = books(cloud, sid, port)
    assert shelved["allocations"] == {} and shelved["claimed"] == {}
    assert shelved["binding"]["host"] == "" and shelved["binding"]["pci_slot"] is None
    simulated.inject_fault(None, "spawn", instance_uuid=sid)  # a reschedule on the way
    _act(cloud, sid, {"unshelve": None})
    assert cloud.server(sid)["status"] == "ACTIVE", cloud.fault(sid)
    host = cloud.host_of(sid)
    assert_settled_on(cloud, sid, port, host)


def test_a_cross_cell_resize_takes_a_vf_in_the_other_cell_and_a_revert_the_source_vf_back(
        make_xcloud):
    cloud = make_xcloud(**SRIOV)
    cloud.allow_cross_cell()
    port, sid, src, before = _booted(cloud)
    assert cloud.mapped_cell(sid) == "cell1"
    dest = _other(cloud, src)
    _act(cloud, sid, {"resize": {"flavorRef": "2"}})
    mig = _migration(cloud, sid)["uuid"]
    assert cloud.mapped_cell(sid) == "cell2" and cloud.host_of(sid) == dest
    moved = books(cloud, sid, port, mig)
    assert moved["allocations"] == {sid: {pf_rp(dest): BW}, mig: {pf_rp(src): BW}}
    assert moved["claimed"] == {src: before["claimed"][src],
                                dest: {("ens2", moved["binding"]["pci_slot"])}}
    assert_same_pf(cloud, moved)
    # The source's binding, kept INACTIVE for a revert, still names the source's VF.
    [kept] = [b for b in cloud.aio.network_api.list_port_bindings(get_admin_context(), port["id"])
              if b["host"] == src]
    assert kept["status"] == "INACTIVE"
    assert kept["profile"]["pci_slot"] == before["binding"]["pci_slot"]

    _act(cloud, sid, {"revertResize": None})
    assert cloud.mapped_cell(sid) == "cell1"
    assert books(cloud, sid, port, mig) == before

    _act(cloud, sid, {"resize": {"flavorRef": "2"}})
    mig = _migration(cloud, sid)["uuid"]
    _act(cloud, sid, {"confirmResize": None}, expect=204)
    assert_settled_on(cloud, sid, port, dest, mig)


# (the move, the driver method that fails on the host that runs it: the
#  destination's unless it is the source's step)
FAILURES = [("migrate", "prep_resize"), ("migrate", "migrate_disk_and_power_off"),
            ("migrate", "finish_migration"), ("live-migrate", "pre_live_migration"),
            ("live-migrate", "live_migration"),
            ("live-migrate", "post_live_migration_at_destination"), ("evacuate", "spawn")]
SOURCE_STEPS = ("migrate_disk_and_power_off", "live_migration")
REQUESTS = {"migrate": ({"migrate": None}, "2.79", 202),
            "live-migrate": ({"os-migrateLive": {"host": None, "block_migration": "auto"}},
                             "2.30", 202),
            "evacuate": ({"evacuate": {}}, "2.79", 200)}


@pytest.mark.parametrize("move,method", FAILURES)
def test_a_move_failing_at_any_step_gives_back_exactly_what_it_took(cloud, move, method):
    """Two hosts: the destination is the only one, so a failure ends the move; the
    books are those before it (the source's VF, its binding, its PF allocation)."""
    port, sid, src, _ = _booted(cloud)
    if move == "evacuate":
        _force_down(cloud, src, True)
    before = books(cloud, sid, port)
    host = src if method in SOURCE_STEPS else _other(cloud, src)
    simulated.inject_fault(host, method, instance_uuid=sid)
    body, version, expect = REQUESTS[move]
    _act(cloud, sid, body, expect=expect, version=version)
    mig = _migration(cloud, sid)
    assert mig["status"] in ("error", "failed"), mig
    assert cloud.host_of(sid) == src
    assert books(cloud, sid, port, mig["uuid"]) == before
    assert not simulated.pending_faults(host)


# -- a conductor dying at every step boundary ------------------------------------------------

@pytest.mark.parametrize("operation", MOVES)
def test_a_conductor_dying_in_a_move_of_a_server_with_a_direct_port(make_cloud, monkeypatch,
                                                                    operation):
    """The crash harness of every move (test_crash_recovery.py), for a server whose
    direct port asks for bandwidth: the books it compares include the PF
    allocations, the VF each host counts as claimed and the one each binding names."""
    cloud = sriov_cloud(make_cloud)
    crash_at_every_boundary(cloud, arm_crashes(cloud, monkeypatch), operation, OPERATIONS,
                            boot=lambda cloud: boot(cloud, direct_port(cloud)))


# -- a host dying inside a move ----------------------------------------------------------------

def _boot_without_waiting(cloud):
    """A server with a new direct port, as the host-death harness boots its servers."""
    status, body = cloud.api("POST", "/servers", {"server": {
        "name": "vm", "flavorRef": "1", "imageRef": cloud.aio.demo_image["id"],
        "networks": [{"port": direct_port(cloud)["id"]}]}})
    assert status == 202, body
    return body["server"]["id"]


@pytest.mark.parametrize("move", sorted(HOST_DEATH_MOVES))
def test_a_host_dying_inside_a_move_of_a_server_with_a_direct_port(make_cloud, monkeypatch,
                                                                   move):
    """The host-death harness (test_compute_crash_recovery.py) for a server with a direct
    port: after the conductor's undo and the host's restart the VFs claimed and named
    by the bindings are those before the move or after a clean one."""
    cloud = sriov_cloud(make_cloud)
    monkeypatch.setattr(host_death, "_boot", _boot_without_waiting)
    host_death.host_dies_at_every_effect(
        cloud, host_death.arm_host_deaths(cloud, monkeypatch), move)


@pytest.mark.parametrize("operation", sorted(CROSS_CELL_OPERATIONS))
def test_a_conductor_dying_in_a_cross_cell_move_of_a_server_with_a_direct_port(
        make_xcloud, monkeypatch, operation):
    cloud = make_xcloud(**SRIOV)
    cloud.allow_cross_cell()
    crash_at_every_boundary(cloud, arm_crashes(cloud, monkeypatch), operation,
                            CROSS_CELL_OPERATIONS,
                            boot=lambda cloud: boot(cloud, direct_port(cloud)))


def test_a_host_dying_inside_a_cross_cell_resize_of_a_server_with_a_direct_port(
        make_xcloud, monkeypatch):
    cloud = make_xcloud(**SRIOV)
    cloud.allow_cross_cell()
    monkeypatch.setattr(host_death, "_boot", _boot_without_waiting)
    before, finished, _ = host_death.host_dies_at_every_effect(
        cloud, host_death.arm_host_deaths(cloud, monkeypatch), "resize")
    assert before["cell"] != finished["cell"]
    # In VERIFY_RESIZE: the destination's VF, and the source's kept for a revert.
    assert {role for role, _ in finished["devices"]} == {"source", "other"}


def test_ports_whose_bandwidth_is_on_two_pfs_get_each_its_own_back_on_revert(make_cloud):
    """Each PF holds the bandwidth of one port only: after a revert, each port's
    profile names again the PF of its own VF (not a guess from the allocation)."""
    cloud = make_cloud(hosts=2, simulated={"sriov_nics": ["ens1:2:1500:1500",
                                                          "ens2:2:1500:1500"]},
                       pci=SRIOV["pci"])
    ports = [direct_port(cloud), direct_port(cloud)]
    sid = cloud.boot(networks=[{"port": p["id"]} for p in ports])
    assert cloud.server(sid)["status"] == "ACTIVE", cloud.fault(sid)
    before = [books(cloud, sid, p) for p in ports]
    assert {s["binding"]["allocation"][0].rpartition(":")[2] for s in before} == {"ens1", "ens2"}
    _act(cloud, sid, {"migrate": None})
    for state in [books(cloud, sid, p) for p in ports]:
        assert_same_pf(cloud, state)
    _act(cloud, sid, {"revertResize": None})
    after = [books(cloud, sid, p) for p in ports]
    assert [s["binding"] for s in after] == [s["binding"] for s in before]
    for state in after:
        assert_same_pf(cloud, state)


def test_a_resize_on_the_same_host_holds_two_vfs_until_confirmed_or_reverted(make_cloud):
    cloud = make_cloud(hosts=1, DEFAULT={"allow_resize_to_same_host": True}, **SRIOV)
    port, sid, host, before = _booted(cloud)
    _act(cloud, sid, {"resize": {"flavorRef": "2"}})
    assert cloud.server(sid)["status"] == "VERIFY_RESIZE" and cloud.host_of(sid) == host
    mig = _migration(cloud, sid)["uuid"]
    resized = books(cloud, sid, port, mig)
    assert resized["claimed"] == {host: {("ens2", "0000:3c:02.0"), ("ens2", "0000:3c:02.1")}}
    assert resized["binding"]["pci_slot"] == "0000:3c:02.1"
    assert_same_pf(cloud, resized)
    _act(cloud, sid, {"revertResize": None})
    assert books(cloud, sid, port, mig) == before
    _act(cloud, sid, {"resize": {"flavorRef": "2"}})
    mig = _migration(cloud, sid)["uuid"]
    _act(cloud, sid, {"confirmResize": None}, expect=204)
    assert assert_settled_on(cloud, sid, port, host, mig)["binding"]["pci_slot"] == "0000:3c:02.1"
