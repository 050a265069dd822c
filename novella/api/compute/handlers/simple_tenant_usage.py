"""/os-simple-tenant-usage: hours and resource-hours of each project's servers in a period.

A server counts from its launch to its termination (or the period's end); those
never launched and those terminated before the period do not count. Totals are
per project; ``detailed=1`` (always on show) lists each server. From 2.40 the
servers are paged (``limit``, ``marker``; ``*_links``), ordered by project and id.
"""
import datetime
import json

from novella.api.compute import common, errors
from novella.db import cells as cells_mod, servers as servers_db

P = "os_compute_api:os-simple-tenant-usage:"
_FORMATS = ("%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M:%S.%f", "%Y-%m-%d %H:%M:%S.%f")


def _now():
    return datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None, microsecond=0)


def _time(value):
    if not value:
        return _now()
    for fmt in _FORMATS:
        try:
            return datetime.datetime.strptime(value, fmt)
        except ValueError:
            continue
    raise errors.BadRequest("Invalid input received: Datetime is in invalid format")


def _period(req):
    start, stop = _time(req.GET.get("start")), _time(req.GET.get("end"))
    if not start < stop:
        raise errors.BadRequest("Invalid start time. The start time cannot occur after the "
                                "end time.")
    return start, min(stop, _now())


def _servers(req, start, stop, project_id, limit, marker):
    """Rows of the servers active in the period, every cell, ordered (project, uuid)."""
    def in_cell(cell, db):
        return servers_db.active_in(db, start, stop, project_id)

    cells = cells_mod.list_cells(req.api.api_db, include_cell0=False)
    rows = []
    for result in cells_mod.scatter(cells, in_cell).values():
        if not isinstance(result, Exception):
            rows.extend(result)
    rows.sort(key=lambda r: (r[0].project_id or "", r[0].uuid))
    if marker:
        uuids = [r[0].uuid for r in rows]
        if marker not in uuids:
            raise errors.BadRequest(f"Marker {marker} could not be found.")
        rows = rows[uuids.index(marker) + 1:]
    return rows[:limit]


def _server_usage(row, flavor_json, start, stop):
    flavor = (json.loads(flavor_json).get("cur") if flavor_json else None) or {}
    began = max(row.launched_at, start)
    ended = min(stop, row.terminated_at) if row.terminated_at else stop
    hours = max((ended - began).total_seconds() / 3600.0, 0)
    state = "terminated" if row.terminated_at else row.vm_state
    uptime = ((row.terminated_at if row.terminated_at else _now()) - row.launched_at)
    return {"instance_id": row.uuid, "name": row.display_name, "tenant_id": row.project_id,
            "hours": hours, "flavor": flavor.get("name", ""),
            "memory_mb": flavor.get("memory_mb", row.memory_mb),
            "local_gb": flavor.get("root_gb", row.root_gb or 0)
            + flavor.get("ephemeral_gb", row.ephemeral_gb or 0),
            "vcpus": flavor.get("vcpus", row.vcpus),
            "started_at": common.iso_usec(row.launched_at),
            "ended_at": common.iso_usec(row.terminated_at), "state": state,
            "uptime": int(uptime.total_seconds())}


def _usages(req, start, stop, project_id, detailed):
    paged = req.at_least("2.40")
    limit, marker = common.limit_and_marker(req) if paged else (req.api.conf.api.max_limit,
                                                                 None)
    servers = [_server_usage(row, flavor, start, stop)
               for row, flavor in _servers(req, start, stop, project_id, limit, marker)]
    totals = {}
    for info in servers:
        t = totals.setdefault(info["tenant_id"], {
            "tenant_id": info["tenant_id"], "total_local_gb_usage": 0, "total_vcpus_usage": 0,
            "total_memory_mb_usage": 0, "total_hours": 0,
            "start": common.iso_usec(start), "stop": common.iso_usec(stop),
            **({"server_usages": []} if detailed else {})})
        t["total_local_gb_usage"] += info["local_gb"] * info["hours"]
        t["total_vcpus_usage"] += info["vcpus"] * info["hours"]
        t["total_memory_mb_usage"] += info["memory_mb"] * info["hours"]
        t["total_hours"] += info["hours"]
        if detailed:
            t["server_usages"].append(info)
    links = common.next_link(req, ["os-simple-tenant-usage"] + ([project_id] if project_id
                                                                 else []),
                             servers, limit, id_key="instance_id") if paged else []
    return list(totals.values()), links


def index(req):
    req.authorize(P + "list")
    start, stop = _period(req)
    usages, links = _usages(req, start, stop, None, req.GET.get("detailed") == "1")
    body = {"tenant_usages": usages}
    if links:
        body["tenant_usages_links"] = links
    return 200, body


def show(req, tenant_id):
    req.authorize(P + "show", {"project_id": tenant_id})
    start, stop = _period(req)
    usages, links = _usages(req, start, stop, tenant_id, detailed=True)
    body = {"tenant_usage": usages[0] if usages else {}}
    if links:
        body["tenant_usage_links"] = links
    return 200, body


ROUTES = [
    ("GET", "/os-simple-tenant-usage", index),
    ("GET", "/os-simple-tenant-usage/{tenant_id}", show),
]
