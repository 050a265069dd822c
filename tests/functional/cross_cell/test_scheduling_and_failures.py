"""Which cell a move goes to, and moves that fail at every step of CrossCellMigrationTask.

A failed cross-cell move leaves the server in the source cell as it was: no
copy in the target cell, no snapshot, no destination binding, allocations
exactly as before.
"""
import os

import pytest
import sqlalchemy as sa

from novella.compute.exceptions import ComputeResourcesUnavailable
from novella.compute.states import power_state
from novella.context import get_admin_context
from novella.db import cell_models as cm
from novella.db import cells as cells_mod
from novella.virt import simulated

TINY = {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}
SMALL = {"VCPU": 1, "MEMORY_MB": 2048, "DISK_GB": 20}
ZERO = {"VCPU": 0, "MEMORY_MB": 0, "DISK_GB": 0}
SRC, DEST = "cell1-host1", "cell2-host1"
DRAIN = {"filter_scheduler": {"cross_cell_move_weight_multiplier": -1000000.0}}


def _resize(cloud, sid, flavor="2"):
    status, body = cloud.action(sid, {"resize": {"flavorRef": flavor}})
    assert status == 202, body
    cloud.aio.wait_idle()
    return max(cloud.migrations(sid), key=lambda m: m["created_at"])  # the newest


def _boot_on(cloud, host):
    sid = cloud.boot(flavor="1", availability_zone=f"nova:{host}")
    assert cloud.host_of(sid) == host
    return sid


def test_weigher_keeps_the_move_in_the_source_cell(make_xcloud):
    cloud = make_xcloud(hosts_per_cell=2)
    cloud.allow_cross_cell()
    sid = _boot_on(cloud, SRC)
    mig = _resize(cloud, sid)
    assert mig["dest_compute"] == "cell1-host2" and cloud.mapped_cell(sid) == "cell1"
    assert cloud.rows(sid)["cell1"]["migrations"] == [("finished", False, False)]
    assert cloud.rows(sid)["cell2"]["instance"] is None


def test_negative_multiplier_drains_the_cell(make_xcloud):
    cloud = make_xcloud(hosts_per_cell=2, **DRAIN)
    cloud.allow_cross_cell()
    sid = _boot_on(cloud, SRC)
    mig = _resize(cloud, sid)
    assert mig["dest_compute"].startswith("cell2-") and cloud.mapped_cell(sid) == "cell2"


def test_without_the_policy_the_move_stays_in_the_cell(make_xcloud):
    cloud = make_xcloud(hosts_per_cell=2, **DRAIN)  # the weigher would pick cell2
    sid = _boot_on(cloud, SRC)
    mig = _resize(cloud, sid)
    assert mig["dest_compute"] == "cell1-host2" and cloud.mapped_cell(sid) == "cell1"
    # A target host in another cell is unknown to the cell-bound move.
    status, _ = cloud.action(sid, {"confirmResize": None})
    cloud.aio.wait_idle()
    status, body = cloud.action(sid, {"migrate": {"host": DEST}}, version="2.56")
    assert status == 400, body


def test_an_old_compute_service_keeps_the_move_in_the_cell(make_xcloud):
    cloud = make_xcloud(hosts_per_cell=2, **DRAIN)
    cloud.allow_cross_cell()
    with cells_mod.cell_database(cloud.aio.cells[1]).session(write=True) as s:
        s.execute(sa.update(cm.Service).where(cm.Service.host == "cell2-host2")
                  .values(version=2))
    sid = _boot_on(cloud, SRC)
    mig = _resize(cloud, sid)
    assert mig["dest_compute"] == "cell1-host2" and cloud.mapped_cell(sid) == "cell1"


def test_request_spec_limited_to_the_target_cell(make_xcloud):
    cloud = make_xcloud(hosts_per_cell=2)
    cell1, cell2 = cloud.aio.cells
    spec = {"project_id": "p", "user_id": "u", "num_instances": 1, "image": {"id": None},
            "flavor": {"vcpus": 1, "memory_mb": 512, "root_gb": 1, "ephemeral_gb": 0,
                       "swap": 0, "extra_specs": {}},
            "requested_destination": {"host": None, "node": None, "cell_uuid": cell2.uuid,
                                      "allow_cross_cell_move": True,
                                      "source_cell_uuid": cell1.uuid}}
    consumer = "11111111-2222-3333-4444-555555555555"
    (hosts,) = cloud.aio.scheduler.select_destinations(get_admin_context(), spec, [consumer])
    # The weigher prefers the source cell, but the spec allows only the target's.
    assert {h["cell_uuid"] for h in hosts} == {cell2.uuid} and len(hosts) == 2
    cloud.aio.placement.delete_allocations(consumer)
    spec["requested_destination"]["cell_uuid"] = None
    (hosts,) = cloud.aio.scheduler.select_destinations(get_admin_context(), spec, [consumer])
    assert hosts[0]["cell_uuid"] == cell1.uuid
    cloud.aio.placement.delete_allocations(consumer)


def test_reschedule_to_an_alternate_in_the_target_cell(make_xcloud):
    cloud = make_xcloud(hosts_per_cell=2, **DRAIN)
    cloud.allow_cross_cell()
    sid = _boot_on(cloud, SRC)
    # Whichever target-cell host is tried first refuses in the driver's prep_resize.
    simulated.inject_fault(None, "prep_resize", instance_uuid=sid,
                           exc=ComputeResourcesUnavailable("no room"))
    mig = _resize(cloud, sid)
    assert simulated.pending_faults(None) == []
    dest = mig["dest_compute"]
    (refused,) = {"cell2-host1", "cell2-host2"} - {dest}
    assert cloud.server(sid)["status"] == "VERIFY_RESIZE"
    assert cloud.host_of(sid) == dest and cloud.mapped_cell(sid) == "cell2"
    books, usages = cloud.books(sid, mig["uuid"])
    assert books == {sid: {dest: SMALL}, mig["uuid"]: {SRC: TINY}}
    assert usages[refused] == ZERO
    assert cloud.bindings(sid) == {SRC: "INACTIVE", dest: "ACTIVE"}
    events = cloud.api("GET", f"/servers/{sid}/os-instance-actions")[1]["instanceActions"]
    req_id = next(a["request_id"] for a in events if a["action"] == "resize")
    detail = cloud.api("GET", f"/servers/{sid}/os-instance-actions/{req_id}")[1]
    prep = sorted((e["host"], e["result"]) for e in detail["instanceAction"]["events"]
                  if e["event"] == "compute_prep_snapshot_based_resize_at_dest")
    assert prep == sorted([(refused, "Error"), (dest, "Success")])


def _fail_target_db_setup(cloud, monkeypatch):
    from novella.conductor.tasks import cross_cell as xtasks
    real = xtasks.instance_copy.copy_instance

    def copy_then_fail(*args, **kwargs):
        real(*args, **kwargs)
        raise RuntimeError("injected fault: target cell database went away")
    monkeypatch.setattr(xtasks.instance_copy, "copy_instance", copy_then_fail)


def _fail_prep_at_dest(cloud, monkeypatch):
    cloud.aio.network_api.unbindable_hosts.add(DEST)


@pytest.mark.parametrize("step,inject", [
    ("TargetDBSetupTask", _fail_target_db_setup),
    ("PrepResizeAtDestTask", _fail_prep_at_dest),
    ("PrepResizeAtSourceTask:power_off", lambda c, m: simulated.inject_fault(SRC, "power_off")),
    ("PrepResizeAtSourceTask:snapshot", lambda c, m: simulated.inject_fault(SRC, "snapshot")),
    ("FinishResizeAtDestTask:spawn", lambda c, m: simulated.inject_fault(DEST, "spawn")),
])
def test_failure_at_each_step_leaves_the_server_in_the_source_cell(xcloud, monkeypatch,
                                                                    step, inject):
    cloud = xcloud
    sid = cloud.boot(flavor="1")
    before = cloud.books(sid)
    disk = os.path.join(simulated.driver_for(SRC).instance_dir(sid), "disk")
    disk_before = simulated.read_disk(disk)
    inject(cloud, monkeypatch)
    mig = _resize(cloud, sid)
    assert mig["status"] == "error"
    srv = cloud.server(sid)
    assert srv["status"] == "ACTIVE" and srv["OS-EXT-SRV-ATTR:host"] == SRC
    assert srv["flavor"]["original_name"] == "m1.tiny"
    assert cloud.mapped_cell(sid) == "cell1"
    rows = cloud.rows(sid)
    assert rows["cell2"] == {"instance": None, "migrations": [], "bdms": 0, "actions": 0}
    assert rows["cell1"]["instance"] == (False, "active", SRC)
    assert all(status == "deleted" for _name, status in cloud.snapshots(sid))
    assert cloud.bindings(sid) == {SRC: "ACTIVE"}
    assert cloud.books(sid, mig["uuid"]) == ({sid: before[0][sid], mig["uuid"]: {}}, before[1])
    assert simulated.driver_for(SRC).get_info({"uuid": sid})["state"] == power_state.RUNNING
    assert simulated.read_disk(disk) == disk_before
    assert not os.path.exists(simulated.driver_for(DEST).instance_dir(sid))
    assert cloud.fault(sid)
    assert cloud.events(sid, "resize")["conductor_migrate_server"] == "Error"
    # Healthy again, the server moves.
    simulated.clear_faults()
    cloud.aio.network_api.unbindable_hosts.clear()
    monkeypatch.undo()
    mig = _resize(cloud, sid)
    assert mig["status"] == "finished" and cloud.mapped_cell(sid) == "cell2"
