"""What the scheduler knows about each compute node.

A HostState joins, for one compute node, its row and its service row from
whichever cell holds it, the host aggregates it belongs to (API database),
its recent build failures and, from the placement answer, its provider
summary (capacity and usage per resource class, traits) and the allocation
requests that would fit on it. The rows of each cell are cached until they
change (``_CellHosts``); each request gets its own copies.
"""
import datetime
import json
import threading
import time
import weakref

import sqlalchemy as sa

from novella.db import aggregates
from novella.db import cache
from novella.db import cell_models as cm
from novella.db import cells as cells_mod
from novella.db import records
from novella.placement import client as placement_client


def _utcnow():
    return datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)


class HostState:
    """One compute node as one scheduling request sees it.

    Built from the cell's cached rows (``_CellHosts``) by ``for_request``,
    where placement's provider summary overrides the resource figures.
    """

    def __init__(self, node, service, cell_uuid):
        self.host = node.host
        self.nodename = node.hypervisor_hostname
        self.uuid = node.uuid
        self.cell_uuid = cell_uuid
        self.hypervisor_type = node.hypervisor_type
        self.hypervisor_version = node.hypervisor_version
        self.cpu_info = _json(node.cpu_info) or {}
        self.vcpus_total = node.vcpus
        self.vcpus_used = node.vcpus_used
        self.total_usable_ram_mb = node.memory_mb
        self.free_ram_mb = node.memory_mb - node.memory_mb_used
        self.total_usable_disk_gb = node.local_gb
        self.free_disk_mb = (node.local_gb - node.local_gb_used) * 1024
        self.cpu_allocation_ratio = node.cpu_allocation_ratio
        self.ram_allocation_ratio = node.ram_allocation_ratio
        self.disk_allocation_ratio = node.disk_allocation_ratio
        self.num_instances = node.running_vms
        self.service = service  # {"disabled", "disabled_reason", "forced_down", "up"}
        self.aggregates = []    # [{"uuid", "name", "metadata": {}}]
        self.failed_builds = 0
        self.provider_traits = None  # the provider summary's traits, encoded (JSON)
        self.allocation_requests = []  # placement_client.CandidateRequest, in its order
        self.limits = {}

    def for_request(self, service, aggregates, cell_uuid, failed_builds):
        """A copy this request may change (consume, allocation requests) freely."""
        hs = _new_host_state(HostState)  # a shallow copy, without copy.copy's protocol
        state = self.__dict__.copy()
        state["service"] = service
        state["aggregates"] = aggregates
        state["cell_uuid"] = cell_uuid
        state["failed_builds"] = failed_builds
        state["allocation_requests"] = []
        hs.__dict__ = state
        return hs

    @property
    def traits(self):
        """The provider's traits as a set, decoded when asked for (no filter of
        the default set reads them)."""
        if self.provider_traits is None:
            return set()
        return set(placement_client.traits_of(self.provider_traits))

    @property
    def free_vcpus(self):
        return self.vcpus_total * self.cpu_allocation_ratio - self.vcpus_used

    def metadata_values(self, key):
        """Every value ``key`` takes in the metadata of this host's aggregates."""
        return {a["metadata"][key] for a in self.aggregates if key in a["metadata"]}

    def consume(self, resources):
        """Account for a server just placed here, for the next instance of the request."""
        self.vcpus_used += resources.get("VCPU", 0)
        self.free_ram_mb -= resources.get("MEMORY_MB", 0)
        self.free_disk_mb -= resources.get("DISK_GB", 0) * 1024
        self.num_instances += 1

    def __repr__(self):
        return f"HostState({self.host}, {self.nodename}, cell={self.cell_uuid})"


_new_host_state = object.__new__


def _apply_summary(state, summary):
    """Placement's provider summary (a ``placement_client.ProviderSummary``)
    written into a HostState's attributes (``state``: its ``__dict__``).
    Placement's figures win over the compute node row: they are the ledger."""
    res = summary.resources
    r = res.VCPU
    if r is not None:
        state["vcpus_total"] = r.capacity
        state["vcpus_used"] = r.used
        state["cpu_allocation_ratio"] = 1.0  # capacity already includes the ratio
    r = res.MEMORY_MB
    if r is not None:
        state["total_usable_ram_mb"] = r.capacity
        state["free_ram_mb"] = r.capacity - r.used
    r = res.DISK_GB
    if r is not None:
        state["total_usable_disk_gb"] = r.capacity
        state["free_disk_mb"] = (r.capacity - r.used) * 1024
    state["provider_traits"] = summary.traits


def _json(text):
    try:
        return json.loads(text) if text else None
    except ValueError:
        return None


def _load_nodes(conn):
    """{node uuid: HostState template} of one cell (plain rows, not ORM objects)."""
    return {n.uuid: HostState(n, None, None) for n in conn.execute(
        sa.select(*cm.ComputeNode.__table__.columns).where(cm.ComputeNode.deleted == 0))}


def _load_services(conn):
    """{host: compute service row} of one cell."""
    sv = cm.Service  # the columns a host's service state is made of
    return {row.host: row for row in conn.execute(
        sa.select(sv.host, sv.disabled, sv.disabled_reason, sv.forced_down, sv.last_seen_up,
                  sv.updated_at, sv.created_at).where(
            sv.deleted == 0, sv.binary.like("%compute")))}


def _failed_builds(conn):
    """Build failures per host since its last successful build (the compute's
    ``records.BUILD_EVENT`` events, which the BuildFailureWeigher counts)."""
    ev = cm.InstanceActionEvent
    last_ok = dict(conn.execute(
        sa.select(ev.host, sa.func.max(ev.id))
        .where(ev.event == records.BUILD_EVENT, ev.result == "Success").group_by(ev.host)).all())
    failed = {}
    for host, event_id in conn.execute(sa.select(ev.host, ev.id).where(
            ev.event == records.BUILD_EVENT, ev.result == "Error")):
        if event_id > last_ok.get(host, 0):
            failed[host] = failed.get(host, 0) + 1
    return failed


# A node without a service record cannot build.
_NO_SERVICE_STATE = {"disabled": True, "disabled_reason": "no service record",
                     "forced_down": False, "up": False}
_NO_SERVICE = (datetime.datetime.min, _NO_SERVICE_STATE, _NO_SERVICE_STATE)
_NO_AGGREGATES = ()

_ev = cm.InstanceActionEvent
_TOKEN = sa.select(*(q.scalar_subquery() for q in (
    # nodes: one comes (the largest id), goes (the latest deleted_at) or is
    # purged (the count of rows: read from an index, not the wide rows)
    sa.select(sa.func.count()).select_from(cm.ComputeNode),
    sa.select(sa.func.max(cm.ComputeNode.id)),
    sa.select(sa.func.max(cm.ComputeNode.deleted_at)),
    # services: a heartbeat, a disable, a force-down (each sets updated_at;
    # a new row changes the count)
    sa.select(sa.func.count()).select_from(cm.Service),
    sa.select(sa.func.max(cm.Service.updated_at)),
    # build failures: a new one
    sa.select(sa.func.max(_ev.id)).where(_ev.event == records.BUILD_EVENT, _ev.result == "Error"),
)))


class _CellHosts:
    """What one cell's host states are made of, each part read again only when it changed.

    One token query per request tells which part changed. Compute nodes are
    rebuilt into templates when a node comes or goes, and otherwise once per
    ``nodes_max_age`` seconds: claims rewrite their usage columns on every
    build (usage comes from placement), and the fields the filters read
    (hypervisor, CPU info) change only when the compute's periodic resource
    update writes them, that often. The service rows are read again whenever
    one changes (every heartbeat: a cheap read); build failures on a new
    failure and with the services, so a host's successful build clears its
    count by its next heartbeat at the latest.
    """

    def __init__(self):
        # engine -> (token, nodes, services, failed, when the nodes were read)
        self._parts = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def get(self, db, nodes_max_age):
        now = time.monotonic()
        with db.reader() as conn:  # the parts are read apart anyway
            token = tuple(conn.execute(_TOKEN).one())
            old = self._parts.get(db.engine)
            fresh_nodes = old is not None and now - old[4] < nodes_max_age
            if fresh_nodes and old[0] == token:
                return old[1:4]
            same = (lambda a, b: old is not None and old[0][a:b] == token[a:b])
            nodes, read_at = ((old[1], old[4]) if fresh_nodes and same(0, 3)
                              else (_load_nodes(conn), now))
            services = old[2] if same(3, 5) else _load_services(conn)
            failed = old[3] if same(3, 6) else _failed_builds(conn)
        with self._lock:
            self._parts[db.engine] = (token, nodes, services, failed, read_at)
        return nodes, services, failed


_cell_hosts = _CellHosts()


class HostManager:
    def __init__(self, conf, api_db):
        self.conf = conf
        self.api_db = api_db
        # cell uuid -> (the services part and down time they were made from,
        #               {host: service states})
        self._service_states = {}
        self._nodes_index = {}    # {node uuid: (cell uuid, template)} (_node_index)
        self._indexed_nodes = {}  # {cell uuid: the nodes part the index holds}
        self._lock = threading.Lock()
        self._by_host = None  # (the aggregates it was made from, {host: [aggregate]})

    def cells(self, cell_uuid=None, cached=None):
        """Enabled cells that hold compute hosts (never cell0); ``cached`` as for
        ``cells_mod.list_cells``."""
        return [c for c in cells_mod.list_cells(self.api_db, include_cell0=False,
                                                include_disabled=False, cached=cached)
                if cell_uuid is None or c.uuid == cell_uuid]

    def _cells_and_aggregates(self, cell_uuid=None):
        """(``_cells_parts``, ``_aggregates_by_host``), whose change tokens on the API
        database are read in one statement."""
        cells, current = cache.get_together(self.api_db, cells_mod.CACHE, aggregates.CACHE)
        return self._cells_parts(cell_uuid, cells), self._aggregates_by_host(current)

    def get_host_states(self, provider_uuids=None, hosts=None, cell_uuid=None):
        """HostStates of the compute nodes whose uuid (or host) is given, from every cell."""
        if provider_uuids is not None:
            make = self.host_state_maker(cell_uuid)
            states = (make(uuid) for uuid in dict.fromkeys(provider_uuids))
            wanted_hosts = None if hosts is None else set(hosts)
            return [h for h in states
                    if h is not None and (wanted_hosts is None or h.host in wanted_hosts)]
        cells, by_host = self._cells_and_aggregates(cell_uuid)
        wanted_hosts = None if hosts is None else set(hosts)
        aggs_of = by_host.get
        now = _utcnow()
        states = []
        for cell_uuid_, nodes, service_states, failed in cells:
            for template in nodes.values():
                host = template.host
                if wanted_hosts is not None and host not in wanted_hosts:
                    continue
                until, up, down = service_states.get(host, _NO_SERVICE)
                states.append(template.for_request(up if now <= until else down,
                                                   aggs_of(host, _NO_AGGREGATES), cell_uuid_,
                                                   failed.get(host, 0)))
        return states

    def host_state_maker(self, cell_uuid=None):
        """A function of a compute node uuid (and placement's summary of its
        provider, applied when given, and the first allocation request for it)
        giving its HostState for this request, or None when no answering cell
        (of ``cell_uuid`` only, if given) has that node.

        The cells' parts are checked once, here; each call is then a lookup in
        an index of every cell's nodes (``_node_index``) and a copy of the
        node's template: the work per request is per candidate, whatever the
        size of the fleet.
        """
        cells, by_host = self._cells_and_aggregates(cell_uuid)
        where = self._node_index(cells).get
        parts = {cell[0]: cell[2:] for cell in cells}
        aggs_of = by_host.get
        now = _utcnow()
        new, apply_summary = _new_host_state, _apply_summary

        def make(uuid, summary=None, request=None):
            # HostState.for_request written out: this runs once per candidate
            # (up to [scheduler] max_placement_results).
            hit = where(uuid)
            if hit is None:
                return None
            cell_uuid_, template = hit
            part = parts.get(cell_uuid_)
            if part is None:
                return None  # a cell not asked for, or not answering
            service_states, failed = part
            state = template.__dict__.copy()
            host = state["host"]
            until, up, down = service_states.get(host, _NO_SERVICE)
            state["service"] = up if now <= until else down
            state["aggregates"] = aggs_of(host, _NO_AGGREGATES)
            state["cell_uuid"] = cell_uuid_
            state["failed_builds"] = failed.get(host, 0)
            state["allocation_requests"] = [] if request is None else [request]
            if summary is not None:
                apply_summary(state, summary)
            hs = new(HostState)
            hs.__dict__ = state
            return hs
        return make

    def _cells_parts(self, cell_uuid=None, cached=None):
        """[(cell uuid, nodes, {host: service states}, failed builds)] of the
        enabled cells (``cell_uuid`` only, if given) that answered; ``cached`` as
        for ``cells``."""
        # One after the other: each is one token query when nothing changed,
        # cheaper than handing it to a thread.
        max_age = self.conf.update_resources_interval or 60  # 0: the default period
        cells = []
        for c in self.cells(cell_uuid, cached):
            result = self._try(_cell_hosts.get, cells_mod.cell_database(c), max_age)
            if isinstance(result, Exception):
                continue  # a cell that does not answer has no host to offer
            nodes, services, failed = result
            cells.append((c.uuid, nodes, self._service_states_of(c.uuid, services), failed))
        return cells

    def _aggregates_by_host(self, current):
        """{host: [aggregate]} of ``current`` (``aggregates.all_aggregates``), made
        again only when the aggregates changed."""
        made = self._by_host
        if made is None or made[0] is not current:
            by_host = {}
            for agg in current:
                for host in agg["hosts"]:
                    by_host.setdefault(host, []).append(agg)
            made = self._by_host = (current, by_host)
        return made[1]

    def _node_index(self, cells):
        """{node uuid: (cell uuid, template)}, brought up to date with the
        nodes part of each of ``cells`` (a cell whose nodes were read again
        has its entries replaced; the others cost nothing)."""
        index, indexed = self._nodes_index, self._indexed_nodes
        with self._lock:
            for cell_uuid, nodes, _states, _failed in cells:
                old = indexed.get(cell_uuid)
                if old is nodes:
                    continue
                for uuid in old or ():
                    if index.get(uuid, (None,))[0] == cell_uuid:
                        del index[uuid]
                for uuid, template in nodes.items():
                    index[uuid] = (cell_uuid, template)
                indexed[cell_uuid] = nodes
        return index

    @staticmethod
    def _try(fn, *args):
        try:
            return fn(*args)
        except Exception as exc:  # noqa: BLE001 - reported as the cell's result, as scatter does
            return exc

    def _service_states_of(self, cell_uuid, services):
        """{host: (up until, state while up, state after)} for a cell's service rows.

        Made once per services part (they change with each heartbeat, not each
        request); the filters only read the state dicts.
        """
        down_time = datetime.timedelta(seconds=self.conf.service_down_time)
        made = self._service_states.get(cell_uuid)
        if made is not None and made[0] is services and made[1] == down_time:
            return made[2]
        states = {}
        for host, service in services.items():
            seen = service.last_seen_up or service.updated_at or service.created_at
            base = {"disabled": service.disabled, "disabled_reason": service.disabled_reason,
                    "forced_down": service.forced_down}
            states[host] = (seen + down_time if seen is not None else datetime.datetime.min,
                            dict(base, up=not service.forced_down), dict(base, up=False))
        self._service_states[cell_uuid] = (services, down_time, states)
        return states

    def aggregates_with_metadata(self, key=None, value=None, key_prefix=None):
        """[(aggregate uuid, metadata)] whose metadata matches."""
        out = []
        for agg in aggregates.all_aggregates(self.api_db):
            md = agg["metadata"]
            if key is not None and (key not in md or (value is not None and md[key] != value)):
                continue
            if key_prefix is not None and not any(k.startswith(key_prefix) for k in md):
                continue
            out.append((agg["uuid"], md))
        return out

    def host_availability_zone(self, host_state):
        zones = sorted(host_state.metadata_values("availability_zone"))
        return ",".join(zones) if zones else self.conf.default_availability_zone
