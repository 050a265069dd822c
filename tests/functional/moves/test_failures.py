"""Moves that fail: rescheduling, exhaustion, each compute step failing in turn.

After a failed move the books (allocations by consumer, usages by provider),
the server's host, flavor, state and guest are exactly as before the request.
"""
import os

import pytest

from novella.compute.exceptions import ComputeResourcesUnavailable
from novella.virt import simulated

TINY = {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}
SMALL = {"VCPU": 1, "MEMORY_MB": 2048, "DISK_GB": 20}


def _prep_results(cloud, sid, action="resize"):
    """[(host, result)] of the compute_prep_resize events of the server's latest ``action``."""
    status, body = cloud.api("GET", f"/servers/{sid}/os-instance-actions")
    req_id = next(a["request_id"] for a in body["instanceActions"] if a["action"] == action)
    events = cloud.api("GET", f"/servers/{sid}/os-instance-actions/{req_id}")[1]
    return sorted((e["host"], e["result"]) for e in events["instanceAction"]["events"]
                  if e["event"] == "compute_prep_resize")


def _node_row_usage(cloud, host):
    """(vcpus_used, memory_mb_used) of the host's compute_nodes row (the tracker's view)."""
    import sqlalchemy as sa
    from novella.db import cell_models as cm, cells
    with cells.cell_database(cloud.aio.cells[0]).session() as s:
        node = s.scalars(sa.select(cm.ComputeNode).where(cm.ComputeNode.host == host)).one()
        return node.vcpus_used, node.memory_mb_used


def _snapshot(cloud, sid):
    srv = cloud.server(sid)
    host = srv["OS-EXT-SRV-ATTR:host"]
    guest = simulated.driver_for(host).get_info({"uuid": sid})["state"]
    return (cloud.books(sid), srv["status"], host, srv["flavor"]["original_name"], guest,
            sorted(os.listdir(simulated.driver_for(host).instance_dir(sid))))


def _assert_rolled_back(cloud, sid, before):
    (mig,) = cloud.migrations(sid)
    assert mig["status"] == "error"
    assert cloud.allocations(mig["uuid"]) == {}
    assert _snapshot(cloud, sid) == before
    assert cloud.fault(sid)
    assert cloud.events(sid, "resize")["conductor_migrate_server"] == "Error"
    for host, drv in ((h, simulated.driver_for(h)) for h in cloud.aio.computes):
        leftovers = [d for d in os.listdir(drv.path) if d.startswith(sid)]
        assert leftovers == ([sid] if host == before[2] else []), host
    return mig


def test_reschedule_to_an_alternate_after_a_claim_failure(make_cloud):
    cloud = make_cloud(hosts=3)
    sid = cloud.boot(flavor="1")
    src = cloud.host_of(sid)
    # Whichever host the scheduler picks first refuses in the driver's prep_resize.
    simulated.inject_fault(None, "prep_resize", instance_uuid=sid,
                           exc=ComputeResourcesUnavailable("no room"))
    assert cloud.action(sid, {"resize": {"flavorRef": "2"}})[0] == 202
    cloud.aio.wait_idle()
    assert simulated.pending_faults(None) == []
    (mig,) = cloud.migrations(sid)
    dest = mig["dest_compute"]
    (refused,) = [h for h in cloud.aio.computes if h not in (src, dest)]
    assert _prep_results(cloud, sid) == sorted([(refused, "Error"), (dest, "Success")])
    assert cloud.server(sid)["status"] == "VERIFY_RESIZE" and cloud.host_of(sid) == dest
    books, usages = cloud.books(sid, mig["uuid"])
    assert books == {sid: {dest: SMALL}, mig["uuid"]: {src: TINY}}
    assert usages[refused] == {"VCPU": 0, "MEMORY_MB": 0, "DISK_GB": 0}  # claim released
    # The refused host's own resize claim was given back too.
    assert _node_row_usage(cloud, refused) == (0, 0)
    assert _node_row_usage(cloud, dest) == (SMALL["VCPU"], SMALL["MEMORY_MB"])


def test_all_alternates_fail(make_cloud):
    cloud = make_cloud(hosts=3)
    sid = cloud.boot(flavor="1")
    before = _snapshot(cloud, sid)
    others = [h for h in cloud.aio.computes if h != before[2]]
    for host in others:
        simulated.inject_fault(host, "prep_resize", instance_uuid=sid,
                               exc=ComputeResourcesUnavailable(f"no room on {host}"))
    assert cloud.action(sid, {"resize": {"flavorRef": "2"}})[0] == 202
    cloud.aio.wait_idle()
    assert all(simulated.pending_faults(h) == [] for h in others)  # each was tried
    assert _prep_results(cloud, sid) == sorted((h, "Error") for h in others)
    _assert_rolled_back(cloud, sid, before)
    assert "Exhausted all hosts" in cloud.fault(sid)
    assert all(_node_row_usage(cloud, h) == (0, 0) for h in others)


@pytest.mark.parametrize("side,method,stopped,same_host", [
    ("source", "migrate_disk_and_power_off", False, False),
    ("dest", "finish_migration", False, False),
    ("dest", "finish_migration", True, False),
    ("dest", "finish_migration", False, True),
    ("source", "migrate_disk_and_power_off", False, True),
])
def test_each_compute_step_failing_rolls_back_exactly(make_cloud, side, method, stopped,
                                                      same_host):
    cloud = (make_cloud(hosts=1, DEFAULT={"allow_resize_to_same_host": True}) if same_host
             else make_cloud(hosts=2))
    sid = cloud.boot(flavor="1")
    if stopped:
        assert cloud.action(sid, {"os-stop": None})[0] == 202
        cloud.aio.wait_idle()
    before = _snapshot(cloud, sid)
    src = before[2]
    dest = next((h for h in cloud.aio.computes if h != src), src)
    simulated.inject_fault(src if side == "source" else dest, method, instance_uuid=sid)
    assert cloud.action(sid, {"resize": {"flavorRef": "2"}})[0] == 202
    cloud.aio.wait_idle()
    assert not simulated.pending_faults(src if side == "source" else dest)
    mig = _assert_rolled_back(cloud, sid, before)
    assert "injected fault" in cloud.fault(sid)
    # The server moves again once the host is healthy.
    assert cloud.action(sid, {"resize": {"flavorRef": "2"}})[0] == 202
    cloud.aio.wait_idle()
    assert cloud.server(sid)["status"] == "VERIFY_RESIZE"
    assert mig["uuid"] not in {m["uuid"] for m in cloud.migrations(sid)
                               if m["status"] == "finished"}


@pytest.mark.parametrize("terminated_first", [True, False])
def test_a_delete_arriving_mid_move_leaves_no_allocation(make_cloud, monkeypatch,
                                                         terminated_first):
    """The server is deleted while its move runs, then the move fails and rolls back:
    whichever finishes first, neither the instance nor the migration keeps anything."""
    from novella.context import get_admin_context
    cloud = make_cloud(hosts=2)
    sid = cloud.boot(flavor="1")
    src = cloud.host_of(sid)
    dest = next(h for h in cloud.aio.computes if h != src)
    driver = simulated.driver_for(dest)

    def finish_migration(*args, **kwargs):
        assert cloud.api("DELETE", f"/servers/{sid}")[0] == 204     # task_state deleting
        if terminated_first:                                         # the host got there first
            cloud.aio.computes[src].terminate_instance(get_admin_context(), sid)
        raise simulated.SimulatedFault("the destination failed")
    monkeypatch.setattr(driver, "finish_migration", finish_migration)

    assert cloud.action(sid, {"migrate": None})[0] == 202
    cloud.aio.wait_idle()
    assert cloud.api("GET", f"/servers/{sid}")[0] == 404
    (mig,) = cloud.migrations(sid) or [None]
    consumers = [sid] + ([mig["uuid"]] if mig else [])
    assert all(cloud.allocations(c) == {} for c in consumers)
    assert all(all(v == 0 for v in u.values()) for u in cloud.usages().values())
