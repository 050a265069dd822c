"""`novella manage cell_v2 create_cell`, `list_cells` and `discover_hosts` with bad
input, and exit codes that keep one meaning: each refusal writes nothing, names
no password, and exits with the code docs/manage.md gives."""
import contextlib
import io
import os

import pytest
import sqlalchemy as sa

from novella.cmd import main as cli
from novella.cmd import manage
from novella.cmd import manage_cli
from novella.db import api_models as am
from novella.db import cell_models as cm
from novella.db import cells
from tests import backends

SECRET = "s3cret-pw"
TRANSPORT = f"rabbit://guest:{SECRET}@127.0.0.1:5672/cell"


def _run(*argv):
    """`novella manage ARGV...` -> (exit code, what it printed)."""
    out = io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            cli.main(["manage", *argv])
        except SystemExit as exc:
            code = exc.code
    return code, out.getvalue()


@pytest.fixture
def api_url(tmp_path):
    url = f"sqlite:///{tmp_path}/api.db"
    manage.api_db_sync(url)
    return url


def _mappings(api_url):
    with cells.database(api_url).session() as s:
        return s.execute(sa.select(am.CellMapping.name, am.CellMapping.database_connection)
                         .order_by(am.CellMapping.id)).all()


def _create(api_url, name, database=None, transport=TRANSPORT, *extra):
    argv = ["--api-database-connection", api_url, "cell_v2", "create_cell", "--name", name,
            "--transport-url", transport, *extra]
    if database:
        argv += ["--database_connection", database]
    return _run(*argv)


def test_create_cell_without_a_database_says_so_and_writes_nothing(api_url):
    from novella.conf import CONF
    CONF.clear_override("connection", group="database")  # as an all-in-one leaves it
    code, out = _create(api_url, "cell1")
    assert code == 1
    assert "Must specify --database_connection" in out
    assert SECRET not in out and "Traceback" not in out
    assert _mappings(api_url) == []


def test_create_cell_refuses_a_database_another_cell_has(api_url, tmp_path):
    cell2 = f"sqlite:///{tmp_path}/cell2.db"
    assert _create(api_url, "cell2", cell2, TRANSPORT + "2", "--verbose")[0] == 0
    # Another transport, the same database (another spelling of its path too).
    same = f"sqlite:///{os.path.relpath(tmp_path / 'cell2.db')}"
    for url in (cell2, same):
        code, out = _create(api_url, "cell3", url, TRANSPORT + "3")
        assert code == 2, out
        assert "already the database of cell cell2" in out and SECRET not in out
    assert [name for name, _url in _mappings(api_url)] == ["cell2"]


def test_create_cell_on_a_database_that_cannot_be_reached_maps_nothing(api_url, tmp_path):
    gone = f"sqlite:///{tmp_path}/no/such/dir/cell1.db"
    code, out = _create(api_url, "cell1", gone)
    assert code == 1, out
    assert "No cell was mapped" in out and "Traceback" not in out and SECRET not in out
    assert _mappings(api_url) == []


def test_create_cell_on_a_server_database_that_does_not_exist(api_url):
    if os.environ.get("CI") != "true" and not backends._port_open("127.0.0.1", 5432):
        pytest.skip("PostgreSQL is not reachable")
    url = f"postgresql://postgres:{SECRET}@127.0.0.1:5432/novella_no_such_database"
    code, out = _create(api_url, "cell1", url)
    assert code == 1, out
    assert "does not exist" in out and SECRET not in out and "****" in out
    assert _mappings(api_url) == []


def test_list_cells_masks_passwords_in_a_bordered_table(api_url, tmp_path):
    db = f"sqlite:///{tmp_path}/cell1.db"
    assert _create(api_url, "cell1", db)[0] == 0
    code, out = _run("--api-database-connection", api_url, "cell_v2", "list_cells")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("+-") and lines[-1] == lines[0] and lines[2] == lines[0]
    assert [c.strip() for c in lines[1].split("|")[1:-1]] == [
        "Name", "UUID", "Transport URL", "Database Connection", "Disabled"]
    assert len({len(line) for line in lines}) == 1  # every row as wide as the rules
    row = [c.strip() for c in lines[3].split("|")[1:-1]]
    assert row[0] == "cell1" and row[2] == "rabbit://guest:****@127.0.0.1:5672/cell"
    assert SECRET not in out
    code, out = _run("--api-database-connection", api_url, "cell_v2", "list_cells",
                     "--verbose")
    assert code == 0 and TRANSPORT in out


def test_discover_hosts_verbose_strict_and_a_cell_out_of_reach(api_url, tmp_path):
    db = f"sqlite:///{tmp_path}/cell1.db"
    assert _create(api_url, "cell1", db)[0] == 0
    with cells.database(db).session(write=True) as s:
        s.add(cm.Service(uuid="s1", host="hostA", binary="nova-compute", topic="compute"))
    # A mapping as an older version could write it: its database does not exist.
    with cells.database(api_url).session(write=True) as s:
        s.add(am.CellMapping(uuid="00000000-0000-0000-0000-0000000000aa", name="broken",
                             transport_url=TRANSPORT,
                             database_connection=f"sqlite:///{tmp_path}/no/such/x.db"))
    code, out = _run("--api-database-connection", api_url, "cell_v2", "discover_hosts",
                     "--verbose")
    assert code == 1, out
    assert "Mapped host hostA to cell cell1." in out
    assert "Cell broken (00000000-0000-0000-0000-0000000000aa) could not be read" in out
    assert "Found 2 cell mapping(s)." in out and SECRET not in out
    with cells.database(api_url).session() as s:
        assert s.execute(sa.select(am.HostMapping.host)).scalars().all() == ["hostA"]
    with cells.database(api_url).session(write=True) as s:
        s.execute(sa.delete(am.CellMapping).where(am.CellMapping.name == "broken"))
    code, out = _run("--api-database-connection", api_url, "cell_v2", "discover_hosts",
                     "--strict")
    assert code == 1 and "Mapped host" not in out  # nothing new to map
    assert _run("--api-database-connection", api_url, "cell_v2", "discover_hosts")[0] == 0


def test_configuration_errors_never_exit_with_a_code_that_means_run_again(tmp_path):
    from novella.conf import CONF
    for group in ("api_database", "database"):  # an all-in-one started before sets them
        CONF.clear_override("connection", group=group)
    # archive_deleted_rows: 1 means "rows were archived, run again".
    code, out = _run("db", "archive_deleted_rows")
    assert code == 3, out  # the reference's "no API database"
    api = f"sqlite:///{tmp_path}/api.db"
    manage.api_db_sync(api)
    code, out = _run("--api-database-connection", api, "db", "archive_deleted_rows")
    assert code == manage_cli.CONFIG_ERROR == 255, out
    assert "[database] connection is not set" in out
    code, out = _run("--api-database-connection", api, "db", "archive_deleted_rows",
                     "--max_rows", "0")
    assert code == 2 and "positive value for max_rows" in out
    # heal_allocations: 1 means "--max-count reached, run again".
    code, out = _run("placement", "heal_allocations")
    assert code == 255 and "[api_database] connection is not set" in out
    code, out = _run("--config-file", str(tmp_path / "missing.conf"), "placement",
                     "heal_allocations")
    assert code == 255 and "configuration cannot be read" in out
