"""Resize and cold migrate inside one cell: placement books at every step."""
import os

from novella.virt import simulated

TINY = {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}
SMALL = {"VCPU": 1, "MEMORY_MB": 2048, "DISK_GB": 20}


def _resize(cloud, sid, flavor, **kw):
    status, body = cloud.action(sid, {"resize": {"flavorRef": flavor}}, **kw)
    cloud.aio.wait_idle()
    return status, body


def _only_migration(cloud, sid):
    (mig,) = cloud.migrations(sid)
    return mig


def test_resize_confirm_moves_books_to_migration_then_frees_source(cloud):
    sid = cloud.boot(flavor="1")
    src = cloud.host_of(sid)
    books, usages = cloud.books(sid)
    assert books[sid] == {src: TINY}

    status, _ = _resize(cloud, sid, "2")
    assert status == 202
    srv = cloud.server(sid)
    assert srv["status"] == "VERIFY_RESIZE" and srv["flavor"]["original_name"] == "m1.small"
    dest = srv["OS-EXT-SRV-ATTR:host"]
    assert dest != src
    mig = _only_migration(cloud, sid)
    assert (mig["status"], mig["migration_type"]) == ("finished", "resize")
    assert (mig["source_compute"], mig["dest_compute"]) == (src, dest)
    books, usages = cloud.books(sid, mig["uuid"])
    assert books == {sid: {dest: SMALL}, mig["uuid"]: {src: TINY}}
    assert usages[src] == TINY and usages[dest] == SMALL
    # Real bytes moved: the destination has the disk, the source keeps its copy aside.
    root = cloud.aio.computes[src].driver.root
    assert os.path.exists(os.path.join(root, dest, sid, "disk"))
    assert os.path.isdir(os.path.join(root, src, sid + "_resize"))
    assert cloud.events(sid, "resize") == {
        "conductor_migrate_server": "Success", "compute_prep_resize": "Success",
        "compute_resize_instance": "Success", "compute_finish_resize": "Success"}

    assert cloud.action(sid, {"confirmResize": None})[0] == 204
    cloud.aio.wait_idle()
    srv = cloud.server(sid)
    assert srv["status"] == "ACTIVE" and srv["OS-EXT-SRV-ATTR:host"] == dest
    books, usages = cloud.books(sid, mig["uuid"])
    assert books == {sid: {dest: SMALL}, mig["uuid"]: {}}
    assert usages[src] == {"VCPU": 0, "MEMORY_MB": 0, "DISK_GB": 0} and usages[dest] == SMALL
    assert _only_migration(cloud, sid)["status"] == "confirmed"
    assert not os.path.exists(os.path.join(root, src, sid + "_resize"))
    assert cloud.events(sid, "confirmResize") == {"compute_confirm_resize": "Success"}
