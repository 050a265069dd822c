"""What the scheduler knows about each compute node.

A HostState joins, for one compute node, its row and its service row from
whichever cell holds it, the host aggregates it belongs to (API database),
its recent build failures and, from the placement
answer, its provider summary (capacity and usage per resource class,
traits) and the allocation requests that would fit on it.
"""
import datetime
import json

import sqlalchemy as sa

from novella.db import api_models as am
from novella.db import cell_models as cm
from novella.db import cells as cells_mod

# The event the compute service records around a build; its result per host
# is the build failure count the BuildFailureWeigher reads.
BUILD_EVENT = "compute_build_and_run_instance"


def _utcnow():
    return datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)


class HostState:
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
        def load(cell, db):
            return self._load_cell(db, provider_uuids, hosts)

        states = []
        for cell_uuid_, result in cells_mod.scatter(self.cells(cell_uuid), load).items():
            if isinstance(result, Exception):
                continue  # a cell that does not answer has no host to offer
            for node, service, failed in result:
                hs = HostState(node, service, cell_uuid_)
                hs.failed_builds = failed
                states.append(hs)
        aggs = self.host_aggregates({hs.host for hs in states})
        for hs in states:
            hs.aggregates = aggs.get(hs.host, [])
        return states

    def _load_cell(self, db, provider_uuids, hosts):
        # Plain rows, not ORM objects: HostState and _service_state only read
        # columns, and hydrating every node and service of every cell on each
        # request was most of the scheduler's time.
        with db.session() as s:
            q = sa.select(*cm.ComputeNode.__table__.columns).where(cm.ComputeNode.deleted == 0)
            if provider_uuids is not None:
                q = q.where(cm.ComputeNode.uuid.in_(list(provider_uuids)))
            if hosts is not None:
                q = q.where(cm.ComputeNode.host.in_(list(hosts)))
            nodes = s.execute(q).all()
            if not nodes:
                return []
            names = {n.host for n in nodes}
            services = {sv.host: sv for sv in s.execute(
                sa.select(*cm.Service.__table__.columns).where(
                    cm.Service.host.in_(names), cm.Service.deleted == 0,
                    cm.Service.binary.like("%compute")))}
            failed = self._failed_builds(s, names)
        return [(n, self._service_state(services.get(n.host)), failed.get(n.host, 0))
                for n in nodes]

    @staticmethod
    def _failed_builds(s, hosts):
        """Build failures per host since its last successful build."""
        ev = cm.InstanceActionEvent
        last_ok = dict(s.execute(
            sa.select(ev.host, sa.func.max(ev.id))
            .where(ev.event == BUILD_EVENT, ev.result == "Success", ev.host.in_(hosts))
            .group_by(ev.host)).all())
        failed = {}
        for host, event_id in s.execute(sa.select(ev.host, ev.id).where(
                ev.event == BUILD_EVENT, ev.result == "Error", ev.host.in_(hosts))):
            if event_id > last_ok.get(host, 0):
                failed[host] = failed.get(host, 0) + 1
        return failed

    def _service_state(self, service):
        if service is None:  # a node without a service record cannot build
            return {"disabled": True, "disabled_reason": "no service record",
                    "forced_down": False, "up": False}
        seen = service.last_seen_up or service.updated_at or service.created_at
        down_time = datetime.timedelta(seconds=self.conf.service_down_time)
        up = seen is not None and _utcnow() - seen <= down_time
        return {"disabled": service.disabled, "disabled_reason": service.disabled_reason,
                "forced_down": service.forced_down, "up": up and not service.forced_down}

    def host_aggregates(self, hosts=None):
        """{host: [{"uuid", "name", "metadata"}]} from the API database."""
        out = {}
        with self.api_db.session() as s:
            for agg in s.scalars(sa.select(am.Aggregate)):
                info = {"uuid": agg.uuid, "name": agg.name,
                        "metadata": {m.key: m.value for m in agg.metadata_items}}
                for h in agg.hosts:
                    if hosts is None or h.host in hosts:
                        out.setdefault(h.host, []).append(info)
        return out

    def aggregates_with_metadata(self, key=None, value=None, key_prefix=None):
        """[(aggregate uuid, metadata)] whose metadata matches."""
        out = []
        with self.api_db.session() as s:
            for agg in s.scalars(sa.select(am.Aggregate)):
                md = {m.key: m.value for m in agg.metadata_items}
                if key is not None and (key not in md or (value is not None and md[key] != value)):
                    continue
                if key_prefix is not None and not any(k.startswith(key_prefix) for k in md):
                    continue
                out.append((agg.uuid, md))
        return out

    def host_availability_zone(self, host_state):
        zones = sorted(host_state.metadata_values("availability_zone"))
        return ",".join(zones) if zones else self.conf.default_availability_zone
