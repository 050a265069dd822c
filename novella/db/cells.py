"""Reaching the API database and each cell's database.

The instance mapping in the API database is the authority on which cell holds
a server; ``instance_cell`` follows it. Listing across cells asks every cell
database in parallel (``scatter``) and merges the answers.
"""
import concurrent.futures

import sqlalchemy as sa

from novella.db import api_models, cell_models
from novella.db.cache import TokenCache, token_of
from novella.db.engine import Database

CELL0_UUID = "00000000-0000-0000-0000-000000000000"

_databases = {}


def database(url):
    """The shared Database object for a URL."""
    db = _databases.get(url)
    if db is None:
        db = _databases[url] = Database(url)
    return db


def cell_database(cell_mapping):
    return database(cell_mapping.database_connection)


def _load_cells(api_db):
    with api_db.session() as s:
        q = sa.select(api_models.CellMapping).order_by(api_models.CellMapping.id)
        return list(s.scalars(q))


# Every request that spans cells starts here; the mappings change only through
# `novella manage cell_v2` (which bumps updated_at, adds or removes rows).
CACHE = TokenCache(token_of((api_models.CellMapping.__table__, [
    sa.func.count(), sa.func.max(api_models.CellMapping.id),
    sa.func.max(api_models.CellMapping.updated_at)])), _load_cells)


def list_cells(api_db, include_cell0=True, include_disabled=True, cached=None):
    """The cell mappings (shared, read-only objects), in id order; ``cached``:
    ``CACHE.get(api_db)`` when the caller has just read it."""
    return [c for c in (CACHE.get(api_db) if cached is None else cached)
            if (include_cell0 or c.uuid != CELL0_UUID)
            and (include_disabled or not c.disabled)]


def cell_by_uuid(api_db, cell_uuid):
    """The CellMapping with that uuid; LookupError if there is none."""
    for c in list_cells(api_db):
        if c.uuid == cell_uuid:
            return c
    raise LookupError(f"cell {cell_uuid} is not mapped")


def instance_cell(api_db, instance_uuid):
    """The CellMapping holding the server, or None (not mapped / still building)."""
    with api_db.session() as s:
        q = (sa.select(api_models.CellMapping)
             .join(api_models.InstanceMapping, api_models.InstanceMapping.cell_id == api_models.CellMapping.id)
             .where(api_models.InstanceMapping.instance_uuid == instance_uuid))
        return s.scalars(q).first()


def set_instance_cell(api_db, instance_uuid, cell):
    """Map the server to ``cell``."""
    with api_db.session(write=True) as s:
        s.execute(sa.update(api_models.InstanceMapping).where(
            api_models.InstanceMapping.instance_uuid == instance_uuid).values(cell_id=cell.id))


def host_cell(api_db, host):
    """The CellMapping a compute host is mapped to, or None."""
    with api_db.session() as s:
        q = (sa.select(api_models.CellMapping)
             .join(api_models.HostMapping, api_models.HostMapping.cell_id == api_models.CellMapping.id)
             .where(api_models.HostMapping.host == host))
        return s.scalars(q).first()


_pool = concurrent.futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="scatter")


def scatter(cells, fn):
    """Run ``fn(cell_mapping, Database)`` against each cell in parallel.

    Returns {cell_uuid: result}; an exception in one cell is returned as the
    result for that cell so callers can decide (the reference skips down cells).
    """
    futures = {c.uuid: _pool.submit(fn, c, cell_database(c)) for c in cells}
    out = {}
    for cell_uuid, fut in futures.items():
        try:
            out[cell_uuid] = fut.result()
        except Exception as exc:  # noqa: BLE001 - reported to the caller
            out[cell_uuid] = exc
    return out


def create_schema(db, models):
    """Create every table of a model module on an empty database (tests, all-in-one)."""
    models.Base.metadata.create_all(db.engine)


API_MODELS = api_models
CELL_MODELS = cell_models
