"""A plan that proves it fits, before anything moves.

For every server on the hosts a strategy empties, the planner asks Placement
for allocation candidates exactly as the scheduler would for that server's
move (its request spec: flavor — the mapped one for a resize —, port
resource requests, zone, server group, tenant aggregates), runs the
scheduler's filters and weighers over them, and picks a destination among
the allowed hosts. Every server of the plan is counted together: what the
plan already put on a provider is taken off the candidates' free capacity
(Placement's provider summaries) for the next server, so no two servers are
planned into the same last slot; a server group's planned members count as
on their planned hosts (anti-affinity holds across cells); growing flavors
are summed per project against its quota.

The move type follows: a live migration when the server runs and stays in its
cell, a cold migration otherwise, a resize when its flavor is mapped. Moving
to another cell needs the caller's ``compute:servers:resize:cross_cell``
policy, as any cross-cell move does: a server that could only go to another
cell without it is unfit for that reason, named with the rule to grant.

The planner is the scheduler run dry: it uses the scheduler's request
building, filters and weighers (``novella.scheduler.manager``) without
claiming, so that the plan answers what the moves will ask.
"""
import collections
import copy
import json
import types

import sqlalchemy as sa

from novella.db import aggregates as aggregates_mod
from novella.db import cell_models as cm
from novella.db import cells as cells_mod
from novella.db import request_specs
from novella.optimize import strategies
from novella.placement import client as placement_client
from novella.scheduler.errors import NoValidHost

CROSS_CELL_RULE = "compute:servers:resize:cross_cell"
MOVABLE = {"active", "stopped"}
# Why a server whose allowed hosts are all in other cells cannot move, without the policy.
CROSS_CELL_REFUSED = (
    f"every host allowed to receive it is in another cell, and the Compute API's policy "
    f"rule {CROSS_CELL_RULE} does not let the audit's creator move servers between cells "
    f"(its default allows no one): grant it in the Compute API's policy file, e.g. "
    f"\"{CROSS_CELL_RULE}\": \"rule:admin_api\" (docs/drain.md)")


class Fleet:
    """Cells, compute hosts, aggregates and flavors, read once per plan."""

    def __init__(self, api_db):
        self.api_db = api_db
        self.cells = cells_mod.list_cells(api_db, include_cell0=False)
        self.host_cells = {}     # host -> CellMapping
        self.services = {}       # host -> {"disabled", "disabled_reason"}

        def read(cell, db):
            with db.read_session() as s:
                return [(r.host, r.disabled, r.disabled_reason) for r in s.execute(
                    sa.select(cm.Service.host, cm.Service.disabled, cm.Service.disabled_reason)
                    .where(cm.Service.binary == "nova-compute", cm.Service.deleted == 0))]
        by_uuid = {c.uuid: c for c in self.cells}
        for cell_uuid, rows in cells_mod.scatter(self.cells, read).items():
            if isinstance(rows, Exception):
                continue
            for host, disabled, reason in rows:
                self.host_cells[host] = by_uuid[cell_uuid]
                self.services[host] = {"disabled": bool(disabled), "disabled_reason": reason}
        self.aggregates = aggregates_mod.all_aggregates(api_db)

    # -- names to hosts -----------------------------------------------------------
    def cell(self, name):
        for c in self.cells:
            if name in (c.name, c.uuid):
                return c
        raise strategies.ScopeError(f"Cell {name} could not be found.")

    def cell_hosts(self, cell):
        return sorted(h for h, c in self.host_cells.items() if c.uuid == cell.uuid)

    def aggregate_hosts(self, name):
        for agg in self.aggregates:
            if name in (agg["name"], agg["uuid"]):
                return sorted(agg["hosts"] & set(self.host_cells))
        raise strategies.ScopeError(f"Aggregate {name} could not be found.")

    def zone_hosts(self, zone):
        hosts = set()
        for agg in self.aggregates:
            if agg["metadata"].get("availability_zone") == zone:
                hosts |= agg["hosts"]
        if not hosts:
            raise strategies.ScopeError(f"Availability zone {zone} has no compute host.")
        return sorted(hosts & set(self.host_cells))

    def require_hosts(self, hosts):
        missing = [h for h in hosts if h not in self.host_cells]
        if missing:
            raise strategies.ScopeError(f"Compute host {missing[0]} could not be found.")

    def flavor(self, name_or_id):
        """A flavor by name or flavor id, as it travels with requests; None if unknown."""
        from novella.db import flavors
        row = flavors.by_name_or_id(self.api_db, name_or_id)
        return None if row is None else flavors.as_dict(row)


Server = collections.namedtuple(
    "Server", "uuid name host node cell vm_state task_state project_id user_id flavor created_at")


def servers_on(fleet, hosts):
    """The servers on ``hosts`` (every cell holding one of them), by host."""
    hosts = set(hosts)
    cells = {fleet.host_cells[h].uuid: fleet.host_cells[h] for h in hosts}

    def read(cell, db):
        with db.read_session() as s:
            rows = s.execute(
                sa.select(cm.Instance.uuid, cm.Instance.display_name, cm.Instance.host,
                          cm.Instance.node, cm.Instance.vm_state, cm.Instance.task_state,
                          cm.Instance.project_id, cm.Instance.user_id, cm.Instance.created_at,
                          cm.InstanceExtra.flavor)
                .join(cm.InstanceExtra, cm.InstanceExtra.instance_uuid == cm.Instance.uuid,
                      isouter=True)
                .where(cm.Instance.host.in_(hosts), cm.Instance.deleted == 0)
                .order_by(cm.Instance.host, cm.Instance.id)).all()
        return [Server(r.uuid, r.display_name, r.host, r.node, cell, r.vm_state, r.task_state,
                       r.project_id, r.user_id, json.loads(r.flavor or "{}").get("cur"),
                       r.created_at) for r in rows]
    out = []
    for result in cells_mod.scatter(list(cells.values()), read).values():
        if isinstance(result, Exception):
            raise result
        out.extend(result)
    return out


def order(servers, params):
    """Which servers move first (zone_migration's ``priority``), else by host."""
    prio = params.get("priority") or {}
    projects = prio.get("project") or []
    nodes = prio.get("compute_node") or []

    def rank(listed, value):
        return listed.index(value) if value in listed else len(listed)
    keys = {"vcpu_num": lambda s: -(s.flavor or {}).get("vcpus", 0),
            "mem_size": lambda s: -(s.flavor or {}).get("memory_mb", 0),
            "disk_size": lambda s: -(s.flavor or {}).get("root_gb", 0),
            "created_at": lambda s: s.created_at}
    compute = [keys[k] for k in prio.get("compute") or []]
    return sorted(servers, key=lambda s: (rank(projects, s.project_id), rank(nodes, s.host),
                                          *[k(s) for k in compute]))


class Unfit(Exception):
    """One server the plan cannot place (the message says why)."""


class Planner:
    """``plan(ctxt, strategy, params)`` -> ``Plan``; nothing is claimed or moved."""

    def __init__(self, conf, api_db, placement, scheduler=None, compute_enforcer=None):
        from novella.policies import compute as compute_policies, make_enforcer
        from novella.scheduler.manager import SchedulerManager
        self.conf, self.api_db, self.placement = conf, api_db, placement
        self.scheduler = scheduler or SchedulerManager(conf, api_db, placement)
        self.enforcer = compute_enforcer or make_enforcer(conf, compute_policies.list_rules())

    def plan(self, ctxt, strategy, params):
        fleet = Fleet(self.api_db)
        sources, targets, own_target = strategies.scope(strategy, params, fleet)
        servers = order(servers_on(fleet, sources), params)
        flavor_map = self._flavor_map(fleet, params.get("flavor_map") or {})
        run = _Run(self, ctxt, fleet, sources, targets, own_target, flavor_map)
        moves, unfit = [], []
        for server in servers:
            try:
                moves.append(run.place(server))
            except Unfit as exc:
                unfit.append((server, str(exc)))
        return Plan(strategy, params, sources, moves, unfit)

    @staticmethod
    def _flavor_map(fleet, mapping):
        out = {}
        for old, new in mapping.items():
            flavor = fleet.flavor(new)
            if flavor is None:
                raise strategies.ScopeError(f"Flavor {new} could not be found.")
            out[old] = flavor
        return out

    def cross_cell_allowed(self, ctxt, server):
        target = {"project_id": server.project_id, "user_id": server.user_id}
        return self.enforcer.authorize(CROSS_CELL_RULE, target, ctxt, do_raise=False)


Move = collections.namedtuple("Move", "server kind dest_host dest_node dest_cell flavor alternates")
ALTERNATES = 2   # other fitting hosts a failed move is retried on, in weighed order


class Plan:
    def __init__(self, strategy, params, sources, moves, unfit):
        self.strategy, self.params, self.sources = strategy, params, sources
        self.moves, self.unfit = moves, unfit

    def failure_message(self):
        """Which servers do not fit and why; None when the plan fits."""
        if not self.unfit:
            return None
        total = len(self.unfit) + len(self.moves)
        lines = [f"{s.uuid} ({s.name}) on {s.host}: {why}" for s, why in self.unfit]
        return (f"{len(self.unfit)} of {total} servers cannot be moved; nothing was moved. "
                + "; ".join(lines))

    def efficacy_indicators(self):
        counts = collections.Counter(m.kind for m in self.moves)
        values = {"instance_migrations_count": len(self.moves),
                  "live_migrations_count": counts["live"], "resizes_count": counts["resize"]}
        return [{"name": spec["name"], "description": spec["description"],
                 "unit": spec["unit"], "value": values[spec["name"]]}
                for spec in strategies.EFFICACY_SPEC]


class _Run:
    """One planning pass: what is planned so far, per provider, group and project."""

    def __init__(self, planner, ctxt, fleet, sources, targets, own_target, flavor_map):
        self.planner, self.ctxt, self.fleet = planner, ctxt, fleet
        self.sources, self.targets, self.own_target = set(sources), targets, own_target
        self.flavor_map = flavor_map
        self.planned = collections.defaultdict(collections.Counter)   # rp -> rc -> amount
        self.planned_on_host = collections.defaultdict(list)          # root rp -> [resources]
        self.group_hosts = collections.defaultdict(list)              # group uuid -> hosts
        self.quota_growth = collections.defaultdict(collections.Counter)  # project -> delta
        self.candidates = {}
        self.cross_cell = {}

    def place(self, server):
        if server.vm_state not in MOVABLE or server.task_state:
            state = server.vm_state + (f"/{server.task_state}" if server.task_state else "")
            raise Unfit(f"the server is {state}: only active or stopped servers with no "
                        "task in progress can be moved")
        if not server.flavor:
            raise Unfit("the server has no flavor recorded")
        new_flavor = (self.flavor_map.get(server.flavor["name"])
                      or self.flavor_map.get(server.flavor["flavorid"]))
        if new_flavor and new_flavor["flavorid"] == server.flavor["flavorid"]:
            new_flavor = None
        flavor = new_flavor or server.flavor
        cross_ok = self._cross_cell_ok(server)
        if not cross_ok and self._other_cells_only(server):
            raise Unfit(CROSS_CELL_REFUSED)
        spec = self._spec(server, flavor, cross_ok)
        if new_flavor:
            self._check_quota(server, new_flavor)
        host_state, request, others = self._choose(server, spec)
        dest_cell = self.fleet.host_cells.get(host_state.host)
        same_cell = dest_cell is not None and dest_cell.uuid == server.cell.uuid
        if new_flavor:
            kind = "resize"
        elif same_cell and server.vm_state == "active":
            kind = "live"
        else:
            kind = "cold"
        self._count(server, spec, host_state, request, new_flavor)
        # Alternates of a move that stays in its cell stay in it (a live migration cannot leave).
        alternates = [h.host for h in others if kind != "live"
                      or self.fleet.host_cells.get(h.host) is dest_cell][:ALTERNATES]
        return Move(server, kind, host_state.host, host_state.nodename,
                    dest_cell.name if dest_cell else None, new_flavor, alternates)

    def _cross_cell_ok(self, server):
        key = (server.project_id, server.user_id)
        if key not in self.cross_cell:
            self.cross_cell[key] = self.planner.cross_cell_allowed(self.ctxt, server)
        return self.cross_cell[key]

    def _allowed_hosts(self, server):
        """The hosts ``server`` may go to; None: any host."""
        own = self.own_target.get(server.host)
        return {own} if own else self.targets

    def _other_cells_only(self, server):
        """Whether every host ``server`` may go to is in a cell other than its own."""
        hosts = self._allowed_hosts(server)
        cells = {getattr(self.fleet.host_cells.get(h), "uuid", None) for h in hosts or ()}
        return bool(cells) and server.cell.uuid not in cells

    def _in_own_cell_only(self, server):
        """Whether every host ``server`` may go to is in its own cell."""
        hosts = self._allowed_hosts(server)
        return hosts is not None and all(
            getattr(self.fleet.host_cells.get(h), "uuid", None) == server.cell.uuid
            for h in hosts)

    def _spec(self, server, flavor, cross_ok):
        try:
            spec = copy.deepcopy(request_specs.get(self.planner.api_db, server.uuid))
        except sa.exc.NoResultFound:  # a server without a request spec (made before them)
            spec = {"project_id": server.project_id, "user_id": server.user_id,
                    "image": {"properties": {}}, "num_instances": 1}
        spec.update(instance_uuid=server.uuid, flavor=flavor, num_instances=1, retry=None,
                    force_hosts=[], force_nodes=[],
                    ignore_hosts=sorted(self.sources))
        dest = {"allow_cross_cell_move": bool(cross_ok), "source_cell_uuid": server.cell.uuid}
        own = self.own_target.get(server.host)
        if own:
            dest.update(host=own, cell_uuid=self.fleet.host_cells[own].uuid)
        elif not cross_ok:
            dest["cell_uuid"] = server.cell.uuid
        spec["requested_destination"] = dest
        return spec

    def _check_quota(self, server, new_flavor):
        from novella.api.compute import quotas
        api = types.SimpleNamespace(conf=self.planner.conf, api_db=self.planner.api_db,
                                    placement=self.planner.placement)
        if not quotas.enforced(api):
            return
        delta = collections.Counter(
            cores=new_flavor["vcpus"] - server.flavor["vcpus"],
            ram=new_flavor["memory_mb"] - server.flavor["memory_mb"])
        grown = self.quota_growth[server.project_id]
        limits = quotas.project_limits(api, server.project_id)
        used = quotas.usage(api, server.project_id)
        for res in ("cores", "ram"):
            if delta[res] > 0 and limits[res] >= 0 and \
                    used[res] + grown[res] + delta[res] > limits[res]:
                raise Unfit(f"the resize to {new_flavor['name']} takes project "
                            f"{server.project_id} past its {res} quota ({limits[res]})")

    def _candidates(self, rr):
        groups = rr.query_groups()
        key = json.dumps([placement_client.RequestGroup.from_dict(g).query() for g in groups]
                         + [rr.group_policy, rr.same_subtree, rr.limit], default=str)
        if key not in self.candidates:
            self.candidates[key] = self.planner.placement.get_allocation_candidates(
                groups, limit=rr.limit, group_policy=rr.group_policy,
                same_subtree=rr.same_subtree)
        return self.candidates[key]

    def _fits(self, request, summaries):
        for rp, alloc in request["allocations"].items():
            res = summaries.get(rp, {}).get("resources", {})
            for rc, amount in alloc["resources"].items():
                if rc not in res:
                    continue
                free = res[rc]["capacity"] - res[rc]["used"] - self.planned[rp][rc]
                if free < amount:
                    return False
        return True

    def _choose(self, server, spec):
        sched = self.planner.scheduler
        sched._refresh_instance_group(spec)
        group = spec.get("instance_group")
        if group and group.get("uuid"):
            group["hosts"] = list(group.get("hosts") or []) + self.group_hosts[group["uuid"]]
        try:
            rr = sched.resource_request(spec)
            candidates = self._candidates(rr)
        except NoValidHost as exc:
            raise Unfit(str(exc))
        except placement_client.PlacementError as exc:
            raise Unfit(f"Placement rejected the request: {exc.detail}")
        if not len(candidates):
            raise Unfit("Placement has no allocation candidate for its flavor and ports")
        try:
            hosts = sched._candidate_hosts(candidates, spec)
        except NoValidHost as exc:
            raise Unfit(str(exc))
        summaries = candidates.provider_summaries
        allowed = []
        full = []
        for h in hosts:
            if self.targets is not None and h.host not in self.targets:
                continue
            fitting = [r for r in h.allocation_requests if self._fits(r.decoded(), summaries)]
            if not fitting:
                full.append(h.host)
                continue
            h.allocation_requests = fitting
            for resources in self.planned_on_host[h.uuid]:
                h.consume(resources)
            allowed.append(h)
        if not allowed:
            if full:
                raise Unfit("no room left: the allowed hosts with candidates "
                            f"({', '.join(sorted(full))}) are taken by servers planned before it")
            why = "Placement has no allocation candidate on the hosts allowed to receive it"
            if not spec["requested_destination"]["allow_cross_cell_move"] and \
                    not self._in_own_cell_only(server):
                why += (f" in its own cell (the policy rule {CROSS_CELL_RULE} does not let "
                        "it leave: docs/drain.md)")
            raise Unfit(why)
        try:
            weighed = sched._filter_and_weigh(allowed, spec, len(candidates))
        except NoValidHost as exc:
            raise Unfit(str(exc))
        chosen = weighed[0]
        return chosen, chosen.allocation_requests[0].decoded(), weighed[1:]

    def _count(self, server, spec, host_state, request, new_flavor):
        total = collections.Counter()
        for rp, alloc in request["allocations"].items():
            for rc, amount in alloc["resources"].items():
                self.planned[rp][rc] += amount
                total[rc] += amount
        self.planned_on_host[host_state.uuid].append(dict(total))
        group = spec.get("instance_group")
        if group and group.get("uuid"):
            self.group_hosts[group["uuid"]].append(host_state.host)
        if new_flavor:
            grown = self.quota_growth[server.project_id]
            grown["cores"] += max(0, new_flavor["vcpus"] - server.flavor["vcpus"])
            grown["ram"] += max(0, new_flavor["memory_mb"] - server.flavor["memory_mb"])
