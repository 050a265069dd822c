"""A worker's read model is loaded from one snapshot of a server database.

Two ledgers on one PostgreSQL or MariaDB database stand for two workers of
a WSGI server. While the first loads its model (a statement per table), the
second registers a provider with inventory between two of those statements.
The first worker must answer, and its model must hold either all of the new
provider or none of it; the next read brings it in whole.
"""
import uuid

import pytest
import sqlalchemy as sa
from sqlalchemy import event

from novella.db import engine as engine_mod
from novella.db import migrate
from novella.placement import ledger as ledger_mod


def _host(name):
    return {"uuid": str(uuid.uuid4()), "name": name, "traits": [],
            "inventories": {"VCPU": {"total": 8}, "MEMORY_MB": {"total": 4096}}}


@pytest.mark.parametrize("backend", [
    pytest.param("postgresql", marks=pytest.mark.postgresql),
    pytest.param("mysql", marks=pytest.mark.mysql)])
def test_a_commit_between_two_reads_of_a_load_is_not_half_seen(request, backend):
    url = request.getfixturevalue(f"{backend}_url")
    reader_engine, writer_engine = engine_mod._create_engine(url), engine_mod._create_engine(url)
    migrate.sync("placement", engine=reader_engine)
    reader, writer = ledger_mod.Ledger(reader_engine), ledger_mod.Ledger(writer_engine)
    reader.ensure_counter()
    first = _host("first")
    writer.register_providers([first])

    late = _host("late")
    fired = []

    @event.listens_for(reader_engine, "before_cursor_execute")
    def _commit_in_between(conn, cursor, statement, *_args):
        # The reader has read the providers and turns to their inventories.
        if not fired and "FROM inventories" in statement:
            fired.append(statement)
            writer.register_providers([late])

    try:
        with reader.read() as state:
            assert fired, "the other worker's commit did not come between two reads"
            assert first["uuid"] in state.by_uuid
            assert late["uuid"] not in state.by_uuid
            assert all(p.inv for p in state.by_id.values())
    finally:
        event.remove(reader_engine, "before_cursor_execute", _commit_in_between)

    with reader.read() as state:
        p = state.by_uuid[late["uuid"]]
        assert {rc: inv.as_dict()["total"] for rc, inv in p.inv.items()} == \
            {"VCPU": 8, "MEMORY_MB": 4096}
        assert sorted(q.name for q in state.by_id.values()) == ["first", "late"]
    with reader_engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM inventories")).scalar() == 4
    reader_engine.dispose()
    writer_engine.dispose()
