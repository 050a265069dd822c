"""`novella manage db archive_deleted_rows` and `db purge`: deleted servers' rows
moved to the shadow tables of their cell, their API rows removed, shadows purged."""
import datetime

import sqlalchemy as sa

from novella.conf import CONF
from novella.db import api_models as am
from novella.db import cell_models as cm


def _count(db, table, *where):
    t = cm.metadata.tables[table] if isinstance(table, str) else table
    with db.session() as s:
        return s.scalar(sa.select(sa.func.count()).select_from(t).where(*where))


def _api_rows(cloud, sid):
    return {m.__tablename__: _count(cloud.aio.api_db, m.__table__, m.instance_uuid == sid)
            for m in (am.InstanceMapping, am.RequestSpec)}


def test_archive_moves_a_deleted_servers_rows_and_purge_deletes_them(cloud):
    CONF.set_override("connection", cloud.aio.cells[0].database_connection, group="database")
    kept, gone = (cloud.boot(name=n, availability_zone="nova:cell1-host1") for n in ("kept", "gone"))
    cloud.delete(gone)
    db = cloud.cell_db()
    actions = _count(db, "instance_actions", cm.InstanceAction.instance_uuid == gone)
    assert actions >= 2 and _api_rows(cloud, gone) == {"instance_mappings": 1, "request_specs": 1}

    code, out = cloud.manage("db", "archive_deleted_rows", "--verbose")
    assert code == 1
    assert "| instances " in out and "| API_DB.instance_mappings " in out
    assert _count(db, "instances", cm.Instance.uuid == gone) == 0
    assert _count(db, "shadow_instances", sa.text(f"uuid = '{gone}'")) == 1
    assert _count(db, "shadow_instance_actions") == actions
    assert _count(db, "shadow_instance_extra") == 1
    assert _count(db, "instances") == 1 and _count(db, "instance_actions",
                                                   cm.InstanceAction.instance_uuid == kept)
    assert _api_rows(cloud, gone) == {"instance_mappings": 0, "request_specs": 0}
    assert _api_rows(cloud, kept) == {"instance_mappings": 1, "request_specs": 1}
    assert cloud.manage("cell_v2", "verify_instance", "--uuid", kept)[0] == 0

    assert cloud.manage("db", "archive_deleted_rows", "--verbose") == (0, "Nothing was archived.\n")

    assert cloud.manage("db", "purge")[0] == 1
    assert cloud.manage("db", "purge", "--before", "not a date")[0] == 2
    assert cloud.manage("db", "purge", "--before", "2001-01-01")[0] == 3   # all newer
    assert _count(db, "shadow_instances") == 1
    code, out = cloud.manage("db", "purge", "--before",
                             str(datetime.date.today() + datetime.timedelta(days=1)), "--verbose")
    assert code == 0 and "DB: Deleted 1 rows from shadow_instances" in out
    for table in ("shadow_instances", "shadow_instance_actions", "shadow_instance_extra",
                  "shadow_instance_actions_events"):
        assert _count(db, table) == 0, table


def test_archive_all_cells_max_rows_until_complete_and_purge(cloud):
    sids = [cloud.boot(name=f"vm{i}", availability_zone=f"nova:cell{i % 2 + 1}-host1")
            for i in range(4)]
    for sid in sids:
        cloud.delete(sid)
    db1, db2 = cloud.cell_db(0), cloud.cell_db(1)
    assert _count(db1, "instances") == 2 and _count(db2, "instances") == 2

    assert cloud.manage("db", "archive_deleted_rows", "--max_rows", "-1")[0] == 2
    assert cloud.manage("db", "archive_deleted_rows", "--before", "garbage")[0] == 4
    # Without --all-cells it needs [database] connection: a configuration error, not
    # 1 ("rows were archived, run again").
    assert cloud.manage("db", "archive_deleted_rows")[0] == 255

    assert cloud.manage("db", "archive_deleted_rows", "--all-cells", "--max_rows", "1")[0] == 1
    assert _count(db1, "instances") + _count(db2, "instances") == 3
    code, out = cloud.manage("db", "archive_deleted_rows", "--all-cells", "--until-complete",
                             "--max_rows", "1", "--verbose", "--purge")
    assert code == 1
    assert "| cell1.instances " in out and "| cell2.instances " in out
    assert "Rows were archived, running purge..." in out
    for db in (db1, db2):
        assert _count(db, "instances") == 0 and _count(db, "shadow_instances") == 0
    with cloud.aio.api_db.session() as s:
        assert s.scalar(sa.select(sa.func.count()).select_from(am.InstanceMapping)
                        .where(am.InstanceMapping.instance_uuid.in_(sids))) == 0
    assert cloud.manage("db", "archive_deleted_rows", "--all-cells")[0] == 0
    assert cloud.manage("db", "purge", "--all", "--all-cells")[0] == 3


def test_archive_needs_the_api_database(cloud):
    CONF.set_override("connection", None, group="api_database")
    try:
        code, out = cloud.manage("db", "archive_deleted_rows", "--all-cells")
    finally:
        CONF.set_override("connection", cloud.aio._url("api"), group="api_database")
    assert code == 3 and "[api_database]/connection" in out
