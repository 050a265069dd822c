"""A Compute API over SQLite files: an API db, cell0 and two cells.

The conductor and the compute hosts are recording fakes served on the
in-process transports, so tests see exactly what the API cast.
"""
import datetime
import json
import threading
import uuid

import pytest
import sqlalchemy as sa
import webob
from oslo_config import cfg

from novella import rpc
from novella.api.compute import wsgi
from novella.conf import api as api_conf, compute as compute_conf, rpc as rpc_conf
from novella.db import api_models as am, cell_models as cm, cells
from novella.db.engine import Database


class Recorder:
    """An RPC endpoint that records every message it receives."""

    def __init__(self):
        self.calls = []
        self._lock = threading.Lock()

    def __getattr__(self, method):
        if method.startswith("_"):
            raise AttributeError(method)

        def record(ctxt, **kwargs):
            with self._lock:
                self.calls.append((method, kwargs, ctxt))
        return record

    def methods(self):
        return [c[0] for c in self.calls]


class Client:
    def __init__(self, app, token, version=None):
        self.app, self.token, self.version = app, token, version

    def request(self, method, path, body=None, version=None, headers=None):
        req = webob.Request.blank("/v2.1" + path if not path.startswith("/v2") and path != "/" else path,
                                  method=method)
        req.headers["X-Auth-Token"] = self.token
        version = version or self.version
        if version:
            req.headers["OpenStack-API-Version"] = f"compute {version}"
        for k, v in (headers or {}).items():
            req.headers[k] = v
        if body is not None:
            req.body = body if isinstance(body, bytes) else json.dumps(body).encode()
            req.content_type = "application/json"
        resp = req.get_response(self.app)
        resp.json_body_or_none = json.loads(resp.body) if resp.body else None
        return resp

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, body=None, **kw):
        return self.request("POST", path, body, **kw)

    def put(self, path, body=None, **kw):
        return self.request("PUT", path, body, **kw)

    def delete(self, path, **kw):
        return self.request("DELETE", path, **kw)


class Cloud:
    """Databases, transports, fakes and clients of one test."""

    def __init__(self, tmp_path):
        tag = uuid.uuid4().hex[:8]
        self.api_db = Database(f"sqlite:///{tmp_path}/api.db")
        cells.create_schema(self.api_db, am)
        self.cells = {}
        with self.api_db.session(write=True) as s:
            for name, cell_uuid in (("cell0", cells.CELL0_UUID), ("cell1", str(uuid.uuid4())),
                                    ("cell2", str(uuid.uuid4()))):
                url = f"sqlite:///{tmp_path}/{name}.db"
                cells.create_schema(cells.database(url), cm)
                mapping = am.CellMapping(uuid=cell_uuid, name=name, database_connection=url,
                                         transport_url=f"inproc://{name}-{tag}")
                s.add(mapping)
                s.flush()
                self.cells[name] = mapping
        self.conf = cfg.ConfigOpts()
        for module in (api_conf, compute_conf, rpc_conf):
            module.register_opts(self.conf)
        self.conf([], project="nova", default_config_files=[])
        self.conf.set_override("auth_strategy", "noauth2", group="api")
        self.transport = rpc.get_transport(f"inproc://super-{tag}")
        self.conductor = Recorder()
        self.transport.serve("conductor", "conductor-1", self.conductor)
        self.computes = {}
        self.network_api = self.image_api = self.volume_api = None
        self.aggregate_events = []
        self.build_app()

    def build_app(self, **kwargs):
        self.app = wsgi.make_app(self.conf, self.api_db, self.transport,
                                 network_api=self.network_api, image_api=self.image_api,
                                 volume_api=self.volume_api,
                                 aggregate_hook=lambda *a: self.aggregate_events.append(a), **kwargs)
        self.admin = Client(self.app, "admin:admin-project")
        self.user = Client(self.app, "alice:project-a")
        self.other = Client(self.app, "bob:project-b")
        self.reader = Client(self.app, "rita:project-a")
        self.reader.request = self._with_roles(self.reader.request, "reader")

    @staticmethod
    def _with_roles(fn, roles):
        def request(*a, headers=None, **kw):
            return fn(*a, headers={**(headers or {}), "X-Roles": roles}, **kw)
        return request

    def db(self, cell):
        return cells.database(self.cells[cell].database_connection)

    def wait(self):
        self.transport.wait_idle()
        for c in self.cells.values():
            rpc.get_transport(c.transport_url).wait_idle()

    # --- fixtures in the databases -----------------------------------------------------
    def flavor(self, flavorid="1", name="m1.small", ram=512, vcpus=1, disk=1, **kw):
        with self.api_db.session(write=True) as s:
            fl = am.Flavor(flavorid=flavorid, name=name, memory_mb=ram, vcpus=vcpus, root_gb=disk, **kw)
            s.add(fl)
            s.flush()
            return fl.id

    def compute_host(self, cell, host, node=None, **svc):
        """A compute service and node in a cell, mapped, with a recording endpoint."""
        db = self.db(cell)
        now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
        with db.session(write=True) as s:
            service = cm.Service(uuid=str(uuid.uuid4()), host=host, binary="nova-compute",
                                 topic="compute", last_seen_up=now, **svc)
            s.add(service)
            s.flush()
            s.add(cm.ComputeNode(uuid=str(uuid.uuid4()), service_id=service.id, host=host,
                                 hypervisor_hostname=node or host, vcpus=16, memory_mb=32768,
                                 local_gb=100, host_ip="192.0.2.1", cpu_info="{}"))
        with self.api_db.session(write=True) as s:
            s.add(am.HostMapping(host=host, cell_id=self.cells[cell].id))
        rec = self.computes.setdefault(cell, Recorder())
        rpc.get_transport(self.cells[cell].transport_url).serve("compute", host, rec)
        return service.uuid

    def instance(self, cell, project="project-a", user="alice", host=None, name="vm",
                 vm_state="active", task_state=None, created_at=None, hidden=False, flavor=None,
                 tags=(), **kw):
        """An instance row in a cell and its mapping, as the conductor leaves them."""
        inst_uuid = kw.pop("uuid", None) or str(uuid.uuid4())
        flavor = flavor or {"id": 1, "flavorid": "1", "name": "m1.small", "memory_mb": 512,
                            "vcpus": 1, "root_gb": 1, "ephemeral_gb": 0, "swap": 0, "extra_specs": {}}
        with self.db(cell).session(write=True) as s:
            s.add(cm.Instance(uuid=inst_uuid, display_name=name, project_id=project, user_id=user,
                              host=host, node=host, vm_state=vm_state, task_state=task_state,
                              power_state=1 if vm_state == "active" else 4, hidden=hidden,
                              created_at=created_at or datetime.datetime.now(datetime.timezone.utc)
                              .replace(tzinfo=None), instance_type_id=flavor["id"],
                              image_ref=kw.pop("image_ref", "155d900f-4e14-4e4c-a73d-069cbf4541e6"),
                              **kw))
            s.add(cm.InstanceExtra(instance_uuid=inst_uuid, flavor=json.dumps({"cur": flavor})))
            for t in tags:
                s.add(cm.Tag(resource_id=inst_uuid, tag=t))
        if not hidden:
            with self.api_db.session(write=True) as s:
                s.add(am.InstanceMapping(instance_uuid=inst_uuid, cell_id=self.cells[cell].id,
                                         project_id=project, user_id=user))
        return inst_uuid

    def count(self, db, model, *where):
        with db.session() as s:
            return s.scalar(sa.select(sa.func.count()).select_from(model).where(*where))

    def counts(self):
        """Row counts of every table in every database: 'nothing changed' checks."""
        out = {}
        for label, db, models in [("api", self.api_db, am)] + [
                (n, self.db(n), cm) for n in self.cells]:
            tables = models.Base.metadata.sorted_tables
            query = sa.select(*[sa.select(sa.func.count()).select_from(t).scalar_subquery()
                                for t in tables])
            with db.connection() as conn:
                row = conn.execute(query).one()
            out.update({(label, t.name): n for t, n in zip(tables, row)})
        return out


@pytest.fixture
def cloud(tmp_path):
    c = Cloud(tmp_path)
    yield c
    c.wait()


class NotFound(Exception):
    code = 404


class FakeImages:
    def __init__(self, images):
        self.images = {i["id"]: i for i in images}

    def get(self, ctxt, image_id):
        if image_id not in self.images:
            raise NotFound(image_id)
        return self.images[image_id]


class FakeNetworks:
    def __init__(self, networks=(), ports=()):
        self.networks = {n["id"]: n for n in networks}
        self.ports = {p["id"]: p for p in ports}

    def get_network(self, ctxt, network_id):
        if network_id not in self.networks:
            raise NotFound(network_id)
        return self.networks[network_id]

    def show_port(self, ctxt, port_id):
        if port_id not in self.ports:
            raise NotFound(port_id)
        return self.ports[port_id]


class FakeVolumes:
    def __init__(self, volumes=()):
        self.volumes = {v: {"id": v, "status": "available"} for v in volumes}

    def get(self, ctxt, volume_id):
        if volume_id not in self.volumes:
            raise NotFound(volume_id)
        return self.volumes[volume_id]


IMAGE = "155d900f-4e14-4e4c-a73d-069cbf4541e6"
INACTIVE_IMAGE = "a2459075-d96c-40d5-893e-577ff92e721c"
BIG_IMAGE = "70a599e0-31e7-49b7-b260-868f441e862b"
NET = "3cb9bc59-5699-4588-a4b1-b87f96708bc6"
PORT = "ce531f90-199f-48c0-816c-13e38010b442"
USED_PORT = "5a2d3f38-1e1f-4a8a-9d2f-6c1b9a8f0d11"
VOLUME = "521752a6-acf6-4b2d-bc7a-119f9148cd8c"


@pytest.fixture
def services_cloud(cloud):
    """The cloud with image, network and volume clients that know a few things."""
    cloud.image_api = FakeImages([
        {"id": IMAGE, "name": "cirros", "status": "active", "min_ram": 0, "min_disk": 0,
         "size": 1024, "properties": {"hw_machine_type": "q35"}},
        {"id": INACTIVE_IMAGE, "name": "queued", "status": "queued"},
        {"id": BIG_IMAGE, "name": "big", "status": "active", "min_ram": 4096, "min_disk": 0},
    ])
    cloud.network_api = FakeNetworks(networks=[{"id": NET, "name": "private"}],
                                     ports=[{"id": PORT, "device_id": ""},
                                            {"id": USED_PORT, "device_id": "someone"}])
    cloud.volume_api = FakeVolumes([VOLUME])
    cloud.build_app()
    return cloud
