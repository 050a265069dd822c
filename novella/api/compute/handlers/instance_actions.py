"""/servers/{id}/os-instance-actions: what was asked of a server, with events."""
import hashlib

from novella.api.compute import common, errors, instances
from novella.db import cells as cells_mod, instance_actions as actions_db

P = "os_compute_api:os-instance-actions:"


def _server(req, server_id, rule):
    rec = instances.get(req, server_id, read_deleted=req.at_least("2.21"))
    req.authorize(rule, {"project_id": rec["project_id"], "user_id": rec["user_id"]})
    return rec


def view(req, a):
    out = {"action": a.action, "instance_uuid": a.instance_uuid, "message": a.message,
           "project_id": a.project_id, "request_id": a.request_id,
           "start_time": common.iso_usec(a.start_time), "user_id": a.user_id}
    if req.at_least("2.58"):
        out["updated_at"] = common.iso_usec(a.updated_at or a.created_at)
    return out


def index(req, server_id):
    rec = _server(req, server_id, P + "list")
    limit, marker = (common.limit_and_marker(req) if req.at_least("2.58")
                     else (req.api.conf.api.max_limit, None))
    since, before = common.changes_window(req) if req.at_least("2.58") else (None, None)
    if rec["cell"] is None:
        return 200, {"instanceActions": []}
    actions = actions_db.page(cells_mod.cell_database(rec["cell"]), server_id, limit, since,
                              before, marker)
    if actions is None:
        raise errors.BadRequest(f"Marker {marker} could not be found.")
    items = [view(req, a) for a in actions]
    body = {"instanceActions": items}
    if req.at_least("2.58"):
        links = common.next_link(req, ["servers", server_id, "os-instance-actions"], items, limit,
                                 id_key="request_id")
        if links:
            body["links"] = links
    return 200, body


def show(req, server_id, request_id):
    rec = _server(req, server_id, P + "show")
    target = {"project_id": rec["project_id"], "user_id": rec["user_id"]}
    if rec["cell"] is None:
        raise errors.NotFound(f"Action for request_id {request_id} on instance {server_id} not found")
    a = actions_db.get(cells_mod.cell_database(rec["cell"]), server_id, request_id)
    if a is None:
        raise errors.NotFound(f"Action for request_id {request_id} on instance {server_id} not found")
    out = view(req, a)
    admin_events = req.can(P + "events", target)
    if req.at_least("2.51") or admin_events:
        show_details = req.at_least("2.84") and req.can(P + "events:details", target)
        out["events"] = [_event(req, e, rec, admin_events, show_details)
                         for e in sorted(a.events, key=lambda e: (e.start_time or e.created_at, e.id),
                                         reverse=True)]
    return 200, {"instanceAction": out}


def _event(req, e, rec, admin, details):
    out = {"event": e.event, "start_time": common.iso_usec(e.start_time),
           "finish_time": common.iso_usec(e.finish_time), "result": e.result}
    if admin:
        out["traceback"] = e.traceback
    if req.at_least("2.62"):
        out["hostId"] = (hashlib.sha224((rec["project_id"] + e.host).encode()).hexdigest()
                         if e.host else "")
        if admin:
            out["host"] = e.host or ""
    if details:
        out["details"] = e.details
    return out


ROUTES = [
    ("GET", "/servers/{server_id}/os-instance-actions", index),
    ("GET", "/servers/{server_id}/os-instance-actions/{request_id}", show),
]
