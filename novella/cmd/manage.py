"""`novella manage`: database and cells v2 administration, as nova-manage."""
import uuid

import sqlalchemy as sa

from novella.db import api_models as am
from novella.db import cell_models as cm
from novella.db import cells as cells_mod
from novella.db import migrate
from novella.db.cells import CELL0_UUID


def api_db_sync(api_url, service_urls=None):
    """The API database, then the embedded image, network and volume services'
    tables: in the API database, unless ``service_urls`` ({name: url}, as
    ``novella.embedded.service_connections`` gives) puts a service elsewhere."""
    migrate.sync("api", api_url)
    service_urls = service_urls or {}
    for name in migrate.EMBEDDED:
        migrate.sync(name, service_urls.get(name) or api_url)


def cell_db_sync(api_url, cell_urls=()):
    """Sync cell0 and every mapped cell (and any extra URLs given)."""
    urls = list(cell_urls)
    if api_url:
        db = cells_mod.database(api_url)
        urls += [c.database_connection for c in cells_mod.list_cells(db)]
    for url in dict.fromkeys(urls):
        migrate.sync("cell", url)
    return urls


def _cell0_url(main_url):
    """Derive cell0's URL from a cell's as nova-manage does (name + '_cell0')."""
    base, _, rest = main_url.partition("?")
    if base.startswith("sqlite"):
        stem = base[:-3] if base.endswith(".db") else base
        return stem + "_cell0.db" + ("?" + rest if rest else "")
    return base + "_cell0" + ("?" + rest if rest else "")


def map_cell0(api_url, database_connection):
    db = cells_mod.database(api_url)
    with db.session(write=True) as s:
        cell0 = s.scalars(sa.select(am.CellMapping).where(am.CellMapping.uuid == CELL0_UUID)).first()
        if cell0 is None:
            cell0 = am.CellMapping(uuid=CELL0_UUID, name="cell0", transport_url="none:///",
                                   database_connection=database_connection)
            s.add(cell0)
    migrate.sync("cell", database_connection)
    return cell0


def create_cell(api_url, name, transport_url, database_connection, disabled=False):
    db = cells_mod.database(api_url)
    with db.session(write=True) as s:
        existing = s.scalars(sa.select(am.CellMapping).where(
            am.CellMapping.database_connection == database_connection,
            am.CellMapping.transport_url == transport_url)).first()
        if existing is not None:
            raise ValueError(f"The specified transport_url and/or database_connection "
                             f"combination already exists for another cell with uuid {existing.uuid}.")
        cell = am.CellMapping(uuid=str(uuid.uuid4()), name=name, transport_url=transport_url,
                              database_connection=database_connection, disabled=disabled)
        s.add(cell)
    migrate.sync("cell", database_connection)
    return cell


def list_cells(api_url):
    return cells_mod.list_cells(cells_mod.database(api_url))


def discover_hosts(api_url, cell_uuid=None):
    """Map every compute host found in a cell's services table to that cell."""
    api_db = cells_mod.database(api_url)
    added = []
    for cell in cells_mod.list_cells(api_db, include_cell0=False):
        if cell_uuid and cell.uuid != cell_uuid:
            continue
        cell_db = cells_mod.cell_database(cell)
        with cell_db.session() as s:
            hosts = set(s.scalars(sa.select(cm.Service.host).where(
                cm.Service.binary == "nova-compute", cm.Service.deleted == 0)))
        with api_db.session(write=True) as s:
            known = set(s.scalars(sa.select(am.HostMapping.host)))
            for host in sorted(hosts - known):
                s.add(am.HostMapping(cell_id=cell.id, host=host))
                added.append((cell.name, host))
        with cell_db.session(write=True) as s:
            s.execute(sa.update(cm.ComputeNode).where(cm.ComputeNode.mapped == 0)
                      .values(mapped=1))
    return added
