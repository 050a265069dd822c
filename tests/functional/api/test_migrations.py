"""os-migrations merged across cells, and a server's in-progress live migrations."""
import datetime
import uuid as uuid_mod

from novella.db import cell_models as cm

T0 = datetime.datetime(2024, 5, 1)


def _migration(cloud, cell, instance, minutes, status="finished", kind="resize", uuid=None,
               hidden=False, **kw):
    uuid = uuid or str(uuid_mod.uuid4())
    with cloud.db(cell).session(write=True) as s:
        s.add(cm.Migration(uuid=uuid, instance_uuid=instance, source_compute="h1", dest_compute="h2",
                           source_node="h1", dest_node="h2", status=status, migration_type=kind,
                           hidden=hidden, created_at=T0 + datetime.timedelta(minutes=minutes),
                           updated_at=T0 + datetime.timedelta(minutes=minutes),
                           user_id="alice", project_id="project-a", **kw))
    return uuid


def test_list_merges_cells_and_shows_a_cross_cell_move_once(cloud):
    inst1 = cloud.instance("cell1", host="h1")
    inst2 = cloud.instance("cell2", host="h2")
    a = _migration(cloud, "cell1", inst1, 1)
    b = _migration(cloud, "cell2", inst2, 2, kind="migration")
    # A cross-cell resize of inst2 (now mapped to cell2): a copy in each cell.
    shared = str(uuid_mod.uuid4())
    _migration(cloud, "cell1", inst2, 3, uuid=shared, status="confirmed", cross_cell_move=True)
    _migration(cloud, "cell2", inst2, 3, uuid=shared, status="confirmed", cross_cell_move=True)
    assert cloud.user.get("/os-migrations").status_int == 403
    migs = cloud.admin.get("/os-migrations", version="2.80").json["migrations"]
    assert [m["uuid"] for m in migs] == [shared, b, a]
    assert migs[0]["user_id"] == "alice" and migs[0]["migration_type"] == "resize"
    old = cloud.admin.get("/os-migrations", version="2.58").json["migrations"][0]
    assert "uuid" not in old and "user_id" not in old
    page = cloud.admin.get("/os-migrations?limit=2", version="2.59").json
    assert [m["uuid"] for m in page["migrations"]] == [shared, b] and page["migrations_links"]
    page = cloud.admin.get(f"/os-migrations?limit=2&marker={b}", version="2.59").json
    assert [m["uuid"] for m in page["migrations"]] == [a]
    assert cloud.admin.get(f"/os-migrations?marker={uuid_mod.uuid4()}", version="2.59").status_int == 400
    assert len(cloud.admin.get(f"/os-migrations?instance_uuid={inst1}").json["migrations"]) == 1
    assert len(cloud.admin.get("/os-migrations?migration_type=migration", version="2.23").json["migrations"]) == 1
    since = (T0 + datetime.timedelta(minutes=2)).isoformat()
    assert len(cloud.admin.get(f"/os-migrations?changes-since={since}", version="2.59").json["migrations"]) == 2


def test_hidden_copy_loses_to_the_shown_one(cloud):
    inst = cloud.instance("cell1", host="h1")
    shared = str(uuid_mod.uuid4())
    _migration(cloud, "cell1", inst, 1, uuid=shared, status="finished")
    _migration(cloud, "cell2", inst, 1, uuid=shared, status="pre-migrating", hidden=True)
    migs = cloud.admin.get("/os-migrations", version="2.59").json["migrations"]
    assert [(m["uuid"], m["status"]) for m in migs] == [(shared, "finished")]


def test_server_migrations_are_in_progress_live_ones(cloud):
    inst = cloud.instance("cell1", host="h1")
    _migration(cloud, "cell1", inst, 1, status="finished")
    _migration(cloud, "cell1", inst, 2, status="running", kind="live-migration")
    assert cloud.admin.get(f"/servers/{inst}/migrations").status_int == 404  # before 2.23
    migs = cloud.admin.get(f"/servers/{inst}/migrations", version="2.59").json["migrations"]
    assert len(migs) == 1 and migs[0]["status"] == "running" and migs[0]["server_uuid"] == inst
    assert cloud.admin.get(f"/servers/{inst}/migrations/{migs[0]['id']}", version="2.59").status_int == 200
    assert cloud.admin.get(f"/servers/{inst}/migrations/999", version="2.59").status_int == 404
    assert cloud.user.get(f"/servers/{inst}/migrations", version="2.59").status_int == 403
