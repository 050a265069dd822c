"""Two compute hosts on one in-process transport, a cell database and placement."""
import json
import uuid

import pytest
import sqlalchemy as sa

from novella import context, rpc
from novella.compute import manager as manager_mod
from novella.compute import rpcapi
from novella.compute import states
from novella.conf import CONF
from novella.db import cell_models as m
from novella.db import cells
from novella.db.engine import Database
from novella.placement.client import PlacementClient
from novella.virt import simulated

FLAVOR = {"flavorid": "1", "name": "m1.small", "memory_mb": 512, "vcpus": 2, "root_gb": 10,
          "ephemeral_gb": 1, "swap": 128, "extra_specs": {}}


def placement_app(tmp_path):
    from novella.placement import conf as conf_mod, wsgi
    return wsgi.make_app(conf_mod.make_conf(overrides={
        "placement_database": {"connection": f"sqlite:///{tmp_path}/placement.db"},
        "api": {"auth_strategy": "noauth2"}}))


class Env:
    def __init__(self, tmp_path):
        self.tmp = tmp_path
        self.cell_db = Database(f"sqlite:///{tmp_path}/cell1.db")
        cells.create_schema(self.cell_db, m)
        self.placement = PlacementClient(app=placement_app(tmp_path), token="admin")
        self.url = f"inproc://compute-test-{uuid.uuid4().hex[:8]}"
        self.transport = rpc.get_transport(self.url)
        self.notifications = []
        self.compute = rpcapi.ComputeAPI(self.transport)
        self.ctxt = context.RequestContext(user_id="u1", project_id="p1")
        self.instances_path = str(tmp_path / "instances")
        self.managers = {}
        tag = uuid.uuid4().hex[:6]
        for name in ("host1", "host2"):
            self.start_host(f"{name}-{tag}")
        self.host1, self.host2 = list(self.managers)

    def notifier(self, ctxt, publisher_id, event_type, payload, priority="INFO"):
        self.notifications.append((publisher_id, event_type, payload))

    def start_host(self, host, **driver_kw):
        driver_kw.setdefault("pci_devices", ["8086:1520:2"])
        driver_kw.setdefault("numa_cells", 2)
        driver = simulated.SimulatedDriver(host, conf=CONF, instances_path=self.instances_path,
                                           **driver_kw)
        mgr = manager_mod.ComputeManager(CONF, host, self.cell_db, self.placement, driver,
                                         notifier=self.notifier, transport=self.transport)
        mgr.start_service()
        self.managers[host] = mgr
        return mgr

    def rp(self, host):
        return self.managers[host].rt.provider_uuid

    def make_instance(self, flavor=FLAVOR, **kw):
        inst_uuid = str(uuid.uuid4())
        with self.cell_db.session(write=True) as s:
            s.add(m.Instance(uuid=inst_uuid, project_id="p1", user_id="u1", display_name="vm",
                             vm_state=states.BUILDING, task_state=states.task_states.SCHEDULING,
                             vcpus=flavor["vcpus"], memory_mb=flavor["memory_mb"],
                             root_gb=flavor["root_gb"], ephemeral_gb=flavor["ephemeral_gb"],
                             image_ref=kw.pop("image_ref", None), **kw))
            s.add(m.InstanceExtra(instance_uuid=inst_uuid,
                                  flavor=json.dumps({"cur": flavor, "old": None, "new": None})))
        return inst_uuid

    def claim(self, inst_uuid, host, flavor=FLAVOR):
        """What the scheduler does before the build: the instance's allocation."""
        alloc = {self.rp(host): {"resources": {
            "VCPU": flavor["vcpus"], "MEMORY_MB": flavor["memory_mb"],
            "DISK_GB": flavor["root_gb"] + flavor["ephemeral_gb"]}}}
        self.placement.put_allocations(inst_uuid, alloc, "p1", "u1")
        return alloc

    def build(self, host, inst_uuid, flavor=FLAVOR):
        alloc = self.claim(inst_uuid, host, flavor)
        return self.compute.build_and_run_instance(
            self.ctxt, host, inst_uuid, {"flavor": flavor, "image": {"id": None}},
            node=host, allocations=alloc)

    def instance(self, inst_uuid):
        with self.cell_db.session() as s:
            return s.scalars(sa.select(m.Instance).where(m.Instance.uuid == inst_uuid)).one()

    def events(self, inst_uuid):
        with self.cell_db.session() as s:
            return [(e.event, e.result, e.host) for e in s.scalars(
                sa.select(m.InstanceActionEvent).join(m.InstanceAction).where(
                    m.InstanceAction.instance_uuid == inst_uuid)
                .order_by(m.InstanceActionEvent.id))]

    def faults(self, inst_uuid):
        with self.cell_db.session() as s:
            return list(s.scalars(sa.select(m.InstanceFault).where(
                m.InstanceFault.instance_uuid == inst_uuid)))

    def service(self, host):
        with self.cell_db.session() as s:
            return s.scalars(sa.select(m.Service).where(m.Service.host == host)).one()

    def usages(self, host):
        return self.placement.get_provider_usages(self.rp(host))[1]

    def set_task_state(self, inst_uuid, task_state):
        """What the API does before casting an action."""
        with self.cell_db.session(write=True) as s:
            s.execute(sa.update(m.Instance).where(m.Instance.uuid == inst_uuid)
                      .values(task_state=task_state))

    def stop(self):
        self.transport.wait_idle()
        for host, mgr in self.managers.items():
            mgr.stop_service()
            simulated.clear_faults(host)
        self.transport.stop()
        rpc._transports.pop(self.url, None)


@pytest.fixture
def env(tmp_path):
    e = Env(tmp_path)
    yield e
    e.stop()
