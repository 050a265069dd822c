"""Resize and cold migrate inside one cell: placement books at every step."""
import os

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


def test_resize_revert_hands_source_back_to_instance(cloud):
    notes = simulated_notes(cloud)
    sid = cloud.boot(flavor="1")
    src = cloud.host_of(sid)
    assert _resize(cloud, sid, "2")[0] == 202
    mig = _only_migration(cloud, sid)
    dest = mig["dest_compute"]
    assert cloud.books(sid, mig["uuid"])[0] == {sid: {dest: SMALL}, mig["uuid"]: {src: TINY}}

    assert cloud.action(sid, {"revertResize": None})[0] == 202
    cloud.aio.wait_idle()
    srv = cloud.server(sid)
    assert srv["status"] == "ACTIVE" and srv["OS-EXT-SRV-ATTR:host"] == src
    assert srv["flavor"]["original_name"] == "m1.tiny"
    books, usages = cloud.books(sid, mig["uuid"])
    assert books == {sid: {src: TINY}, mig["uuid"]: {}}
    assert usages[src] == TINY and usages[dest] == {"VCPU": 0, "MEMORY_MB": 0, "DISK_GB": 0}
    assert _only_migration(cloud, sid)["status"] == "reverted"
    assert cloud.events(sid, "revertResize") == {"compute_revert_resize": "Success",
                                                 "compute_finish_revert_resize": "Success"}
    root = cloud.aio.computes[src].driver.root
    assert not os.path.exists(os.path.join(root, dest, sid))
    assert os.path.exists(os.path.join(root, src, sid, "disk"))
    # Each notification comes from the service that did the step.
    publishers = {(n["event_type"], n["publisher_id"]) for n in notes.messages}
    for event, host in (("instance.resize_prep.start", dest), ("instance.resize.end", src),
                        ("instance.resize_finish.end", dest),
                        ("instance.resize_revert.start", src),
                        ("instance.resize_revert.end", src)):
        assert (event, f"nova-compute:{host}") in publishers, event
    # The source tells the revert, once.
    assert [n["publisher_id"] for n in notes.messages
            if n["event_type"].startswith("instance.resize_revert.")] == [
        f"nova-compute:{src}"] * 2


def simulated_notes(cloud):
    from novella.rpc.notifier import FakeNotifications
    return FakeNotifications(cloud.aio.transport)


def test_cold_migrate_then_confirm(cloud):
    sid = cloud.boot(flavor="1")
    src = cloud.host_of(sid)
    assert cloud.action(sid, {"migrate": None})[0] == 202
    cloud.aio.wait_idle()
    srv = cloud.server(sid)
    assert srv["status"] == "VERIFY_RESIZE"
    mig = _only_migration(cloud, sid)
    dest = srv["OS-EXT-SRV-ATTR:host"]
    assert mig["migration_type"] == "migration" and dest != src
    assert mig["old_instance_type_id"] == mig["new_instance_type_id"]
    assert cloud.books(sid, mig["uuid"])[0] == {sid: {dest: TINY}, mig["uuid"]: {src: TINY}}
    assert cloud.events(sid, "migrate")["compute_finish_resize"] == "Success"
    assert cloud.action(sid, {"confirmResize": None})[0] == 204
    cloud.aio.wait_idle()
    books, usages = cloud.books(sid, mig["uuid"])
    assert books == {sid: {dest: TINY}, mig["uuid"]: {}}
    assert usages[src]["VCPU"] == 0 and cloud.server(sid)["status"] == "ACTIVE"


def test_cold_migrate_to_a_host(make_cloud):
    cloud = make_cloud(hosts=3)
    sid = cloud.boot(flavor="1")
    src = cloud.host_of(sid)
    others = sorted(h for h in cloud.aio.computes if h != src)
    before = cloud.books(sid)
    # The source, an unknown host, a disabled host, a host before 2.56: refused, nothing changes.
    # (Before 2.56 the body is not read: a host there is ignored, as by the reference.)
    for body, version, code in (({"host": src}, "2.56", 400),
                                ({"host": "nowhere"}, "2.56", 400)):
        status, err = cloud.action(sid, {"migrate": body}, version=version)
        assert status == code, err
    _set_disabled(cloud, others[0], True)
    status, err = cloud.action(sid, {"migrate": {"host": others[0]}}, version="2.56")
    assert status == 409 and others[0] in err["conflictingRequest"]["message"]
    _set_disabled(cloud, others[0], False)
    assert cloud.books(sid) == before and cloud.migrations(sid) == []
    assert cloud.server(sid)["status"] == "ACTIVE"

    assert cloud.action(sid, {"migrate": {"host": others[1]}}, version="2.56")[0] == 202
    cloud.aio.wait_idle()
    mig = _only_migration(cloud, sid)
    assert cloud.host_of(sid) == others[1] == mig["dest_compute"]
    assert cloud.books(sid, mig["uuid"])[0] == {sid: {others[1]: TINY},
                                                mig["uuid"]: {src: TINY}}


def _set_disabled(cloud, host, disabled):
    import sqlalchemy as sa
    from novella.db import cell_models as cm, cells
    with cells.cell_database(cloud.aio.cells[0]).session(write=True) as s:
        s.execute(sa.update(cm.Service).where(cm.Service.host == host).values(disabled=disabled))


def test_resize_to_same_host_beyond_half_max_unit(make_cloud):
    cloud = make_cloud(hosts=1, DEFAULT={"allow_resize_to_same_host": True})
    cloud.flavor("c2", vcpus=2, ram=512, disk=1)
    cloud.flavor("c3", vcpus=3, ram=512, disk=1)
    (host,) = cloud.aio.computes
    placement = cloud.aio.placement
    _gen, inv = placement.get_inventories(cloud.rp(host))
    inv["VCPU"]["max_unit"] = 4  # 2 + 3 would not fit in one consumer's allocation
    placement.set_inventory(cloud.rp(host), inv)
    sid = cloud.boot(flavor="c2")
    assert _resize(cloud, sid, "c3")[0] == 202
    mig = _only_migration(cloud, sid)
    assert cloud.server(sid)["status"] == "VERIFY_RESIZE"
    assert mig["source_compute"] == mig["dest_compute"] == host
    books, usages = cloud.books(sid, mig["uuid"])
    assert books == {sid: {host: {"VCPU": 3, "MEMORY_MB": 512, "DISK_GB": 1}},
                     mig["uuid"]: {host: {"VCPU": 2, "MEMORY_MB": 512, "DISK_GB": 1}}}
    assert usages[host] == {"VCPU": 5, "MEMORY_MB": 1024, "DISK_GB": 2}
    assert cloud.action(sid, {"confirmResize": None})[0] == 204
    cloud.aio.wait_idle()
    books, usages = cloud.books(sid, mig["uuid"])
    assert books == {sid: {host: {"VCPU": 3, "MEMORY_MB": 512, "DISK_GB": 1}}, mig["uuid"]: {}}
    assert usages[host] == {"VCPU": 3, "MEMORY_MB": 512, "DISK_GB": 1}
    root = cloud.aio.computes[host].driver.root
    assert os.path.exists(os.path.join(root, host, sid, "disk"))
    assert not os.path.exists(os.path.join(root, host, sid + "_resize"))


def test_same_host_resize_refused_unless_allowed(make_cloud):
    cloud = make_cloud(hosts=1)
    sid = cloud.boot(flavor="1")
    (host,) = cloud.aio.computes
    assert _resize(cloud, sid, "2")[0] == 202
    srv = cloud.server(sid)
    assert srv["status"] == "ACTIVE" and srv["OS-EXT-SRV-ATTR:host"] == host
    assert cloud.events(sid, "resize") == {"conductor_migrate_server": "Error"}
    assert "No valid host" in cloud.fault(sid) or "not enough hosts" in cloud.fault(sid)
    assert _only_migration(cloud, sid)["status"] == "error"
    assert cloud.books(sid)[0] == {sid: {host: TINY}}
    assert cloud.usages()[host] == TINY


def test_resize_from_stopped_ends_shutoff(cloud):
    sid = cloud.boot(flavor="1")
    src = cloud.host_of(sid)
    assert cloud.action(sid, {"os-stop": None})[0] == 202
    cloud.aio.wait_idle()
    assert _resize(cloud, sid, "2")[0] == 202
    srv = cloud.server(sid)
    assert srv["status"] == "VERIFY_RESIZE" and srv["OS-EXT-STS:power_state"] == 4
    mig = _only_migration(cloud, sid)
    assert cloud.action(sid, {"revertResize": None})[0] == 202
    cloud.aio.wait_idle()
    srv = cloud.server(sid)
    assert srv["status"] == "SHUTOFF" and srv["OS-EXT-SRV-ATTR:host"] == src
    assert cloud.books(sid, mig["uuid"])[0] == {sid: {src: TINY}, mig["uuid"]: {}}
    assert _resize(cloud, sid, "2")[0] == 202
    assert cloud.action(sid, {"confirmResize": None})[0] == 204
    cloud.aio.wait_idle()
    srv = cloud.server(sid)
    assert srv["status"] == "SHUTOFF" and srv["flavor"]["original_name"] == "m1.small"
    assert cloud.books(sid)[0] == {sid: {srv["OS-EXT-SRV-ATTR:host"]: SMALL}}


def test_delete_in_verify_resize_frees_both_sides(cloud):
    sid = cloud.boot(flavor="1")
    assert _resize(cloud, sid, "2")[0] == 202
    mig = _only_migration(cloud, sid)
    assert cloud.api("DELETE", f"/servers/{sid}")[0] == 204
    cloud.aio.wait_idle()
    books, usages = cloud.books(sid, mig["uuid"])
    assert books == {sid: {}, mig["uuid"]: {}}
    assert all(v == 0 for u in usages.values() for v in u.values())
    assert _only_migration(cloud, sid)["status"] == "confirmed"
    root = cloud.aio.computes[mig["source_compute"]].driver.root
    for host in (mig["source_compute"], mig["dest_compute"]):
        assert not [d for d in os.listdir(os.path.join(root, host)) if d.startswith(sid)]


def test_auto_confirm_after_the_window(make_cloud):
    import datetime
    import sqlalchemy as sa
    from novella.db import cell_models as cm, cells
    cloud = make_cloud(hosts=2, DEFAULT={"resize_confirm_window": 60})
    sid = cloud.boot(flavor="1")
    assert _resize(cloud, sid, "2")[0] == 202
    mig = _only_migration(cloud, sid)
    src = cloud.aio.computes[mig["source_compute"]]
    assert src.poll_unconfirmed_resizes() == []  # not yet due
    with cells.cell_database(cloud.aio.cells[0]).session(write=True) as s:
        s.execute(sa.update(cm.Migration).where(cm.Migration.uuid == mig["uuid"]).values(
            updated_at=datetime.datetime.utcnow() - datetime.timedelta(seconds=61)))
    assert cloud.aio.computes[mig["dest_compute"]].poll_unconfirmed_resizes() == []
    assert src.poll_unconfirmed_resizes() == [mig["uuid"]]
    assert cloud.server(sid)["status"] == "ACTIVE"
    assert cloud.books(sid, mig["uuid"])[0] == {sid: {mig["dest_compute"]: SMALL},
                                                mig["uuid"]: {}}
    assert _only_migration(cloud, sid)["status"] == "confirmed"
    assert cloud.events(sid, "confirmResize") == {"compute_confirm_resize": "Success"}


def test_api_rules(cloud):
    sid = cloud.boot(flavor="1", token="demo:demo")
    assert cloud.action(sid, {"migrate": None}, token="demo:demo")[0] == 403
    assert cloud.action(sid, {"resize": {"flavorRef": "2"}}, token="other:other")[0] == 404
    assert cloud.action(sid, {"resize": {"flavorRef": "1"}})[0] == 400  # same flavor
    assert cloud.action(sid, {"resize": {"flavorRef": "nope"}})[0] == 400
    assert cloud.action(sid, {"confirmResize": None})[0] == 409  # not resized
    status, err = cloud.action(sid, {"revertResize": None})
    assert status == 409 and "vm_state active" in err["conflictingRequest"]["message"]
    assert cloud.migrations(sid) == []
    assert _resize(cloud, sid, "2", token="demo:demo")[0] == 202
    assert cloud.server(sid)["status"] == "VERIFY_RESIZE"
    status, err = cloud.action(sid, {"resize": {"flavorRef": "3"}})
    assert status == 409 and "vm_state resized" in err["conflictingRequest"]["message"]
    assert cloud.action(sid, {"resize": {"flavorRef": "1"}})[0] == 409
    assert cloud.action(sid, {"confirmResize": None}, token="demo:demo")[0] == 204
    cloud.aio.wait_idle()
    # A smaller root disk is refused.
    assert cloud.action(sid, {"resize": {"flavorRef": "1"}})[0] == 400
    # os-migrations shows the row with its uuid from 2.59, and pages.
    status, body = cloud.api("GET", "/os-migrations?limit=1", version="2.59")
    assert status == 200 and len(body["migrations"]) == 1 and body["migrations"][0]["uuid"]
    assert cloud.api("GET", "/os-migrations", version="2.58")[1]["migrations"][0].get(
        "uuid") is None


def _node_rows(cloud):
    """{host: (vcpus_used, memory_mb_used, local_gb_used, running_vms)} of the cell's nodes."""
    import sqlalchemy as sa
    from novella.db import cell_models as cm, cells
    with cells.cell_database(cloud.aio.cells[0]).session() as s:
        return {n.host: (n.vcpus_used, n.memory_mb_used, n.local_gb_used, n.running_vms)
                for n in s.scalars(sa.select(cm.ComputeNode))}


def _recounted(cloud):
    """The node rows as each host writes them again from its instances."""
    for compute in cloud.aio.computes.values():
        compute.rt.refresh_usage()
    return _node_rows(cloud)


def test_node_usage_follows_a_resize_exactly(cloud):
    """The claim and the arrival change the node rows by what they add, without reading
    every instance; the rows are then what a count of the instances writes."""
    sid = cloud.boot(flavor="1")
    src = cloud.host_of(sid)
    assert _node_rows(cloud) == _recounted(cloud)
    assert _resize(cloud, sid, "2")[0] == 202
    dest = cloud.host_of(sid)
    rows = _node_rows(cloud)
    # The destination runs the new flavor; the source keeps the old one's sizes (the
    # migration's claim). The source's running_vms is its own to count again (its
    # next audit, or the confirm), as nothing ran there to write its row.
    assert rows[dest] == (1, 2048, 20, 1) and rows[src][:3] == (1, 512, 1)
    recounted = _recounted(cloud)
    assert rows[dest] == recounted[dest] and rows[src][:3] == recounted[src][:3]
    assert cloud.action(sid, {"confirmResize": None})[0] == 204
    cloud.aio.wait_idle()
    rows = _node_rows(cloud)
    assert rows[src] == (0, 0, 0, 0) and rows[dest] == (1, 2048, 20, 1)
    assert rows == _recounted(cloud)
