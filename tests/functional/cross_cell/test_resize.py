"""Cross-cell resize and cold migrate: two cells of one host each.

At each visible step the tests check the instance mapping, the rows in every
cell (hidden flags, hard-deleted copies), the snapshot image, port bindings,
volume attachments and placement allocations by consumer.
"""
import os

from novella.compute.states import power_state
from novella.context import get_admin_context
from novella.rpc.notifier import FakeNotifications
from novella.virt import simulated

TINY = {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}
SMALL = {"VCPU": 1, "MEMORY_MB": 2048, "DISK_GB": 20}
ZERO = {"VCPU": 0, "MEMORY_MB": 0, "DISK_GB": 0}
SRC, DEST = "cell1-host1", "cell2-host1"


def _act(cloud, sid, body, code=202, **kw):
    status, resp = cloud.action(sid, body, **kw)
    assert status == code, resp
    cloud.aio.wait_idle()


def _resized(cloud, sid, flavor="2"):
    """Resize ``sid`` (booted on SRC) and check the VERIFY_RESIZE state; returns the migration."""
    _act(cloud, sid, {"resize": {"flavorRef": flavor}})
    srv = cloud.server(sid)
    assert srv["status"] == "VERIFY_RESIZE", cloud.fault(sid)
    assert srv["OS-EXT-SRV-ATTR:host"] == DEST
    assert cloud.mapped_cell(sid) == "cell2"
    (mig,) = cloud.migrations(sid)  # one row although both cells hold it
    assert (mig["status"], mig["source_compute"], mig["dest_compute"]) == ("finished", SRC, DEST)
    rows = cloud.rows(sid)
    assert rows["cell1"]["instance"][:1] == (True,) and rows["cell1"]["instance"][2] == SRC
    assert rows["cell2"]["instance"] == (False, "resized", DEST)
    assert rows["cell1"]["migrations"] == [("finished", True, True)]
    assert rows["cell2"]["migrations"] == [("finished", False, True)]
    assert cloud.bindings(sid) == {SRC: "INACTIVE", DEST: "ACTIVE"}
    return mig


def _list_ids(cloud):
    status, body = cloud.api("GET", "/servers/detail")
    assert status == 200
    return [s["id"] for s in body["servers"]]


def test_resize_confirm_image_backed(xcloud):
    cloud = xcloud
    notes = FakeNotifications(cloud.aio.transport)
    sid = cloud.boot(flavor="1")
    assert cloud.host_of(sid) == SRC and cloud.mapped_cell(sid) == "cell1"
    disk = os.path.join(simulated.driver_for(SRC).instance_dir(sid), "disk")
    root_bytes = simulated.read_disk(disk)[1]

    mig = _resized(cloud, sid)
    books, usages = cloud.books(sid, mig["uuid"])
    assert books == {sid: {DEST: SMALL}, mig["uuid"]: {SRC: TINY}}
    assert usages[SRC] == TINY and usages[DEST] == SMALL
    # The root disk travelled through an image that is gone again.
    assert cloud.snapshots(sid) == [("vm-resize-temp", "deleted")]
    dest_disk = os.path.join(simulated.driver_for(DEST).instance_dir(sid), "disk")
    assert simulated.read_disk(dest_disk)[1] == root_bytes
    assert simulated.driver_for(SRC).get_info({"uuid": sid})["state"] == power_state.SHUTDOWN
    assert _list_ids(cloud).count(sid) == 1
    assert cloud.events(sid, "resize") == {
        "conductor_migrate_server": "Success",
        "compute_prep_snapshot_based_resize_at_dest": "Success",
        "compute_prep_snapshot_based_resize_at_source": "Success",
        "compute_finish_snapshot_based_resize_at_dest": "Success"}

    _act(cloud, sid, {"confirmResize": None}, code=204)
    srv = cloud.server(sid)
    assert srv["status"] == "ACTIVE" and srv["OS-EXT-SRV-ATTR:host"] == DEST
    assert srv["flavor"]["original_name"] == "m1.small"
    assert cloud.mapped_cell(sid) == "cell2"
    rows = cloud.rows(sid)
    assert rows["cell1"] == {"instance": None, "migrations": [], "bdms": 0, "actions": 0}
    assert rows["cell2"]["instance"] == (False, "active", DEST)
    assert rows["cell2"]["migrations"] == [("confirmed", False, True)]
    books, usages = cloud.books(sid, mig["uuid"])
    assert books == {sid: {DEST: SMALL}, mig["uuid"]: {}}
    assert usages[SRC] == ZERO
    assert cloud.bindings(sid) == {DEST: "ACTIVE"}
    assert not os.path.exists(simulated.driver_for(SRC).instance_dir(sid))
    assert cloud.events(sid, "confirmResize") == {
        "compute_confirm_snapshot_based_resize_at_source": "Success"}
    assert [m["status"] for m in cloud.migrations(sid)] == ["confirmed"]
    publishers = {(n["event_type"], n["publisher_id"].split(":")[0]) for n in notes.messages}
    for event, service in (("instance.resize_prep.end", "nova-compute"),
                           ("instance.resize.end", "nova-compute"),
                           ("instance.resize_finish.end", "nova-compute"),
                           ("instance.resize_confirm.start", "nova-conductor"),
                           ("instance.resize_confirm.end", "nova-conductor")):
        assert (event, service) in publishers, event


def test_resize_revert_image_backed_with_tags_changed(xcloud):
    cloud = xcloud
    notes = FakeNotifications(cloud.aio.transport)
    sid = cloud.boot(flavor="1")
    mig = _resized(cloud, sid)
    # A change made while resized is kept by the revert.
    assert cloud.api("PUT", f"/servers/{sid}/tags/while-resized", version="2.26")[0] == 201

    _act(cloud, sid, {"revertResize": None})
    srv = cloud.server(sid)
    assert srv["status"] == "ACTIVE" and srv["OS-EXT-SRV-ATTR:host"] == SRC
    assert srv["flavor"]["original_name"] == "m1.tiny"
    assert cloud.api("GET", f"/servers/{sid}/tags", version="2.26")[1]["tags"] == ["while-resized"]
    assert cloud.mapped_cell(sid) == "cell1"
    rows = cloud.rows(sid)
    assert rows["cell2"] == {"instance": None, "migrations": [], "bdms": 0, "actions": 0}
    assert rows["cell1"]["instance"] == (False, "active", SRC)
    assert rows["cell1"]["migrations"] == [("reverted", False, True)]
    books, usages = cloud.books(sid, mig["uuid"])
    assert books == {sid: {SRC: TINY}, mig["uuid"]: {}}
    assert usages[DEST] == ZERO
    assert cloud.bindings(sid) == {SRC: "ACTIVE"}
    assert simulated.driver_for(SRC).get_info({"uuid": sid})["state"] == power_state.RUNNING
    assert not os.path.exists(simulated.driver_for(DEST).instance_dir(sid))
    assert cloud.events(sid, "revertResize") == {
        "compute_revert_snapshot_based_resize_at_dest": "Success",
        "compute_finish_revert_snapshot_based_resize_at_source": "Success"}
    publishers = {(n["event_type"], n["publisher_id"].split(":")[0]) for n in notes.messages}
    assert ("instance.resize_revert.start", "nova-conductor") in publishers
    assert ("instance.resize_revert.end", "nova-conductor") in publishers


def _boot_from_volume(cloud):
    ctxt = get_admin_context()
    vol = cloud.aio.volume_api.create(ctxt, 1, name="root", image_id=cloud.aio.demo_image["id"])
    bdm = [{"source_type": "volume", "destination_type": "volume", "uuid": vol["id"],
            "boot_index": 0}]
    status, body = cloud.api("POST", "/servers", {"server": {
        "name": "bfv", "flavorRef": "1", "networks": "auto",
        "block_device_mapping_v2": bdm}})
    assert status == 202, body
    cloud.aio.wait_idle()
    sid = body["server"]["id"]
    assert cloud.server(sid)["status"] == "ACTIVE", cloud.fault(sid)
    return sid


def test_resize_volume_backed_confirm_and_revert(xcloud):
    cloud = xcloud
    bfv = {"VCPU": 1, "MEMORY_MB": 512}
    for finish in ("confirmResize", "revertResize"):
        sid = _boot_from_volume(cloud)
        assert cloud.attachments(sid) == [(SRC, "attached")]
        mig = _resized(cloud, sid, flavor="2")
        assert cloud.snapshots(sid) == []  # nothing to snapshot: the root disk is a volume
        assert cloud.attachments(sid) == [(SRC, "attached"), (DEST, "attached")]
        assert cloud.rows(sid)["cell2"]["bdms"] == 1
        books = cloud.books(sid, mig["uuid"])[0]
        assert books == {sid: {DEST: {"VCPU": 1, "MEMORY_MB": 2048}},
                         mig["uuid"]: {SRC: bfv}}
        _act(cloud, sid, {finish: None}, code=204 if finish == "confirmResize" else 202)
        home = DEST if finish == "confirmResize" else SRC
        assert cloud.server(sid)["status"] == "ACTIVE"
        assert cloud.host_of(sid) == home
        assert cloud.attachments(sid) == [(home, "attached")]
        assert cloud.bindings(sid) == {home: "ACTIVE"}
        books = cloud.books(sid, mig["uuid"])[0]
        assert books[mig["uuid"]] == {} and list(books[sid]) == [home]
        gone = "cell1" if finish == "confirmResize" else "cell2"
        assert cloud.rows(sid)[gone]["instance"] is None
        status, _ = cloud.api("DELETE", f"/servers/{sid}")
        cloud.aio.wait_idle()


def test_resize_from_stopped_stays_stopped(xcloud):
    cloud = xcloud
    sid = cloud.boot(flavor="1")
    _act(cloud, sid, {"os-stop": None})
    mig = _resized(cloud, sid)
    assert simulated.driver_for(DEST).get_info({"uuid": sid})["state"] == power_state.SHUTDOWN
    _act(cloud, sid, {"confirmResize": None}, code=204)
    assert cloud.server(sid)["status"] == "SHUTOFF"
    assert cloud.books(sid, mig["uuid"])[0] == {sid: {DEST: SMALL}, mig["uuid"]: {}}


def test_delete_in_verify_resize_confirms_first(xcloud):
    cloud = xcloud
    sid = cloud.boot(flavor="1")
    mig = _resized(cloud, sid)
    assert cloud.api("DELETE", f"/servers/{sid}")[0] == 204
    cloud.aio.wait_idle()
    assert cloud.api("GET", f"/servers/{sid}")[0] == 404
    rows = cloud.rows(sid)
    assert rows["cell1"]["instance"] is None  # the source copy went with the confirm
    assert rows["cell2"]["instance"][1] == "deleted"
    assert cloud.books(sid, mig["uuid"])[0] == {sid: {}, mig["uuid"]: {}}
    assert cloud.usages()[SRC] == ZERO and cloud.usages()[DEST] == ZERO
    assert cloud.bindings(sid) == {}
    for host in (SRC, DEST):
        assert not os.path.exists(simulated.driver_for(host).instance_dir(sid))


def test_cold_migrate_to_a_host_in_another_cell(xcloud):
    cloud = xcloud
    sid = cloud.boot(flavor="1")
    _act(cloud, sid, {"migrate": {"host": DEST}}, version="2.56")
    (mig,) = cloud.migrations(sid)
    assert mig["migration_type"] == "migration" and mig["dest_compute"] == DEST
    assert cloud.server(sid)["status"] == "VERIFY_RESIZE" and cloud.mapped_cell(sid) == "cell2"
    assert cloud.books(sid, mig["uuid"])[0] == {sid: {DEST: TINY}, mig["uuid"]: {SRC: TINY}}
    _act(cloud, sid, {"confirmResize": None}, code=204)
    assert cloud.books(sid, mig["uuid"])[0] == {sid: {DEST: TINY}, mig["uuid"]: {}}


def test_auto_confirm_after_the_window(make_xcloud):
    import datetime

    import sqlalchemy as sa

    from novella.db import cell_models as cm, cells as cells_mod
    cloud = make_xcloud(DEFAULT={"resize_confirm_window": 60})
    cloud.allow_cross_cell()
    sid = cloud.boot(flavor="1")
    mig = _resized(cloud, sid)
    assert cloud.aio.conductor.poll_unconfirmed_cross_cell_resizes() == []  # not yet due
    past = datetime.datetime.utcnow() - datetime.timedelta(seconds=120)
    for cell in cloud.aio.cells:
        with cells_mod.cell_database(cell).session(write=True) as s:
            s.execute(sa.update(cm.Migration).values(updated_at=past))
    # The source host's own poller leaves cross-cell moves to the conductor.
    assert cloud.aio.computes[SRC].poll_unconfirmed_resizes() == []
    assert cloud.aio.conductor.poll_unconfirmed_cross_cell_resizes() == [mig["uuid"]]
    assert cloud.server(sid)["status"] == "ACTIVE"
    assert cloud.rows(sid)["cell1"]["instance"] is None
    assert cloud.books(sid, mig["uuid"])[0] == {sid: {DEST: SMALL}, mig["uuid"]: {}}
    assert cloud.events(sid, "confirmResize") == {
        "compute_confirm_snapshot_based_resize_at_source": "Success"}


def test_revert_after_a_volume_was_detached_while_resized(xcloud):
    cloud = xcloud
    ctxt = get_admin_context()
    sid = cloud.boot(flavor="1")
    vol = cloud.aio.volume_api.create(ctxt, 1, name="data")
    status, body = cloud.api("POST", f"/servers/{sid}/os-volume_attachments",
                             {"volumeAttachment": {"volumeId": vol["id"]}})
    assert status == 200, body
    cloud.aio.wait_idle()
    assert cloud.attachments(sid) == [(SRC, "attached")]
    _resized(cloud, sid)
    assert cloud.attachments(sid) == [(SRC, "attached"), (DEST, "attached")]
    assert cloud.api("DELETE", f"/servers/{sid}/os-volume_attachments/{vol['id']}")[0] == 202
    cloud.aio.wait_idle()
    assert cloud.attachments(sid) == [(SRC, "attached")]  # the source's, until the revert

    _act(cloud, sid, {"revertResize": None})
    assert cloud.server(sid)["status"] == "ACTIVE" and cloud.host_of(sid) == SRC
    assert cloud.attachments(sid) == []
    assert cloud.aio.volume_api.get(ctxt, vol["id"])["status"] == "available"
    status, body = cloud.api("GET", f"/servers/{sid}/os-volume_attachments")
    assert status == 200 and body["volumeAttachments"] == []
    domain = simulated.driver_for(SRC)._load(sid)
    assert vol["id"] not in domain.get("volumes", {})
