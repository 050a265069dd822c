"""The fleet dashboard: its pages (``GET /dashboard[/FILE]``) and its data (``GET /v1/fleet``).

The pages are the static files beside this module (``static/``: plain HTML,
CSS and JavaScript, nothing fetched from elsewhere) and need no token. The
browser page polls, every second, ``/v1/fleet`` and the Watcher resources
this endpoint serves (``/v1/action_plans``, ``/v1/actions``), sending the
token the page was given (docs/dashboard.md says how).

``/v1/fleet`` is what an administrator sees of the fleet at one instant::

    {"fleet": {"cells": [{"uuid", "name", "disabled", "error",
        "hosts": [{"host", "hypervisor_hostname", "provider_uuid", "state", "status",
                   "disabled_reason", "resources": {RC: {"total", "reserved",
                   "allocation_ratio", "capacity", "used"}},
                   "servers": [{"id", "name", "status"}]}],
        "migrations": [{"uuid", "instance_uuid", "migration_type", "status",
                        "source_compute", "dest_compute", "cross_cell_move"}]}],
      "totals": {"cells", "hosts", "servers", "migrations"}}}

Its cost does not grow with requests per host: each cell answers three
statements in one transaction (compute nodes with their services, servers,
migrations in progress), the cells in parallel as the hypervisor listing
does; Placement answers one provider listing and each provider's usages
(Placement has no request for many providers' usages at once, and deleting
allocations does not move a provider's generation), side by side; a
provider's inventories are asked again only when its generation moved.
"""
import concurrent.futures
import importlib.resources

import sqlalchemy as sa

from novella.api import rest
from novella.api.compute import hosts as hosts_mod
from novella.compute.states import migration_status, server_status
from novella.db import cell_models as cm, cells as cells_mod
from novella.placement import client as placement_client

STATIC = "novella.api.optimize.static"
CONTENT_TYPES = {".html": "text/html; charset=utf-8", ".css": "text/css; charset=utf-8",
                 ".js": "text/javascript; charset=utf-8", ".png": "image/png",
                 ".svg": "image/svg+xml"}
ADMIN_RULE = "admin_api"
# Provider listing with the root of each provider's tree (1.14).
PLACEMENT_VERSION = "1.14"


def handle(req):
    """The optimize API's hook: every request for the dashboard's pages and data."""
    path = req.path_info
    if path.rstrip("/") == "/v1/fleet":
        return fleet(req)
    if path == "/dashboard":
        # The page lives at /dashboard/ so that its files and data are found relative
        # to it, under whatever prefix the endpoint is served (a fragment is kept).
        return 302, None, {"Location": req.host_url + req.script_name + "/dashboard/"}
    return page(path[len("/dashboard/"):] or "index.html")


# -- the pages -------------------------------------------------------------------

def page(name):
    """A static file of the dashboard; only the package's own files, by plain name."""
    suffix = "." + name.rpartition(".")[2]
    if "/" in name or "\\" in name or name.startswith(".") or suffix not in CONTENT_TYPES:
        raise rest.not_found("The resource could not be found.")
    try:
        body = importlib.resources.files(STATIC).joinpath(name).read_bytes()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        raise rest.not_found("The resource could not be found.")
    # The page changes with the installed version only; its data is never cached.
    return 200, body, {"Content-Type": CONTENT_TYPES[suffix], "Cache-Control": "no-cache"}


# -- the data --------------------------------------------------------------------

def _authorize(req):
    """The rule every default of the endpoint's policy names (``admin_api``): whoever
    the operator lets administer drains sees the fleet, and no one else."""
    ctxt = req.context
    if ctxt is None:
        raise rest.HTTPError(401, "The request you have made requires authentication.")
    target = {"project_id": ctxt.project_id, "user_id": ctxt.user_id}
    if not req.state["enforcer"].authorize(ADMIN_RULE, target, ctxt, do_raise=False):
        raise rest.HTTPError(403, f"Policy doesn't allow {ADMIN_RULE} to be performed.")


def fleet(req):
    _authorize(req)
    state = req.state
    cache = state.get("fleet_providers")
    if cache is None:
        cache = state.setdefault("fleet_providers", ProviderBook())
    resources = cache.by_root(state["placement"])
    cells = cells_mod.list_cells(state["api_db"], include_cell0=False)
    answers = cells_mod.scatter(cells, _cell_rows)
    out, totals = [], {"cells": len(cells), "hosts": 0, "servers": 0, "migrations": 0}
    seen_migrations = set()
    for cell in cells:
        rows = answers[cell.uuid]
        doc = {"uuid": cell.uuid, "name": cell.name, "disabled": bool(cell.disabled),
               "error": None, "hosts": [], "migrations": []}
        out.append(doc)
        if isinstance(rows, Exception):
            doc["error"] = f"The cell's database did not answer: {type(rows).__name__}"
            continue
        nodes, servers, migrations = rows
        for node, svc in nodes:
            on_node = servers.get((node.host, node.hypervisor_hostname), [])
            doc["hosts"].append({
                "host": node.host, "hypervisor_hostname": node.hypervisor_hostname,
                "provider_uuid": node.uuid,
                "state": "up" if svc is not None and hosts_mod.is_up(state["conf"], svc)
                else "down",
                "status": "disabled" if svc is None or svc.disabled else "enabled",
                "disabled_reason": svc.disabled_reason if svc is not None else None,
                "resources": resources.get(node.uuid, {}),
                "servers": on_node})
            totals["servers"] += len(on_node)
        totals["hosts"] += len(doc["hosts"])
        for m in migrations:
            # A move across cells has its record in both cells: shown once, where it is visible.
            if m["uuid"] in seen_migrations:
                continue
            seen_migrations.add(m["uuid"])
            doc["migrations"].append(m)
            totals["migrations"] += 1
    return 200, {"fleet": {"cells": out, "totals": totals}}


def _cell_rows(cell, db):
    """(compute nodes with their services, {(host, node): [server]}, [migration]) of a cell."""
    i, m = cm.Instance.__table__, cm.Migration.__table__
    with db.session() as session:
        nodes = session.execute(
            sa.select(cm.ComputeNode, cm.Service)
            .outerjoin(cm.Service, sa.and_(cm.Service.host == cm.ComputeNode.host,
                                           cm.Service.binary == hosts_mod.COMPUTE,
                                           cm.Service.deleted == 0))
            .where(cm.ComputeNode.deleted == 0)
            .order_by(cm.ComputeNode.host, cm.ComputeNode.hypervisor_hostname)).all()
        servers = {}
        for row in session.execute(
                sa.select(i.c.uuid, i.c.display_name, i.c.host, i.c.node, i.c.vm_state,
                          i.c.task_state)
                .where(i.c.deleted == 0, i.c.hidden.is_(False), i.c.host.is_not(None))
                .order_by(i.c.display_name, i.c.uuid)):
            servers.setdefault((row.host, row.node), []).append(
                {"id": row.uuid, "name": row.display_name,
                 "status": server_status(row.vm_state, row.task_state)})
        migrations = [dict(row._mapping) for row in session.execute(
            sa.select(m.c.uuid, m.c.instance_uuid, m.c.migration_type, m.c.status,
                      m.c.source_compute, m.c.dest_compute, m.c.cross_cell_move)
            .where(m.c.deleted == 0, m.c.hidden.is_(False),
                   m.c.status.in_(migration_status.IN_PROGRESS))
            .order_by(m.c.id))]
    return [(node, svc) for node, svc in nodes], servers, migrations


class ProviderBook:
    """Each provider's inventories, read again only when its generation moved (every
    inventory change moves it), and its usages, read at every request: Placement
    does not move a generation when allocations are deleted or shrink."""

    def __init__(self):
        self._inventories = {}   # provider uuid -> (generation, {rc: inventory})

    def by_root(self, placement):
        """{root provider uuid: {rc: {"total", "reserved", "allocation_ratio", "capacity",
        "used"}}}: a compute node's tree summed per resource class."""
        providers = placement.list_resource_providers(microversion=PLACEMENT_VERSION)
        read = dict(zip([rp["uuid"] for rp in providers],
                        _pool.map(lambda rp: self._read(placement, rp), providers)))
        # Providers gone from Placement are forgotten (one assignment: readers share it).
        self._inventories = {uuid: inv for uuid, (inv, _used) in read.items() if inv}
        out = {}
        for rp in providers:
            inv, used = read[rp["uuid"]]
            if inv is None:   # deleted since the listing
                continue
            tree = out.setdefault(rp.get("root_provider_uuid") or rp["uuid"], {})
            for rc, doc in inv[1].items():
                reserved, ratio = doc.get("reserved", 0), float(doc.get("allocation_ratio", 1.0))
                into = tree.setdefault(rc, {"total": 0, "reserved": 0, "allocation_ratio": ratio,
                                            "capacity": 0, "used": 0})
                into["total"] += doc["total"]
                into["reserved"] += reserved
                into["capacity"] += int((doc["total"] - reserved) * ratio)
                into["used"] += used.get(rc, 0)
        return out

    def _read(self, placement, rp):
        """((generation, inventories), usages) of one provider; (None, None) once deleted."""
        try:
            inv = self._inventories.get(rp["uuid"])
            if inv is None or inv[0] != rp["generation"]:
                inv = placement.get_inventories(rp["uuid"])
            return inv, placement.get_provider_usages(rp["uuid"])[1]
        except placement_client.NotFound:
            return None, None


# Placement requests of one fleet answer run side by side (an HTTP endpoint's latency
# is paid once per few providers, not once per provider).
_pool = concurrent.futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="fleet")
