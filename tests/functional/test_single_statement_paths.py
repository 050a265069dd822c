"""Writes that find their row in the same statement (``UPDATE ... RETURNING``)
where the database has it, and in two where it does not (MariaDB), and writes
guarded by what the caller read: the same answer and the same rows on SQLite,
PostgreSQL and MariaDB."""
import json
import uuid

import pytest
import sqlalchemy as sa

from novella.context import RequestContext
from novella.db import api_models as am
from novella.db import cell_models as cm
from novella.db import migrate
from novella.db import migration_records
from novella.db import records
from novella.db import request_specs
from novella.db.engine import Database

BACKENDS = pytest.mark.parametrize("backend", [
    "sqlite",
    pytest.param("postgresql", marks=pytest.mark.postgresql),
    pytest.param("mysql", marks=pytest.mark.mysql)])


def _database(request, backend, tmp_path, kind):
    url = (f"sqlite:///{tmp_path}/{kind}.db" if backend == "sqlite"
           else request.getfixturevalue(f"{backend}_url"))
    db = Database(url)
    migrate.sync(kind, engine=db.engine)
    return db


@pytest.fixture
def cell_db(request, backend, tmp_path):
    return _database(request, backend, tmp_path, "cell")


@pytest.fixture
def api_db(request, backend, tmp_path):
    return _database(request, backend, tmp_path, "api")


def _server(cell_db):
    uuid_ = str(uuid.uuid4())
    with cell_db.session(write=True) as s:
        s.add(cm.Instance(uuid=uuid_, project_id="p", user_id="u", vm_state="resized",
                          deleted=0))
    return uuid_


def _migration(cell_db, instance_uuid, status, migration_type="resize"):
    row = migration_records.create(cell_db, {"uuid": instance_uuid, "host": "src",
                                             "node": "src"}, migration_type, {}, {})
    migration_records.update(cell_db, row["uuid"], status=status)
    return row["uuid"]


@BACKENDS
def test_confirm_takes_the_latest_finished_move_once(cell_db):
    server = _server(cell_db)
    _migration(cell_db, server, "finished")
    latest = _migration(cell_db, server, "finished")
    _migration(cell_db, server, "finished", migration_type="live-migration")
    taken = migration_records.take_unconfirmed(cell_db, server, "confirming")
    assert (taken["uuid"], taken["status"]) == (latest, "confirming")
    assert migration_records.get(cell_db, latest)["status"] == "confirming"
    older = migration_records.take_unconfirmed(cell_db, server, "confirming")
    assert older["uuid"] != latest  # the next one still finished, then none
    assert migration_records.take_unconfirmed(cell_db, server, "confirming") is None


@BACKENDS
def test_ending_an_action_tells_whether_the_server_was_deleted(cell_db, backend):
    server = _server(cell_db)
    ctxt = RequestContext(user_id="u", project_id="p")
    records.start_action(cell_db, ctxt, server, "resize")
    told = records.finish_action(cell_db, ctxt, server, tell_deleted=True)
    with cell_db.session() as s:
        action = s.scalars(sa.select(cm.InstanceAction)
                           .where(cm.InstanceAction.instance_uuid == server)).one()
    assert action.finish_time is not None
    # MariaDB has no UPDATE ... RETURNING: it ends the action and says nothing.
    assert told is (None if backend == "mysql" else False)

    records.start_action(cell_db, ctxt, server, "delete")
    records.update_instance(cell_db, server, task_state="deleting", reload=False)
    assert records.finish_action(cell_db, ctxt, server, tell_deleted=True) is (
        None if backend == "mysql" else True)


@BACKENDS
def test_a_request_spec_changed_meanwhile_is_read_again_whatever_the_collation(api_db):
    """The guarded write of a request spec takes the stored one as the caller's
    copy only when it is that copy byte for byte: a spec changed meanwhile in
    letter case alone (equal under MariaDB's collation) is read again."""
    server = str(uuid.uuid4())
    stored = {"availability_zone": "Zone-A", "flavor": {"name": "m1.small"}}
    with api_db.session(write=True) as s:
        s.add(am.RequestSpec(instance_uuid=server, spec=json.dumps(stored)))
    read_earlier = dict(stored, availability_zone="zone-a")
    request_specs.update(api_db, server, known=read_earlier, flavor={"name": "m1.large"})
    assert request_specs.get(api_db, server) == {"availability_zone": "Zone-A",
                                                 "flavor": {"name": "m1.large"}}
    # The copy as stored: written in the one guarded statement.
    request_specs.update(api_db, server, known=request_specs.get(api_db, server),
                         availability_zone=None)
    assert request_specs.get(api_db, server) == {"availability_zone": None,
                                                 "flavor": {"name": "m1.large"}}
