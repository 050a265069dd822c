"""One process, real databases: an API db, cell0 and two cells (SQLite files),
Novella's placement in-process, the scheduler and conductor served on a
top-level in-process transport, and fake compute hosts on each cell's own
transport. A fake compute records its calls and builds by writing its cell
database, or raises RescheduledException when told to fail.
"""
import datetime
import json
import uuid

import pytest
import sqlalchemy as sa
from sqlalchemy import orm
from oslo_config import cfg

from novella import conf as conf_pkg
from novella import rpc
from novella.compute import states
from novella.conductor.manager import ConductorManager
from novella.conductor.rpcapi import ConductorAPI
from novella.context import RequestContext
from novella.db import api_models as am
from novella.db import cell_models as cm
from novella.db import cells as cells_mod
from novella.db import records
from novella.scheduler.manager import SchedulerManager
from tests.functional.placement_targets import novella_client

PROJECT = "6f70656e-7374-6163-6b20-70726f6a6563"
USER = "fake-user"


class RescheduledException(Exception):
    """Named as compute's: the conductor recognises it by class name."""


class BuildAbortException(Exception):
    """Named as compute's: the server was deleted during its build."""


class FakeCompute:
    def __init__(self, host, cell_db):
        self.host = host
        self.cell_db = cell_db
        self.calls = []
        self.fail = False
        self.abort = False

    def build_and_run_instance(self, ctxt, instance_uuid, request_spec, node, allocations,
                               requested_networks=None, block_device_mappings=None,
                               port_profiles=None):
        self.calls.append({"instance_uuid": instance_uuid, "node": node,
                           "allocations": allocations, "requested_networks": requested_networks,
                           "block_device_mappings": block_device_mappings,
                           "port_profiles": port_profiles})
        with records.action_event(self.cell_db, ctxt, instance_uuid,
                                  records.BUILD_EVENT, host=self.host):
            if self.abort:
                raise BuildAbortException(
                    f"Build of instance {instance_uuid} aborted: deleted by its user")
            if self.fail:
                raise RescheduledException(
                    f"Build of instance {instance_uuid} was re-scheduled: simulated failure")
            records.update_instance(self.cell_db, instance_uuid, vm_state=states.ACTIVE,
                                    task_state=None, power_state=states.power_state.RUNNING,
                                    host=self.host, node=node, launched_on=self.host)


def _conf(super_url, overrides):
    conf = cfg.ConfigOpts()
    for module in conf_pkg.MODULES:
        module.register_opts(conf)
    conf([], default_config_files=[])
    conf.set_override("transport_url", super_url)
    for (group, key), value in (overrides or {}).items():
        conf.set_override(key, value, group=group)
    return conf


class Cloud:
    """The deployment under test, with helpers that do what the API would do."""

    def __init__(self, tmp_path, conf_overrides=None):
        tmp_path.mkdir(parents=True, exist_ok=True)
        tag = uuid.uuid4().hex[:8]
        self.super_url = f"inproc://super-{tag}"
        self.conf = _conf(self.super_url, conf_overrides)
        self.api_db = cells_mod.database(f"sqlite:///{tmp_path}/api.db")
        cells_mod.create_schema(self.api_db, am)
        self.placement = novella_client(f"sqlite:///{tmp_path}/placement.db")
        self.cells = {}
        with self.api_db.session(write=True) as s:
            for name in ("cell0", "cell1", "cell2"):
                url = f"sqlite:///{tmp_path}/{name}.db"
                cells_mod.create_schema(cells_mod.database(url), cm)
                s.add(am.CellMapping(
                    uuid=cells_mod.CELL0_UUID if name == "cell0" else str(uuid.uuid4()),
                    name=name, transport_url=f"inproc://{name}-{tag}", database_connection=url))
        for cell in cells_mod.list_cells(self.api_db):
            self.cells[cell.name] = cell
        self.transports = [rpc.get_transport(url) for url in
                           [self.super_url] + [c.transport_url for c in self.cells.values()]]
        self.scheduler = SchedulerManager(self.conf, self.api_db, self.placement)
        self.notifications = []
        self.conductor = ConductorManager(
            self.conf, self.api_db, self.placement,
            notifier=lambda ctxt, publisher, event_type, payload: self.notifications.append(
                (publisher, event_type, payload)))
        self.transports[0].serve("scheduler", "sched1", self.scheduler)
        self.transports[0].serve("conductor", "cond1", self.conductor)
        self.computes = {}
        self.nodes = {}  # host -> compute node uuid

    # -- hosts ----------------------------------------------------------------------------
    def add_host(self, cell_name, host, vcpus=4, memory_mb=4096, disk_gb=100, up=True,
                 traits=()):
        cell = self.cells[cell_name]
        db = cells_mod.cell_database(cell)
        node_uuid = str(uuid.uuid4())
        seen = datetime.datetime.utcnow() - datetime.timedelta(hours=0 if up else 1)
        with db.session(write=True) as s:
            svc = cm.Service(uuid=str(uuid.uuid4()), host=host, binary="nova-compute",
                             topic="compute", last_seen_up=seen)
            s.add(svc)
            s.flush()
            s.add(cm.ComputeNode(uuid=node_uuid, service_id=svc.id, host=host,
                                 hypervisor_hostname=host, vcpus=vcpus, memory_mb=memory_mb,
                                 local_gb=disk_gb, cpu_allocation_ratio=1.0,
                                 ram_allocation_ratio=1.0, disk_allocation_ratio=1.0))
        with self.api_db.session(write=True) as s:
            s.add(am.HostMapping(cell_id=cell.id, host=host))
        self.placement.create_resource_provider(node_uuid, host)
        self.placement.set_inventory(node_uuid, {
            "VCPU": {"total": vcpus, "allocation_ratio": 1.0},
            "MEMORY_MB": {"total": memory_mb, "allocation_ratio": 1.0},
            "DISK_GB": {"total": disk_gb, "allocation_ratio": 1.0}})
        if traits:
            self.placement.set_traits(node_uuid, traits)
        fake = FakeCompute(host, db)
        rpc.get_transport(cell.transport_url).serve("compute", host, fake)
        self.computes[host] = fake
        self.nodes[host] = node_uuid
        return fake

    def add_aggregate(self, name, hosts, metadata):
        agg_uuid = str(uuid.uuid4())
        with self.api_db.session(write=True) as s:
            agg = am.Aggregate(uuid=agg_uuid, name=name)
            agg.hosts = [am.AggregateHost(host=h) for h in hosts]
            agg.metadata_items = [am.AggregateMetadata(key=k, value=v) for k, v in metadata.items()]
            s.add(agg)
        for h in hosts:  # mirrored into placement, as the aggregates API does
            _, aggs = self.placement.get_aggregates(self.nodes[h])
            self.placement.set_aggregates(self.nodes[h], aggs + [agg_uuid])
        return agg_uuid

    def add_group(self, policy, rules=None):
        group_uuid = str(uuid.uuid4())
        with self.api_db.session(write=True) as s:
            s.add(am.InstanceGroup(uuid=group_uuid, name=policy, project_id=PROJECT,
                                   user_id=USER, policy=policy,
                                   rules=json.dumps(rules) if rules else None))
        return {"uuid": group_uuid, "policy": policy, "rules": rules or {},
                "members": [], "hosts": []}

    # -- servers ------------------------------------------------------------------------
    def ctxt(self):
        return RequestContext(user_id=USER, project_id=PROJECT)

    def boot(self, count=1, flavor=None, group=None, az=None, bdms=None, tags=None, **spec_extra):
        """Write build requests, request specs and mappings, cast, wait; return the uuids."""
        flavor = flavor or {"id": 1, "flavorid": "1", "name": "m1.small", "memory_mb": 1024,
                            "vcpus": 1, "root_gb": 10, "ephemeral_gb": 0, "swap": 0,
                            "extra_specs": {}}
        uuids = [str(uuid.uuid4()) for _ in range(count)]
        specs = []
        with self.api_db.session(write=True) as s:
            for u in uuids:
                spec = {"instance_uuid": u, "project_id": PROJECT, "user_id": USER,
                        "flavor": flavor, "image": {"id": "img", "properties": {}},
                        "num_instances": count, "availability_zone": az,
                        "scheduler_hints": {}, "instance_group": group,
                        "requested_destination": None, "ignore_hosts": [], "force_hosts": [],
                        "force_nodes": [], "requested_resources": [], "is_bfv": False,
                        "retry": None}
                spec.update(spec_extra)
                specs.append(spec)
                s.add(am.RequestSpec(instance_uuid=u, spec=json.dumps(spec)))
                s.add(am.BuildRequest(
                    instance_uuid=u, project_id=PROJECT,
                    instance=json.dumps({"display_name": f"server-{u[:6]}", "project_id": PROJECT,
                                         "user_id": USER, "image_ref": "img", "flavor": flavor,
                                         "metadata": {"role": "test"}, "availability_zone": az}),
                    block_device_mappings=json.dumps(bdms) if bdms is not None else None,
                    tags=json.dumps(tags) if tags is not None else None))
                s.add(am.InstanceMapping(instance_uuid=u, project_id=PROJECT, user_id=USER))
        ConductorAPI(self.transports[0]).schedule_and_build_instances(
            self.ctxt(), [{"instance_uuid": u} for u in uuids], specs, None, None, None)
        self.wait()
        return uuids

    def wait(self):
        for t in self.transports:
            t.wait_idle(60)

    # -- state ----------------------------------------------------------------------------
    def mapping_cell(self, instance_uuid):
        cell = cells_mod.instance_cell(self.api_db, instance_uuid)
        return cell.name if cell else None

    def instance(self, instance_uuid, cell_name=None):
        cell = self.cells[cell_name or self.mapping_cell(instance_uuid)]
        with cells_mod.cell_database(cell).session() as s:
            return s.scalars(sa.select(cm.Instance).where(cm.Instance.uuid == instance_uuid)
                             .options(orm.selectinload(cm.Instance.metadata_items),
                                      orm.selectinload(cm.Instance.tags))).first()

    def rows(self, cell_name, model, **where):
        with cells_mod.cell_database(self.cells[cell_name]).session() as s:
            q = sa.select(model)
            for k, v in where.items():
                q = q.where(getattr(model, k) == v)
            return list(s.scalars(q))

    def allocations(self, consumer):
        return self.placement.get_allocations(consumer)["allocations"]

    def usages(self, host):
        return self.placement.get_provider_usages(self.nodes[host])[1]

    def build_request_exists(self, instance_uuid):
        with self.api_db.session() as s:
            return s.scalars(sa.select(am.BuildRequest).where(
                am.BuildRequest.instance_uuid == instance_uuid)).first() is not None

    def close(self):
        for t in self.transports:
            t.stop()


@pytest.fixture
def make_cloud(tmp_path):
    made = []

    def make(conf_overrides=None):
        """A cloud whose options {(group, name): value} differ from the defaults."""
        cloud = Cloud(tmp_path / f"c{len(made)}", conf_overrides)
        made.append(cloud)
        return cloud

    yield make
    for cloud in made:
        cloud.close()


@pytest.fixture
def cloud(make_cloud):
    return make_cloud()
