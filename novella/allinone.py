"""The whole system in one process: what `novella up` runs.

Placement, the Compute API, the super-conductor, the scheduler and many
simulated compute hosts spread over several cells, each cell with its own
SQLite database and its own in-process transport, exactly as separate
services would be wired over RabbitMQ. Tests and benchmarks build the same
object without HTTP listeners (``http=False``) and call the WSGI apps directly.
"""
import json
import logging
import os
import uuid

import sqlalchemy as sa

from novella import rpc
from novella.cmd import manage
from novella.conf import CONF
from novella.db import api_models as am
from novella.db import cells as cells_mod

LOG = logging.getLogger(__name__)

DEMO_FLAVORS = [
    # flavorid, name, vcpus, memory_mb, root_gb
    ("1", "m1.tiny", 1, 512, 1),
    ("2", "m1.small", 1, 2048, 20),
    ("3", "m1.medium", 2, 4096, 40),
    ("4", "m1.large", 4, 8192, 80),
    ("5", "m1.xlarge", 8, 16384, 160),
]

SUPER_TRANSPORT = "inproc://super"


class AllInOne:
    def __init__(self, data_dir, cells=2, hosts_per_cell=2, http=False, bind="127.0.0.1",
                 port_base=0, config_overrides=None, log=print):
        self.data_dir = os.path.abspath(data_dir)
        self.n_cells = cells
        self.hosts_per_cell = hosts_per_cell
        self.http = http
        self.bind = bind
        self.port_base = port_base
        self.log = log or (lambda *_: None)
        self.servers = []
        self.periodics = []
        self.computes = {}
        os.makedirs(self.data_dir, exist_ok=True)
        self._configure(config_overrides or {})

    # -- configuration -----------------------------------------------------
    def _url(self, name):
        return f"sqlite:///{os.path.join(self.data_dir, name)}.db"

    def _configure(self, overrides):
        CONF([], project="nova", default_config_files=[])
        defaults = {
            None: {"state_path": self.data_dir, "transport_url": SUPER_TRANSPORT,
                   "instances_path": os.path.join(self.data_dir, "instances")},
            "api_database": {"connection": self._url("api")},
            "api": {"auth_strategy": "noauth2"},
        }
        for group, values in list(defaults.items()) + list(overrides.items()):
            for key, value in values.items():
                CONF.set_override(key, value, group=group)

    # -- start ---------------------------------------------------------------
    def start(self):
        self.log(f"Data directory: {self.data_dir}")
        self._start_placement()
        self._start_databases()
        self._start_embedded_services()
        self._start_control_plane()
        self._start_computes()
        added = manage.discover_hosts(CONF.api_database.connection)
        if added:
            self.log(f"Mapped {len(added)} compute hosts to their cells.")
        self._seed_demo_data()
        self._start_api()
        return self

    def _start_placement(self):
        from novella.placement import conf as pconf
        from novella.placement import wsgi as pwsgi
        from novella.placement.client import PlacementClient
        self.placement_conf = pconf.make_conf(overrides={
            "placement_database": {"connection": self._url("placement")},
            "api": {"auth_strategy": "noauth2"}})
        self.placement_app = pwsgi.make_app(self.placement_conf)
        self.placement = PlacementClient(app=self.placement_app, token="admin")
        self.log("Placement ready (embedded).")

    def _start_databases(self):
        api_url = CONF.api_database.connection
        manage.api_db_sync(api_url)
        self.api_db = cells_mod.database(api_url)
        existing = {c.name: c for c in cells_mod.list_cells(self.api_db)}
        if "cell0" not in existing:
            manage.map_cell0(api_url, self._url("cell0"))
        for i in range(1, self.n_cells + 1):
            name = f"cell{i}"
            if name not in existing:
                manage.create_cell(api_url, name, f"inproc://{name}", self._url(name))
        manage.cell_db_sync(api_url)
        self.cells = [c for c in cells_mod.list_cells(self.api_db, include_cell0=False)]
        self.log(f"Cells: {', '.join(c.name for c in self.cells)} (+ cell0).")

    def _start_embedded_services(self):
        from novella.embedded import services_from_conf
        self.image_api, self.network_api, self.volume_api = services_from_conf(CONF)

    def _start_control_plane(self):
        from novella.conductor.manager import ConductorManager
        from novella.scheduler.manager import SchedulerManager
        self.transport = rpc.get_transport(SUPER_TRANSPORT)
        self.scheduler = SchedulerManager(CONF, self.api_db, self.placement)
        self.conductor = ConductorManager(
            CONF, self.api_db, self.placement, network_api=self.network_api,
            volume_api=self.volume_api, image_api=self.image_api,
            notifier=self.notifier("nova-conductor"))
        self.transport.serve("scheduler", "allinone", self.scheduler)
        self.transport.serve("conductor", "allinone", self.conductor)

    def notifier(self, publisher_id):
        transport = self.transport if hasattr(self, "transport") else rpc.get_transport(SUPER_TRANSPORT)

        def notify(ctxt, publisher, event_type, payload):
            transport.notify(ctxt, publisher or publisher_id, event_type, payload)
        return notify

    def _start_computes(self):
        from novella.compute.manager import ComputeManager
        from novella.virt.simulated import SimulatedDriver
        for ci, cell in enumerate(self.cells, start=1):
            cell_db = cells_mod.cell_database(cell)
            transport = rpc.get_transport(cell.transport_url)
            for hi in range(1, self.hosts_per_cell + 1):
                host = f"{cell.name}-host{hi}"
                driver = SimulatedDriver(host, CONF)
                mgr = ComputeManager(CONF, host, cell_db, self.placement, driver,
                                     network_api=self.network_api, volume_api=self.volume_api,
                                     image_api=self.image_api, notifier=self.notifier(f"nova-compute:{host}"),
                                     transport=transport)
                mgr.init_host()
                transport.serve("compute", host, mgr)
                self.computes[host] = mgr
        self.log(f"Compute hosts: {len(self.computes)} simulated.")

    def _seed_demo_data(self):
        with self.api_db.session(write=True) as s:
            if s.scalars(sa.select(am.Flavor).limit(1)).first() is None:
                for flavorid, name, vcpus, ram, disk in DEMO_FLAVORS:
                    s.add(am.Flavor(flavorid=flavorid, name=name, vcpus=vcpus,
                                    memory_mb=ram, root_gb=disk))
        self.demo_image = self._ensure_demo_image()
        self.demo_network = self._ensure_demo_network()

    def _ensure_demo_image(self):
        from novella.context import get_admin_context
        ctxt = get_admin_context()
        for image in self.image_api.list(ctxt):
            if image["name"] == "cirros":
                return image
        image = self.image_api.create(ctxt, name="cirros", disk_format="qcow2",
                                      container_format="bare", visibility="public")
        self.image_api.upload(ctxt, image["id"], b"simulated cirros image\n" * 64)
        return self.image_api.get(ctxt, image["id"])

    def _ensure_demo_network(self):
        from novella.context import get_admin_context
        return self.network_api.ensure_default_network(get_admin_context())

    def _start_api(self):
        from novella.api.compute.wsgi import make_app
        self.compute_api_app = make_app(CONF, self.api_db, self.transport,
                                        network_api=self.network_api, image_api=self.image_api,
                                        volume_api=self.volume_api)
        if not self.http:
            return
        from novella.service import HTTPServer
        port = (lambda offset, default: self.port_base + offset if self.port_base else default)
        self.compute_http = HTTPServer(self.compute_api_app, self.bind, port(0, 8774), "compute").start()
        self.placement_http = HTTPServer(self.placement_app, self.bind, port(1, 8778), "placement").start()
        self.servers += [self.compute_http, self.placement_http]

    # -- running -----------------------------------------------------------------
    def wait_idle(self, timeout=120):
        """Wait until every queued cast (on every transport) has been handled."""
        for url in [SUPER_TRANSPORT] + [c.transport_url for c in self.cells]:
            rpc.get_transport(url).wait_idle(timeout)
        # casts may queue further casts on another transport: check once more
        for url in [SUPER_TRANSPORT] + [c.transport_url for c in self.cells]:
            rpc.get_transport(url).wait_idle(timeout)

    def stop(self):
        for p in self.periodics:
            p.stop()
        for srv in self.servers:
            srv.stop()
        rpc.cleanup()
        self.log("Stopped.")

    def endpoints(self):
        return {s.name: s.url for s in self.servers}


def new_id():
    return str(uuid.uuid4())


def dumps(obj):
    return json.dumps(obj, indent=2, sort_keys=True)
