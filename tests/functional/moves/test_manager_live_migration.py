"""A project manager live migrates the project's servers under the reference's new
policy defaults: without naming a host, and sees the project's migrations without
any host in them."""
from tests.functional.moves.test_live_migration import _send

MANAGER = "manager,member,reader"


def _live_migrate(cloud, sid, host=None, roles=MANAGER, token="demo:demo"):
    return _send(cloud, "POST", f"/servers/{sid}/action",
                 {"os-migrateLive": {"host": host, "block_migration": "auto"}}, "2.80",
                 token, roles)


def _guests(cloud, sid):
    return {h for h, c in cloud.aio.computes.items() if c.driver.instance_exists({"uuid": sid})}


def test_a_manager_live_migrates_without_a_host_and_sees_no_host(make_cloud):
    cloud = make_cloud(hosts=2)
    sid = cloud.boot(token="demo:demo")
    other = cloud.boot()  # the admin project's, moved by the admin
    src = cloud.host_of(sid)
    dest = next(h for h in cloud.aio.computes if h != src)
    books = cloud.books(sid)

    # A member may not; a manager may not name the host. Nothing moves.
    status, body = _live_migrate(cloud, sid, roles="member,reader")
    assert status == 403, body
    status, body = _live_migrate(cloud, sid, host=dest)
    assert status == 403, body
    cloud.aio.wait_idle()
    assert cloud.host_of(sid) == src and cloud.migrations(sid) == []
    assert cloud.books(sid) == books

    status, body = _live_migrate(cloud, sid)
    assert status == 202, body
    cloud.aio.wait_idle()
    server = cloud.server(sid)
    assert (server["status"], server["OS-EXT-SRV-ATTR:host"]) == ("ACTIVE", dest)
    assert _guests(cloud, sid) == {dest}
    assert set(cloud.books(sid)[0][sid]) == {dest}
    assert cloud.action(other, {"os-migrateLive": {"host": None, "block_migration": "auto"}},
                        version="2.30")[0] == 202
    cloud.aio.wait_idle()

    # The project's migrations, with the host fields hidden; not the admin project's.
    status, body = _send(cloud, "GET", "/os-migrations?migration_type=live-migration"
                         "&project_id=demo", None, "2.80", "demo:demo", MANAGER)
    assert status == 200, body
    (mig,) = body["migrations"]
    assert (mig["instance_uuid"], mig["project_id"], mig["status"]) == (sid, "demo",
                                                                         "completed")
    assert [mig[k] for k in ("source_compute", "source_node", "dest_compute", "dest_host",
                             "dest_node")] == [None] * 5
    # The admin sees where it went.
    (mig_admin,) = [m for m in cloud.migrations(sid) if m["migration_type"] == "live-migration"]
    assert (mig_admin["source_compute"], mig_admin["dest_compute"]) == (src, dest)
    # Another project's migrations are not the manager's to list.
    status, body = _send(cloud, "GET", "/os-migrations?project_id=admin", None, "2.80",
                         "demo:demo", MANAGER)
    assert status == 403, body
    # The server's in-progress list: answered (empty: the move is over).
    status, body = _send(cloud, "GET", f"/servers/{sid}/migrations", None, "2.80",
                         "demo:demo", MANAGER)
    assert (status, body) == (200, {"migrations": []})
