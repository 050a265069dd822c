"""`novella manage cell_v2` verify_instance, list_hosts, delete_host, delete_cell,
update_cell and map_cell0: mappings changed (or not) and the exit codes."""
import pytest
import sqlalchemy as sa

from novella.cmd import manage
from novella.conf import CONF
from novella.db import api_models as am
from novella.db import cell_models as cm
from novella.db import cells
from novella.db.cells import CELL0_UUID

MISSING = "00000000-0000-0000-0000-0000000000ff"


def _host_mappings(cloud):
    with cloud.aio.api_db.session() as s:
        return sorted(s.scalars(sa.select(am.HostMapping.host)))


def test_verify_instance(cloud):
    sid = cloud.boot()
    cell = cloud.aio.cells[0]
    assert cloud.manage("cell_v2", "verify_instance", "--uuid", sid) == (
        0, f"Instance {sid} is in cell: {cell.name} ({cell.uuid})\n")
    assert cloud.manage("cell_v2", "verify_instance", "--uuid", sid, "--quiet") == (0, "")
    code, out = cloud.manage("cell_v2", "verify_instance", "--uuid", MISSING)
    assert code == 1 and "is not mapped to a cell" in out
    cloud.delete(sid)
    code, out = cloud.manage("cell_v2", "verify_instance", "--uuid", sid)
    assert code == 3 and "has been deleted" in out
    with cloud.cell_db().session(write=True) as s:
        s.execute(sa.delete(cm.Instance).where(cm.Instance.uuid == sid))
    code, out = cloud.manage("cell_v2", "verify_instance", "--uuid", sid)
    assert code == 4 and "has been archived" in out
    with cloud.aio.api_db.session(write=True) as s:
        s.execute(sa.update(am.InstanceMapping).where(am.InstanceMapping.instance_uuid == sid)
                  .values(cell_id=None))
    assert cloud.manage("cell_v2", "verify_instance", "--uuid", sid)[0] == 2


def test_list_and_delete_hosts(cloud):
    cell1, cell2 = cloud.aio.cells
    code, out = cloud.manage("cell_v2", "list_hosts")
    assert code == 0
    lines = out.splitlines()
    assert lines[1].split("|")[1:4] == [" Cell Name ", " Cell UUID                            ",
                                        " Hostname    "]
    assert [line.split("|")[3].strip() for line in lines[3:5]] == ["cell1-host1", "cell2-host1"]
    code, out = cloud.manage("cell_v2", "list_hosts", "--cell_uuid", cell2.uuid)
    assert "cell2-host1" in out and "cell1-host1" not in out
    assert cloud.manage("cell_v2", "list_hosts", "--cell_uuid", MISSING)[0] == 1

    sid = cloud.boot()
    host = cloud.host_of(sid)
    own = cell1 if host.startswith("cell1") else cell2
    other = cell2 if own is cell1 else cell1
    assert cloud.manage("cell_v2", "delete_host", "--cell_uuid", MISSING, "--host", host)[0] == 1
    assert cloud.manage("cell_v2", "delete_host", "--cell_uuid", own.uuid, "--host", "nope")[0] == 2
    assert cloud.manage("cell_v2", "delete_host", "--cell_uuid", other.uuid, "--host", host)[0] == 3
    assert cloud.manage("cell_v2", "delete_host", "--cell_uuid", own.uuid, "--host", host)[0] == 4
    assert host in _host_mappings(cloud)
    cloud.delete(sid)
    assert cloud.manage("cell_v2", "delete_host", "--cell_uuid", own.uuid, "--host", host) == (0, "")
    assert host not in _host_mappings(cloud)
    with cells.cell_database(own).session() as s:
        assert s.scalars(sa.select(cm.ComputeNode.mapped).where(cm.ComputeNode.host == host)).all() == [0]


def test_update_cell(cloud):
    cell1, cell2 = cloud.aio.cells
    api_url = CONF.api_database.connection

    def mapping(uuid):
        return next(c for c in manage.list_cells(api_url) if c.uuid == uuid)
    assert cloud.manage("cell_v2", "update_cell", "--cell_uuid", MISSING)[0] == 1
    assert cloud.manage("cell_v2", "update_cell", "--cell_uuid", cell1.uuid,
                        "--transport-url", cell2.transport_url)[0] == 3
    assert cloud.manage("cell_v2", "update_cell", "--cell_uuid", cell1.uuid,
                        "--disable", "--enable")[0] == 4
    assert cloud.manage("cell_v2", "update_cell", "--cell_uuid", CELL0_UUID, "--disable")[0] == 5
    assert mapping(cell1.uuid).disabled is False and mapping(cell1.uuid).name == "cell1"
    assert cloud.manage("cell_v2", "update_cell", "--cell_uuid", cell1.uuid, "--name", "east",
                        "--disable") == (0, "")
    assert (mapping(cell1.uuid).name, mapping(cell1.uuid).disabled) == ("east", True)
    assert cloud.manage("cell_v2", "update_cell", "--cell_uuid", cell1.uuid, "--disable") == (
        0, f"Cell {cell1.uuid} is already disabled\n")
    assert cloud.manage("cell_v2", "update_cell", "--cell_uuid", cell1.uuid, "--enable")[0] == 0
    assert mapping(cell1.uuid).disabled is False


def test_delete_cell(cloud):
    cell1, cell2 = cloud.aio.cells
    api_url = CONF.api_database.connection
    assert cloud.manage("cell_v2", "delete_cell", "--cell_uuid", MISSING)[0] == 1
    assert cloud.manage("cell_v2", "delete_cell", "--cell_uuid", cell2.uuid)[0] == 2
    sid = cloud.boot(availability_zone="nova:cell2-host1")
    assert cloud.host_of(sid) == "cell2-host1"
    assert cloud.manage("cell_v2", "delete_cell", "--cell_uuid", cell2.uuid, "--force")[0] == 3
    cloud.delete(sid)
    with cloud.aio.api_db.session(write=True) as s:   # hosts gone: only the mappings remain
        s.execute(sa.delete(am.HostMapping).where(am.HostMapping.cell_id == cell2.id))
    assert cloud.manage("cell_v2", "delete_cell", "--cell_uuid", cell2.uuid)[0] == 4
    assert cloud.manage("cell_v2", "delete_cell", "--cell_uuid", cell2.uuid, "--force")[0] == 0
    assert [c.uuid for c in manage.list_cells(api_url)] == [CELL0_UUID, cell1.uuid]
    with cloud.aio.api_db.session() as s:
        assert s.scalar(sa.select(sa.func.count()).select_from(am.InstanceMapping)
                        .where(am.InstanceMapping.instance_uuid == sid)) == 0


@pytest.fixture
def api_url(tmp_path):
    url = f"sqlite:///{tmp_path}/api.db"
    manage.api_db_sync(url)
    yield url
    CONF.clear_override("connection", group="database")


def _run(api_url, *argv):
    from tests.functional.manage.conftest import ManageCloud
    return ManageCloud.manage(None, "--api-database-connection", api_url, *argv)


def _cell0(api_url):
    return next(c for c in manage.list_cells(api_url) if c.uuid == CELL0_UUID)


def test_map_cell0_derives_its_url_and_is_idempotent(api_url, tmp_path):
    code, out = _run(api_url, "cell_v2", "map_cell0")
    assert code == 1 and "[database] connection is not set" in out
    assert manage.list_cells(api_url) == []
    CONF.set_override("connection", f"sqlite:///{tmp_path}/nova.db", group="database")
    code, out = _run(api_url, "cell_v2", "map_cell0")
    assert code == 0 and out.startswith("Cell0 is mapped")
    assert _cell0(api_url).database_connection == f"sqlite:///{tmp_path}/nova_cell0.db"
    with cells.database(f"sqlite:///{tmp_path}/nova_cell0.db").session() as s:
        assert s.scalar(sa.select(sa.func.count()).select_from(cm.Instance)) == 0
    assert _run(api_url, "cell_v2", "map_cell0", "--database_connection",
                f"sqlite:///{tmp_path}/other.db") == (0, "Cell0 is already setup\n")
    assert _cell0(api_url).database_connection == f"sqlite:///{tmp_path}/nova_cell0.db"
    assert manage.cell0_url("mysql+pymysql://u:p@db/nova?charset=utf8") == \
        "mysql+pymysql://u:p@db/nova_cell0?charset=utf8"


def test_map_cell0_repairs_a_broken_mapping_and_refuses_bad_urls(api_url, tmp_path):
    with cells.database(api_url).session(write=True) as s:
        s.add(am.CellMapping(uuid=CELL0_UUID, name="cell0", transport_url="none:///",
                             database_connection="_cell0"))
    good = f"sqlite:///{tmp_path}/c0.db"
    assert _run(api_url, "cell_v2", "map_cell0", "--database_connection", good)[0] == 0
    assert _cell0(api_url).database_connection == good
    CONF.set_override("connection", "sqlite://", group="database")
    code, out = _run(api_url, "cell_v2", "map_cell0")
    assert code == 1 and "names no database" in out
    assert _cell0(api_url).database_connection == good
