"""Services, compute nodes and availability zones, read from every cell."""
import datetime

from novella.db import aggregates as aggregates_db, cells as cells_mod, services as services_db

COMPUTE = services_db.COMPUTE


def _rows(api, read, equal):
    """Rows from every cell (down cells skipped), with their cell; ``read``: a
    ``novella.db.services`` reader of one cell's rows with the values ``equal``
    ({column: value}) gives."""
    cells = cells_mod.list_cells(api.api_db, include_cell0=False)
    out = []
    by_uuid = {c.uuid: c for c in cells}
    for cell_uuid, rows in cells_mod.scatter(cells, lambda _cell, db: read(db, equal)).items():
        if isinstance(rows, Exception):
            continue
        out.extend((by_uuid[cell_uuid], r) for r in rows)
    return out


def services(api, **equal):
    """(cell, Service) of every cell's services with the values ``equal`` gives
    (e.g. ``host=``, ``binary=``, ``disabled=``)."""
    return _rows(api, services_db.services_in, equal)


def compute_nodes(api, **equal):
    """(cell, ComputeNode) of every cell's nodes with the values ``equal`` gives."""
    return _rows(api, services_db.compute_nodes_in, equal)


def compute_service(cell, host):
    """The nova-compute service row of ``host`` in ``cell``, or None."""
    return services_db.compute_service(cells_mod.cell_database(cell), host)


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
    zones = {}
    for host, zone in aggregates_db.host_zone_pairs(api.api_db):
        zones.setdefault(host, set()).add(zone)
    return {h: ",".join(sorted(z)) for h, z in zones.items()}


def zone_of(api, svc, zones=None):
    if svc.binary != COMPUTE:
        return api.conf.internal_service_availability_zone
    zones = host_zones(api) if zones is None else zones
    return zones.get(svc.host, api.conf.default_availability_zone)


def zone_names(api):
    """Every zone a server may ask for: the aggregates' and the default."""
    return aggregates_db.zone_names(api.api_db) | {api.conf.default_availability_zone}
