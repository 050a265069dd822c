"""Services, compute nodes and availability zones, read from every cell."""
import datetime

import sqlalchemy as sa

from novella.db import api_models as am, cell_models as cm, cells as cells_mod

COMPUTE = "nova-compute"


def _rows(api, model, equal):
    """Rows of a cell model from every cell (down cells skipped), with their cell;
    ``equal``: {column: value} the rows have."""
    cells = cells_mod.list_cells(api.api_db, include_cell0=False)
    where = [getattr(model, column) == value for column, value in equal.items()]

    def fetch(cell, db):
        with db.session() as s:
            q = sa.select(model).where(model.deleted == 0, *where).order_by(model.id)
            return list(s.scalars(q))

    out = []
    by_uuid = {c.uuid: c for c in cells}
    for cell_uuid, rows in cells_mod.scatter(cells, fetch).items():
        if isinstance(rows, Exception):
            continue
        out.extend((by_uuid[cell_uuid], r) for r in rows)
    return out


def services(api, **equal):
    """(cell, Service) of every cell's services with the values ``equal`` gives
    (e.g. ``host=``, ``binary=``, ``disabled=``)."""
    return _rows(api, cm.Service, equal)


def compute_nodes(api, **equal):
    """(cell, ComputeNode) of every cell's nodes with the values ``equal`` gives."""
    return _rows(api, cm.ComputeNode, equal)


def compute_service(cell, host):
    """The nova-compute service row of ``host`` in ``cell``, or None."""
    with cells_mod.cell_database(cell).read_session() as s:
        return s.scalars(sa.select(cm.Service).where(
            cm.Service.host == host, cm.Service.binary == COMPUTE,
            cm.Service.deleted == 0)).first()


def is_up(conf, svc):
    if svc.forced_down:
        return False
    last = svc.last_seen_up or svc.updated_at or svc.created_at
    if last is None:
        return False
    now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    return abs((now - last).total_seconds()) <= conf.service_down_time


def host_zones(api):
    """{host: availability zone} for hosts in an aggregate that names one."""
    with api.api_db.session() as s:
        q = (sa.select(am.AggregateHost.host, am.AggregateMetadata.value)
             .join(am.AggregateMetadata, am.AggregateMetadata.aggregate_id == am.AggregateHost.aggregate_id)
             .where(am.AggregateMetadata.key == "availability_zone"))
        zones = {}
        for host, zone in s.execute(q):
            zones.setdefault(host, set()).add(zone)
    return {h: ",".join(sorted(z)) for h, z in zones.items()}


def zone_of(api, svc, zones=None):
    if svc.binary != COMPUTE:
        return api.conf.internal_service_availability_zone
    zones = host_zones(api) if zones is None else zones
    return zones.get(svc.host, api.conf.default_availability_zone)


def aggregate_zone_names(api):
    with api.api_db.session() as s:
        return set(s.scalars(sa.select(am.AggregateMetadata.value)
                             .where(am.AggregateMetadata.key == "availability_zone")))
