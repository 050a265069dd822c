"""/os-migrations and /servers/{id}/migrations, merged across cells.

During a cross-cell move both cells hold a row with the same uuid; the
listing shows one: the copy that is not hidden, else the one in the cell the
instance mapping points at.

A running live migration can be forced to complete (``POST
/servers/{id}/migrations/{id}/action {"force_complete": null}``, 2.22) or
aborted (``DELETE /servers/{id}/migrations/{id}``, 2.24; from 2.65 also while
'queued' or 'preparing'): the API checks, records the instance action and
casts to the source host (docs/live-migration.md).
"""

from novella.api.compute import actions, common, errors, instances, rpcclients
from novella.api.compute import validation as v
from novella.compute import states
from novella.compute.states import task_states
from novella.db import cells as cells_mod, migration_records, records, server_records

IN_PROGRESS_LIVE = ("queued", "preparing", "running", "post-migrating")


_HOST_FIELDS = ("source_node", "dest_node", "source_compute", "dest_compute", "dest_host")


def view(req, m, cell=None, hosts=True):
    out = {"id": m.id, "source_node": m.source_node, "dest_node": m.dest_node,
           "source_compute": m.source_compute, "dest_compute": m.dest_compute,
           "dest_host": m.dest_host, "status": m.status, "instance_uuid": m.instance_uuid,
           "old_instance_type_id": m.old_instance_type_id,
           "new_instance_type_id": m.new_instance_type_id,
           "created_at": common.iso_usec(m.created_at), "updated_at": common.iso_usec(m.updated_at)}
    if req.at_least("2.23"):
        out["migration_type"] = m.migration_type
        if m.migration_type == "live-migration" and m.status in IN_PROGRESS_LIVE:
            out["links"] = req.links("servers", m.instance_uuid, "migrations", m.id)
    if req.at_least("2.59"):
        out["uuid"] = m.uuid
    if req.at_least("2.80"):
        out["user_id"] = m.user_id
        out["project_id"] = m.project_id
    if not hosts:
        out.update(dict.fromkeys(_HOST_FIELDS))
    return out


def _filters(req):
    """``migration_records.page``'s filters from the query."""
    g = req.GET
    keys = ("instance_uuid", "status", "migration_type", "source_compute")
    if req.at_least("2.80"):
        keys += ("user_id", "project_id")
    query = {"equal": {key: g[key] for key in keys if g.get(key)}, "host": g.get("host")}
    if req.at_least("2.59"):
        query["since"], query["before"] = common.changes_window(req)
    return query


def _key(m):
    return (m.created_at, m.uuid)


def _dedupe(api_db, found):
    """One row per migration uuid (see the module's doc)."""
    by_uuid = {}
    for cell, m in found:
        by_uuid.setdefault(m.uuid, []).append((cell, m))
    out = []
    for copies in by_uuid.values():
        if len(copies) > 1:
            shown = [c for c in copies if not c[1].hidden]
            if len(shown) == 1:
                copies = shown
            else:
                _im, home = server_records.mapping(api_db, copies[0][1].instance_uuid)
                copies = [c for c in copies if home is not None and c[0].uuid == home.uuid] or copies
        out.append(copies[0])
    return out


def list_migrations(req, query, limit, marker):
    cells = cells_mod.list_cells(req.api.api_db)
    marker_row = None
    if marker:
        hits = cells_mod.scatter(cells, lambda c, db: migration_records.row_by_uuid(db, marker))
        marker_row = next((r for r in hits.values() if r is not None and not isinstance(r, Exception)), None)
        if marker_row is None:
            raise errors.BadRequest(f"Marker {marker} could not be found.")

    def fetch(cell, db):
        # limit * 2: room for copies dropped by the dedupe
        return [(cell, m) for m in migration_records.page(
            db, limit=None if limit is None else limit * 2, marker=marker_row, **query)]

    found = []
    for result in cells_mod.scatter(cells, fetch).values():
        if not isinstance(result, Exception):
            found.extend(result)
    rows = sorted(_dedupe(req.api.api_db, found), key=lambda cm_: _key(cm_[1]), reverse=True)
    return rows[:limit] if limit is not None else rows


def index(req):
    req.authorize("os_compute_api:os-migrations:index")
    if req.GET.get("project_id") != req.context.project_id:
        req.authorize("os_compute_api:os-migrations:index:all_projects")
    hosts = req.can("os_compute_api:os-migrations:index:host")
    limit, marker = (common.limit_and_marker(req) if req.at_least("2.59") else (None, None))
    rows = list_migrations(req, _filters(req), limit, marker)
    items = [view(req, m, c, hosts) for c, m in rows]
    body = {"migrations": items}
    if limit is not None:
        links = common.next_link(req, ["os-migrations"], items, limit, id_key="uuid")
        if links:
            body["migrations_links"] = links
    return 200, body


# --- /servers/{id}/migrations: in-progress live migrations -----------------------------------
def server_view(req, m, hosts=True):
    out = {"id": m.id, "server_uuid": m.instance_uuid, "source_node": m.source_node,
           "dest_node": m.dest_node, "source_compute": m.source_compute,
           "dest_compute": m.dest_compute, "dest_host": m.dest_host, "status": m.status,
           "memory_total_bytes": m.memory_total, "memory_processed_bytes": m.memory_processed,
           "memory_remaining_bytes": m.memory_remaining, "disk_total_bytes": m.disk_total,
           "disk_processed_bytes": m.disk_processed, "disk_remaining_bytes": m.disk_remaining,
           "created_at": common.iso_usec(m.created_at), "updated_at": common.iso_usec(m.updated_at)}
    if req.at_least("2.59"):
        out["uuid"] = m.uuid
    if req.at_least("2.80"):
        out["user_id"] = m.user_id
        out["project_id"] = m.project_id
    if not hosts:
        out.update(dict.fromkeys(_HOST_FIELDS))
    return out


def _server_migrations(req, server_id, migration_id=None):
    rec = instances.get(req, server_id)
    if rec["cell"] is None:
        return rec, []
    return rec, migration_records.live_in_progress(cells_mod.cell_database(rec["cell"]), server_id,
                                                   IN_PROGRESS_LIVE, migration_id)


def server_index(req, server_id):
    if not req.at_least("2.23"):
        raise errors.NotFound("The resource could not be found.")
    rec, rows = _server_migrations(req, server_id)
    target = {"project_id": rec["project_id"], "user_id": rec["user_id"]}
    req.authorize("os_compute_api:servers:migrations:index", target)
    hosts = req.can("os_compute_api:servers:migrations:index:host", target)
    return 200, {"migrations": [server_view(req, m, hosts) for m in rows]}


def server_show(req, server_id, migration_id):
    if not req.at_least("2.23"):
        raise errors.NotFound("The resource could not be found.")
    req.authorize("os_compute_api:servers:migrations:show")
    try:
        mid = int(migration_id)
    except ValueError:
        raise errors.NotFound(f"Migration {migration_id} could not be found.")
    _rec, rows = _server_migrations(req, server_id, mid)
    if not rows:
        raise errors.NotFound(f"In-progress live migration {migration_id} is not found for "
                              f"server {server_id}.")
    return 200, {"migration": server_view(req, rows[0])}


# --- force complete and abort of a live migration ------------------------------------------
_force_complete_schema = v.obj({"force_complete": {"type": "null"}}, ["force_complete"])


def _migration_of(rec, migration_id):
    """The server's migration with the integer id ``migration_id``, or None."""
    try:
        mid = int(migration_id)
    except ValueError:
        return None
    if rec["cell"] is None:
        return None
    return migration_records.row_of_instance(cells_mod.cell_database(rec["cell"]), mid, rec["uuid"])


def _wrong_state(migration_id, rec, status, what):
    return errors.BadRequest(f"Migration {migration_id} state of instance {rec['uuid']} is "
                             f"{status}. Cannot {what} while the migration is in this state.")


def _steer(req, rec, m, action, method):
    """The instance action, then the cast to the source host."""
    records.start_action(cells_mod.cell_database(rec["cell"]), req.context, rec["uuid"],
                         action)
    rpcclients.cast_to_compute(req.context, rec["cell"], m.source_compute, method,
                               instance_uuid=rec["uuid"], migration_uuid=m.uuid)
    return 202, None


def force_complete(req, server_id, migration_id):
    """End a running live migration's copy at once, so that it completes."""
    if not req.at_least("2.22"):
        raise errors.NotFound("The resource could not be found.")
    req.body_json(_force_complete_schema)
    rec = instances.get(req, server_id)
    req.authorize("os_compute_api:servers:migrations:force_complete", actions.target(rec))
    actions.check_unlocked(req, rec)
    actions.check_state(rec, "force_complete", vm_states=(states.ACTIVE,),
                        task_states=(task_states.MIGRATING,))
    m = _migration_of(rec, migration_id)
    if m is None:
        raise errors.BadRequest(f"Migration {migration_id} not found for instance "
                                f"{server_id}")
    if m.migration_type != "live-migration":
        raise errors.BadRequest(f"Migration {migration_id} for server {server_id} is not "
                                "live-migration.")
    if m.status != "running":
        raise _wrong_state(migration_id, rec, m.status, "force complete")
    return _steer(req, rec, m, "live_migration_force_complete",
                  "live_migration_force_complete")


def abort(req, server_id, migration_id):
    """Abort a live migration: the server stays on its source, the migration 'cancelled'."""
    if not req.at_least("2.24"):
        raise errors.NotFound("The resource could not be found.")
    rec = instances.get(req, server_id)
    req.authorize("os_compute_api:servers:migrations:delete", actions.target(rec))
    actions.check_unlocked(req, rec)
    actions.check_state(rec, "abort live migration", task_states=(task_states.MIGRATING,))
    m = _migration_of(rec, migration_id)
    if m is None:
        raise errors.NotFound(f"Migration {migration_id} not found for instance {server_id}")
    allowed = ("running", "queued", "preparing") if req.at_least("2.65") else ("running",)
    if m.migration_type != "live-migration" or m.status not in allowed:
        raise _wrong_state(migration_id, rec, m.status, "abort live migration")
    return _steer(req, rec, m, "live_migration_cancel", "live_migration_abort")


ROUTES = [
    ("GET", "/os-migrations", index),
    ("GET", "/servers/{server_id}/migrations", server_index),
    ("GET", "/servers/{server_id}/migrations/{migration_id}", server_show),
    ("DELETE", "/servers/{server_id}/migrations/{migration_id}", abort),
    ("POST", "/servers/{server_id}/migrations/{migration_id}/action", force_complete),
]
