"""`novella manage`: schemas on every backend and the cells v2 commands."""
import pytest
import sqlalchemy as sa

from novella.cmd import main as cli
from novella.cmd import manage
from novella.db import api_models as am
from novella.db import cell_models as cm
from novella.db import cells
from novella.db.cells import CELL0_UUID
from tests import backends


def _tables(url):
    return set(sa.inspect(cells.database(url).engine).get_table_names())


@pytest.fixture
def api_url(tmp_path):
    url = f"sqlite:///{tmp_path}/api.db"
    manage.api_db_sync(url)
    return url


def test_cells_v2_commands_record_mappings(api_url, tmp_path, capsys):
    cell0_url = f"sqlite:///{tmp_path}/cell0.db"
    cell1_url = f"sqlite:///{tmp_path}/cell1.db"
    cli.main(["manage", "--api-database-connection", api_url, "cell_v2", "map_cell0",
              "--database_connection", cell0_url])
    cli.main(["manage", "--api-database-connection", api_url, "cell_v2", "create_cell",
              "--name", "cell1", "--transport-url", "inproc://cell1",
              "--database_connection", cell1_url])
    mapped = {c.name: c for c in manage.list_cells(api_url)}
    assert mapped["cell0"].uuid == CELL0_UUID
    assert mapped["cell1"].transport_url == "inproc://cell1"
    assert {"instances", "migrations", "services", "compute_nodes"} <= _tables(cell1_url)
    assert "instances" in _tables(cell0_url)

    # The same cell twice is refused and writes nothing.
    with pytest.raises(SystemExit):
        cli.main(["manage", "--api-database-connection", api_url, "cell_v2", "create_cell",
                  "--name", "again", "--transport-url", "inproc://cell1",
                  "--database_connection", cell1_url])
    assert len(manage.list_cells(api_url)) == 2

    # discover_hosts maps compute services found in the cell, once.
    with cells.database(cell1_url).session(write=True) as s:
        s.add(cm.Service(uuid="s1", host="hostA", binary="nova-compute", topic="compute"))
        s.add(cm.Service(uuid="s2", host="hostA", binary="nova-scheduler", topic="scheduler"))
        s.add(cm.ComputeNode(uuid="n1", host="hostA", hypervisor_hostname="hostA"))
    assert manage.discover_hosts(api_url) == [("cell1", "hostA")]
    assert manage.discover_hosts(api_url) == []
    with cells.database(api_url).session() as s:
        rows = s.execute(sa.select(am.HostMapping.host, am.HostMapping.cell_id)).all()
    assert rows == [("hostA", mapped["cell1"].id)]
    with cells.database(cell1_url).session() as s:
        assert s.scalars(sa.select(cm.ComputeNode.mapped)).all() == [1]


@pytest.mark.parametrize("backend", ["postgresql", "mysql"])
def test_schemas_on_server_databases(backend):
    api_url, drop_api = backends.create_database(backend)
    cell_url, drop_cell = backends.create_database(backend)
    try:
        manage.api_db_sync(api_url)
        manage.map_cell0(api_url, cell_url)
        assert manage.cell_db_sync(api_url) == [cell_url]
        assert {"cell_mappings", "instance_mappings", "flavors", "request_specs"} <= _tables(api_url)
        # The embedded services' tables, in the API database by default.
        assert {"images", "networks", "ports", "ml2_port_bindings", "volumes",
                "volume_attachment"} <= _tables(api_url)
        assert {"instances", "instance_extra", "migrations",
                "instance_actions_events"} <= _tables(cell_url)
        db = cells.database(cell_url)
        with db.session(write=True) as s:
            s.add(cm.Instance(uuid="i-1", project_id="p", user_id="u", vm_state="active"))
        with db.session() as s:
            assert s.scalars(sa.select(cm.Instance.vm_state)).all() == ["active"]
    finally:
        cells._databases.clear()
        drop_api()
        drop_cell()
