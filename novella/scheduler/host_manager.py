"""What the scheduler knows about each compute node.

A HostState joins, for one compute node, its row and its service row from
whichever cell holds it, the host aggregates it belongs to (API database),
its recent build failures and, from the placement answer, its provider
summary (capacity and usage per resource class, traits) and the allocation
requests that would fit on it. The rows of each cell are cached until they
change (``_cell_hosts``); each request gets its own copies.
"""
import copy
import datetime
import json

import sqlalchemy as sa

from novella.db import aggregates
from novella.db import cell_models as cm
from novella.db import cells as cells_mod
from novella.db.cache import TokenCache

# The event the compute service records around a build; its result per host
# is the build failure count the BuildFailureWeigher reads.
BUILD_EVENT = "compute_build_and_run_instance"


def _utcnow():
    return datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)


class HostState:
    """One compute node as one scheduling request sees it.

    Built from the cell's cached rows (``_CellHosts``) by ``for_request``;
    placement's provider summary then overrides the resource figures.
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
        self.traits = set()
        self.allocation_requests = []
        self.limits = {}

    def for_request(self, service, aggregates):
        """A copy this request may change (consume, allocation requests) freely."""
        hs = copy.copy(self)
        hs.service = service
        hs.aggregates = aggregates
        hs.traits = set()
        hs.allocation_requests = []
        hs.limits = {}
        return hs
    def apply_provider_summary(self, summary):
        """Placement's figures win over the compute node row: they are the ledger."""
        res = summary.get("resources") or {}
        if "VCPU" in res:
            self.vcpus_total = res["VCPU"]["capacity"]
            self.vcpus_used = res["VCPU"]["used"]
            self.cpu_allocation_ratio = 1.0  # capacity already includes the ratio
        if "MEMORY_MB" in res:
            self.total_usable_ram_mb = res["MEMORY_MB"]["capacity"]
            self.free_ram_mb = res["MEMORY_MB"]["capacity"] - res["MEMORY_MB"]["used"]
        if "DISK_GB" in res:
            self.total_usable_disk_gb = res["DISK_GB"]["capacity"]
            self.free_disk_mb = (res["DISK_GB"]["capacity"] - res["DISK_GB"]["used"]) * 1024
        self.traits |= set(summary.get("traits") or [])

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


def _json(text):
    try:
        return json.loads(text) if text else None
    except ValueError:
        return None


def _load_cell_hosts(db):
    """{node uuid: (HostState template, service row or None)} of one cell.

    Plain rows, not ORM objects: the templates only read columns.
    """
    with db.connection() as conn:
        nodes = conn.execute(sa.select(*cm.ComputeNode.__table__.columns)
                             .where(cm.ComputeNode.deleted == 0)).all()
        services = {sv.host: sv for sv in conn.execute(
            sa.select(*cm.Service.__table__.columns).where(
                cm.Service.deleted == 0, cm.Service.binary.like("%compute")))}
        failed = _failed_builds(conn)
    out = {}
    for n in nodes:
        template = HostState(n, None, None)
        template.failed_builds = failed.get(n.host, 0)
        out[n.uuid] = (template, services.get(n.host))
    return out


def _failed_builds(conn):
    """Build failures per host since its last successful build."""
    ev = cm.InstanceActionEvent
    last_ok = dict(conn.execute(
        sa.select(ev.host, sa.func.max(ev.id))
        .where(ev.event == BUILD_EVENT, ev.result == "Success").group_by(ev.host)).all())
    failed = {}
    for host, event_id in conn.execute(sa.select(ev.host, ev.id).where(
            ev.event == BUILD_EVENT, ev.result == "Error")):
        if event_id > last_ok.get(host, 0):
            failed[host] = failed.get(host, 0) + 1
    return failed


# What a cell's host states are made of changes when a compute node comes or
# goes, a service changes (heartbeat, disable, force down) or a build fails.
# Claims rewrite the nodes' usage columns on every build, but the scheduler
# takes usage from placement, so those writes need not (and must not, or the
# cache would never hold) count. A host's first successful build after a
# failure clears its failure count at the next change (at the latest its next
# heartbeat), not at once: until then it stays last in line.
_ev = cm.InstanceActionEvent
_cell_hosts = TokenCache(sa.select(*(q.scalar_subquery() for q in (
    sa.select(sa.func.count()).where(cm.ComputeNode.deleted == 0),
    sa.select(sa.func.max(cm.ComputeNode.id)),
    sa.select(sa.func.max(cm.ComputeNode.deleted_at)),
    sa.select(sa.func.count()).select_from(cm.Service),
    sa.select(sa.func.max(cm.Service.updated_at)),
    sa.select(sa.func.max(cm.Service.last_seen_up)),
    sa.select(sa.func.max(_ev.id)).where(_ev.event == BUILD_EVENT, _ev.result == "Error"),
))), _load_cell_hosts)


class HostManager:
    def __init__(self, conf, api_db):
        self.conf = conf
        self.api_db = api_db

    def cells(self, cell_uuid=None):
        """Enabled cells that hold compute hosts (never cell0)."""
        return [c for c in cells_mod.list_cells(self.api_db, include_cell0=False,
                                                include_disabled=False)
                if cell_uuid is None or c.uuid == cell_uuid]

    def get_host_states(self, provider_uuids=None, hosts=None, cell_uuid=None):
        """HostStates of the compute nodes whose uuid (or host) is given, from every cell."""
        # One after the other: each is one token query when nothing changed,
        # cheaper than handing it to a thread.
        found = {c.uuid: self._try(_cell_hosts.get, cells_mod.cell_database(c))
                 for c in self.cells(cell_uuid)}
        wanted_uuids = None if provider_uuids is None else set(provider_uuids)
        wanted_hosts = None if hosts is None else set(hosts)
        aggs = aggregates.by_host(self.api_db)
        now = _utcnow()
        states = []
        for cell_uuid_, result in found.items():
            if isinstance(result, Exception):
                continue  # a cell that does not answer has no host to offer
            for uuid, (template, service) in result.items():
                if wanted_uuids is not None and uuid not in wanted_uuids:
                    continue
                if wanted_hosts is not None and template.host not in wanted_hosts:
                    continue
                hs = template.for_request(self._service_state(service, now),
                                          aggs.get(template.host, []))
                hs.cell_uuid = cell_uuid_
                states.append(hs)
        return states

    @staticmethod
    def _try(fn, *args):
        try:
            return fn(*args)
        except Exception as exc:  # noqa: BLE001 - reported as the cell's result, as scatter does
            return exc

    def _service_state(self, service, now):
        if service is None:  # a node without a service record cannot build
            return {"disabled": True, "disabled_reason": "no service record",
                    "forced_down": False, "up": False}
        seen = service.last_seen_up or service.updated_at or service.created_at
        down_time = datetime.timedelta(seconds=self.conf.service_down_time)
        up = seen is not None and now - seen <= down_time
        return {"disabled": service.disabled, "disabled_reason": service.disabled_reason,
                "forced_down": service.forced_down, "up": up and not service.forced_down}

    def host_aggregates(self, hosts=None):
        """{host: [{"uuid", "name", "metadata"}]} from the API database."""
        return aggregates.by_host(self.api_db, hosts)

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
