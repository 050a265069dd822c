"""The fleet dashboard: its pages (``GET /dashboard[/FILE]``) and its data (``GET /v1/fleet``).

The pages are the static files beside this module (``static/``: plain HTML,
CSS and JavaScript, nothing fetched from elsewhere) and need no token. The
browser page polls, every second, ``/v1/fleet`` and the Watcher resources
this endpoint serves (``/v1/action_plans``, ``/v1/actions``), sending the
token the page was given (docs/dashboard.md says how).

``/v1/fleet`` is what an administrator sees of the fleet at one instant, lean
enough for 10,000 hosts (aggregated here: a host's servers are counted, not listed)::

    {"fleet": {"cells": [{"uuid", "name", "disabled", "error",
        "hosts": [{"host", "hypervisor_hostname", "provider_uuid", "state", "status",
                   "disabled_reason", "use", "servers" (a count),
                   "resources": {RC: {"used", "capacity"}}}],
        "migrations": [{"uuid", "instance_uuid", "migration_type", "status",
                        "source_compute", "dest_compute", "cross_cell_move"}]}],
      "aggregates": [{"name", "hosts": [host]}],
      "plans": [{"uuid", "state", "name", "audit_name", "started_at", "elapsed_s",
                 "remaining_s"}],
      "failed_audits": [{"uuid", "name", "plan_name", "failed_at", "reason"}],
      "usage_read": {"at", "seconds"},
      "totals": {"cells", "hosts", "servers", "migrations"}}}

A host's ``resources`` are only the classes it has (capacity or usage), summed
over its provider tree; ``use`` is the share used of its most-used class.
``GET /v1/fleet/hosts/{provider uuid}`` is one host as above with its ``cell``,
its ``servers`` listed (``{"host": {..., "servers": [{"id", "name", "status"}]}}``)
and each class's ``total``, ``reserved`` and ``allocation_ratio`` besides: the
page asks for it when a host is chosen.

Its cost does not grow with requests per host: each cell answers three
statements in one transaction (compute nodes with their services, servers
counted per node, migrations in progress), the cells in parallel as the
hypervisor listing does; the plans are two statements of the API database.
Placement answers one provider listing and each provider's usages (Placement
has no request for many providers' usages at once, and deleting allocations
does not move a provider's generation), side by side, one reading at a time
(``ProviderBook`` says when an answer waits for one; ``usage_read`` is when
the reading shown ended and how long it took); a provider's
inventories are asked again only when its generation moved.
"""
import concurrent.futures
import datetime
import importlib.resources
import json
import threading
import time
import types

import sqlalchemy as sa

from novella.api import rest
from novella.api.compute import hosts as hosts_mod
from novella.compute.states import migration_status, server_status
from novella.db import api_models as am, cell_models as cm, cells as cells_mod
from novella.db import optimize_models as om
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
    if path.startswith("/v1/fleet/hosts/"):
        return fleet_host(req, path[len("/v1/fleet/hosts/"):])
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
    resources, usage_read = _provider_book(state).by_root(state["placement"])
    if resources is None:
        usage_read = {"at": None, "seconds": None, "source": "hosts"}
    else:
        usage_read["source"] = "placement"
    cells = cells_mod.list_cells(state["api_db"], include_cell0=False)
    answers = cells_mod.scatter(cells, _cell_rows)
    out, totals = [], {"cells": len(cells), "hosts": 0, "servers": 0, "migrations": 0}
    seen_migrations, liveness = set(), _liveness(state["conf"])
    for cell in cells:
        rows = answers[cell.uuid]
        doc = {"uuid": cell.uuid, "name": cell.name, "disabled": bool(cell.disabled),
               "error": None, "hosts": [], "migrations": []}
        out.append(doc)
        if isinstance(rows, Exception):
            doc["error"] = f"The cell's database did not answer: {type(rows).__name__}"
            continue
        nodes, counts, migrations = rows
        for node in nodes:
            host = _host_doc(liveness, node, _resources_of(resources, node))
            host["servers"] = counts.get((node.host, node.hypervisor_hostname), 0)
            doc["hosts"].append(host)
            totals["servers"] += host["servers"]
        totals["hosts"] += len(doc["hosts"])
        for m in migrations:
            # A move across cells has its record in both cells: shown once, where it is visible.
            if m["uuid"] in seen_migrations:
                continue
            seen_migrations.add(m["uuid"])
            doc["migrations"].append(m)
            totals["migrations"] += 1
    return 200, {"fleet": {"cells": out, "aggregates": _aggregates(state["api_db"]),
                           "plans": _plans(state["api_db"]),
                           "failed_audits": _failed_audits(state["api_db"]),
                           "usage_read": usage_read, "totals": totals}}


def fleet_host(req, node_uuid):
    """One compute node with its servers: what the page shows when a host is chosen."""
    _authorize(req)
    state = req.state
    cells = cells_mod.list_cells(state["api_db"], include_cell0=False)
    answers = cells_mod.scatter(cells, lambda cell, db: _node_rows(db, node_uuid))
    for cell in cells:
        found = answers[cell.uuid]
        if isinstance(found, Exception) or found is None:
            continue
        node, servers = found
        resources = _resources_of(_provider_book(state).by_root(state["placement"])[0], node)
        doc = _host_doc(_liveness(state["conf"]), node, resources, lean=False)
        doc.update(cell=cell.name, servers=servers)
        return 200, {"host": doc}
    raise rest.not_found(f"Compute node {node_uuid} could not be found.")


def _provider_book(state):
    book = state.get("fleet_providers")
    return book if book is not None else state.setdefault("fleet_providers", ProviderBook())


def _resources_of(trees, node):
    """A node's resources from Placement's reading (``trees``), or, before its first
    reading ends, from what the host last reported in its compute node row: the
    standard classes only, without the reserved amounts Placement alone knows."""
    if trees is not None:
        return trees.get(node.uuid, {})
    out = {}
    for rc, total, used, ratio in (("VCPU", node.vcpus, node.vcpus_used, node.cpu_allocation_ratio),
                                   ("MEMORY_MB", node.memory_mb, node.memory_mb_used,
                                    node.ram_allocation_ratio),
                                   ("DISK_GB", node.local_gb, node.local_gb_used,
                                    node.disk_allocation_ratio)):
        if total is not None:
            ratio = float(ratio or 1.0)
            out[rc] = {"total": total, "reserved": 0, "allocation_ratio": ratio,
                       "capacity": int(total * ratio), "used": used or 0}
    return out


def _host_doc(liveness, node, resources, lean=True):
    """A host as the heat-map shows it: only the resource classes it has capacity of
    (a bandwidth class with no inventory is not a row), and "use", the share of its
    most-used class, that colours its cell."""
    has, use = {}, 0.0
    for rc, r in resources.items():
        used, capacity = r["used"], r["capacity"]
        if capacity > 0 or used > 0:
            has[rc] = r if not lean else {"used": used, "capacity": capacity}
            use = max(use, used / capacity if capacity else 1.0)
    up = node.created_at is not None and hosts_mod.is_up(liveness, node)   # None: no service
    return {"host": node.host, "hypervisor_hostname": node.hypervisor_hostname,
            "provider_uuid": node.uuid, "state": "up" if up else "down",
            "status": "enabled" if node.disabled is False else "disabled",
            "disabled_reason": node.disabled_reason, "use": round(use, 3), "resources": has}


def _liveness(conf):
    """The one option hosts_mod.is_up reads, read once for 10,000 hosts (each read of
    an option costs as much as the rest of a host's document)."""
    return types.SimpleNamespace(service_down_time=conf.service_down_time)


def _nodes_query():
    """Each compute node with its compute service's liveness and status, as plain rows
    (10,000 of them are read at every answer: no ORM objects)."""
    n, s = cm.ComputeNode.__table__, cm.Service.__table__
    return (sa.select(n.c.uuid, n.c.host, n.c.hypervisor_hostname,
                      n.c.vcpus, n.c.memory_mb, n.c.local_gb,
                      n.c.vcpus_used, n.c.memory_mb_used, n.c.local_gb_used,
                      n.c.cpu_allocation_ratio, n.c.ram_allocation_ratio,
                      n.c.disk_allocation_ratio,
                      s.c.updated_at, s.c.created_at, s.c.last_seen_up, s.c.forced_down,
                      s.c.disabled, s.c.disabled_reason)
            .select_from(n.outerjoin(s, sa.and_(s.c.host == n.c.host,
                                                s.c.binary == hosts_mod.COMPUTE,
                                                s.c.deleted == 0)))
            .where(n.c.deleted == 0))


def _cell_rows(cell, db):
    """(compute nodes with their services, {(host, node): server count}, [migration])."""
    i, m = cm.Instance.__table__, cm.Migration.__table__
    with db.session() as session:
        nodes = session.execute(_nodes_query().order_by(
            cm.ComputeNode.host, cm.ComputeNode.hypervisor_hostname)).all()
        counts = {(row.host, row.node): row.n for row in session.execute(
            sa.select(i.c.host, i.c.node, sa.func.count().label("n"))
            .where(i.c.deleted == 0, i.c.hidden.is_(False), i.c.host.is_not(None))
            .group_by(i.c.host, i.c.node))}
        migrations = [dict(row._mapping) for row in session.execute(
            sa.select(m.c.uuid, m.c.instance_uuid, m.c.migration_type, m.c.status,
                      m.c.source_compute, m.c.dest_compute, m.c.cross_cell_move)
            .where(m.c.deleted == 0, m.c.hidden.is_(False),
                   m.c.status.in_(migration_status.IN_PROGRESS))
            .order_by(m.c.id))]
    return nodes, counts, migrations


def _node_rows(db, node_uuid):
    """(the node with its service, [its servers]) or None when the cell has no such node."""
    i = cm.Instance.__table__
    with db.session() as session:
        node = session.execute(_nodes_query().where(cm.ComputeNode.uuid == node_uuid)).first()
        if node is None:
            return None
        servers = [{"id": row.uuid, "name": row.display_name,
                    "status": server_status(row.vm_state, row.task_state)}
                   for row in session.execute(
                       sa.select(i.c.uuid, i.c.display_name, i.c.vm_state, i.c.task_state)
                       .where(i.c.deleted == 0, i.c.hidden.is_(False), i.c.host == node.host,
                              i.c.node == node.hypervisor_hostname)
                       .order_by(i.c.display_name, i.c.uuid))]
    return node, servers


def _aggregates(api_db):
    """[{"name", "hosts": [host]}]: the page can group the heat-map by aggregate."""
    a, h = am.Aggregate.__table__, am.AggregateHost.__table__
    out = {}
    with api_db.session() as session:
        for name, host in session.execute(
                sa.select(a.c.name, h.c.host).select_from(a.join(h, h.c.aggregate_id == a.c.id))
                .order_by(a.c.name, h.c.host)):
            out.setdefault(name, []).append(host)
    return [{"name": name, "hosts": hosts} for name, hosts in out.items()]


# -- the plans ------------------------------------------------------------------------

OPEN_PLAN_STATES = ("RECOMMENDED", "PENDING", "ONGOING", "SUSPENDED", "CANCELLING")
ENDED_ACTION_STATES = ("SUCCEEDED", "FAILED", "SKIPPED", "CANCELLED")
ENDED_PLANS_SHOWN = 3
FAILED_AUDITS_SHOWN = 5


def plan_name(strategy, params):
    """What a plan moves, from its audit's parameters: "drain cell1 -> cell2"."""
    if strategy == "cell_drain":
        source = (params.get("source_cell") or params.get("source_aggregate")
                  or params.get("source_zone"))
        targets = (params.get("target_cells") or params.get("target_aggregates")
                   or params.get("target_zones"))
        return f"drain {source} -> {', '.join(targets) if targets else 'every other cell'}"
    if "maintenance_node" in params:
        return f"drain {params['maintenance_node']} -> {params.get('backup_node') or 'any host'}"
    return strategy or "plan"


def _utc(stamp):
    return stamp.replace(tzinfo=datetime.timezone.utc) if stamp is not None else None


def _plans(api_db):
    """The open plans and the last few that ended, each with its name, when its first
    action started, the time elapsed since (to its end once ended) and, while it runs,
    the time remaining at the pace of the actions ended so far."""
    p, a, au = om.ActionPlan.__table__, om.Action.__table__, om.Audit.__table__
    now = datetime.datetime.now(datetime.timezone.utc)
    with api_db.session() as session:
        rows = session.execute(
            sa.select(p.c.uuid, p.c.state, p.c.strategy, p.c.updated_at, p.c.created_at,
                      au.c.parameters, au.c.name.label("audit_name"))
            .select_from(p.outerjoin(au, au.c.uuid == p.c.audit_uuid))
            .order_by(p.c.id)).all()
        shown = [r for r in rows if r.state in OPEN_PLAN_STATES] + \
            [r for r in rows if r.state not in OPEN_PLAN_STATES][-ENDED_PLANS_SHOWN:]
        stats = {row.action_plan_uuid: row for row in session.execute(
            sa.select(a.c.action_plan_uuid, sa.func.count().label("total"),
                      sa.func.sum(sa.case((a.c.state.in_(ENDED_ACTION_STATES), 1),
                                          else_=0)).label("ended"),
                      sa.func.min(sa.case((a.c.state != "PENDING", a.c.updated_at),
                                          else_=None)).label("started"))
            .where(a.c.action_plan_uuid.in_([r.uuid for r in shown]))
            .group_by(a.c.action_plan_uuid))}
    out = []
    for r in shown:
        st = stats.get(r.uuid)
        started = _utc(st.started) if st is not None else None
        doc = {"uuid": r.uuid, "state": r.state, "audit_name": r.audit_name,
               "name": plan_name(r.strategy, json.loads(r.parameters or "{}")),
               "started_at": started.isoformat() if started else None,
               "elapsed_s": None, "remaining_s": None}
        if started is not None:
            end = now if r.state in OPEN_PLAN_STATES else _utc(r.updated_at or r.created_at)
            elapsed = max(0.0, (end - started).total_seconds())
            doc["elapsed_s"] = round(elapsed, 1)
            ended, total = int(st.ended or 0), int(st.total)
            if r.state in OPEN_PLAN_STATES and ended:
                doc["remaining_s"] = round(elapsed / ended * (total - ended), 1)
        out.append(doc)
    return out


def _failed_audits(api_db):
    """The last audits that failed, with why (the servers that fit nowhere, a bad scope)."""
    au = om.Audit.__table__
    with api_db.session() as session:
        rows = session.execute(
            sa.select(au.c.uuid, au.c.name, au.c.strategy, au.c.parameters,
                      au.c.status_message, au.c.updated_at, au.c.created_at)
            .where(au.c.state == "FAILED").order_by(au.c.id.desc())
            .limit(FAILED_AUDITS_SHOWN)).all()
    return [{"uuid": r.uuid, "name": r.name,
             "plan_name": plan_name(r.strategy, json.loads(r.parameters or "{}")),
             "failed_at": _utc(r.updated_at or r.created_at).isoformat(),
             "reason": r.status_message} for r in rows]


# -- Placement -------------------------------------------------------------------------

class ProviderBook:
    """Each provider's inventories, read again only when its generation moved (every
    inventory change moves it), and its usages, read at every reading: Placement
    does not move a generation when allocations are deleted or shrink.

    Placement has no request for many providers' usages at once, so reading 10,000
    providers takes many seconds. When readings are quick (a small fleet) an answer
    waits for the one under way, or starts one: what it shows is as fresh as the
    request. When they are not, it takes the last complete reading, and a new
    reading starts only once the last is as old as it took (Placement is read at
    most half the time, however many pages ask), one at a time."""

    def __init__(self):
        self._inventories = {}   # provider uuid -> (generation, {rc: inventory})
        self._lock = threading.Lock()
        self._reading = None     # the reading under way (a future)
        self._last = None        # the last complete reading: (ended at, seconds, trees)

    def by_root(self, placement):
        """({root provider uuid: {rc: {"total", "reserved", "allocation_ratio",
        "capacity", "used"}}}: a compute node's tree summed per resource class,
        {"at": when the reading ended, "seconds": how long it took}); (None, None)
        while the first reading is under way and has taken FIRST_READING_WAIT_S already."""
        with self._lock:
            last = self._last
            quick = last is None or last[1] < QUICK_READING_S
            due = quick or time.time() - last[0] >= last[1]
            if self._reading is None and due:
                self._reading = _reader.submit(self._read_all, placement)
            reading = self._reading
        if not quick:
            return last[2], self._when(last)
        try:
            # The first reading of a large fleet takes long: meanwhile, no answer waits.
            ended = reading.result(timeout=FIRST_READING_WAIT_S if last is None else None)
        except concurrent.futures.TimeoutError:
            return None, None
        return ended[2], self._when(ended)

    @staticmethod
    def _when(reading):
        at = datetime.datetime.fromtimestamp(reading[0], datetime.timezone.utc)
        return {"at": at.isoformat(), "seconds": round(reading[1], 3)}

    def _read_all(self, placement):
        started = time.monotonic()
        try:
            trees = self._read_trees(placement)
            ended = (time.time(), time.monotonic() - started, trees)
            with self._lock:
                self._last = ended
            return ended
        finally:
            with self._lock:
                self._reading = None

    def _read_trees(self, placement):
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
# One reading of Placement at a time, whatever the number of pages asking.
_reader = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="fleet-read")
# A reading quicker than this is waited for; a slower one is answered from the last.
QUICK_READING_S = 0.5
# How long the first answer waits for the first reading before the hosts' reports answer.
FIRST_READING_WAIT_S = 0.2
