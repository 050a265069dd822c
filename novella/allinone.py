"""The whole system in one process: what `novella up` runs.

Placement, the Compute API, the super-conductor, the scheduler and many
compute hosts (simulated, or running real guests with ``[DEFAULT] compute_driver``)
spread over several cells, each cell with its own SQLite database and its own
in-process transport, exactly as separate services would be wired over RabbitMQ. Tests and benchmarks build the same
object without HTTP listeners (``http=False``) and call the WSGI apps directly.
"""
import functools
import json
import logging
import os
import uuid

from novella import rpc
from novella.cmd import manage
from novella.conf import CONF
from novella.db import cells as cells_mod
from novella.db import engine as engine_mod
from novella.endpoints import CONSOLE_PROXIES, PORTS, SERVICES
from novella.service import check_port_free

LOG = logging.getLogger(__name__)

SUPER_TRANSPORT = "inproc://super"

# Flavors for real guests on a small machine (the simulated hosts get
# manage_bootstrap.FLAVORS): flavorid, name, vcpus, memory_mb, root_gb.
REAL_GUEST_FLAVORS = [
    ("1", "m1.tiny", 1, 256, 1),
    ("2", "m1.small", 1, 512, 2),
    ("3", "m1.medium", 2, 1024, 4),
]

# `novella up`'s demo QoS data (docs/qos.md).
DEMO_QOS_POLICY = "bw-guaranteed"
DEMO_PHYSNET_NETWORK = "physnet1-net"



class AllInOne:
    def __init__(self, data_dir, cells=2, hosts_per_cell=2, http=False, bind="127.0.0.1",
                 port_base=0, config_overrides=None, log=print, config_files=(), qos_demo=False):
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
        # The operator's configuration files, read as the separate services read theirs;
        # what the data directory decides (databases, transports) stays as set below.
        self.user_config_files = [os.path.abspath(f) for f in config_files]
        self.qos_demo = qos_demo
        os.makedirs(self.data_dir, exist_ok=True)
        self._configure(config_overrides or {})

    # -- configuration -----------------------------------------------------
    def _url(self, name):
        return f"sqlite:///{os.path.join(self.data_dir, name)}.db"

    def port(self, offset, default):
        return self.port_base + offset if self.port_base else default

    def _configure(self, overrides):
        config_files = []
        if self.http:
            self.urls = {name: f"http://{self.bind}:{self.port(offset, default)}"
                         for name, offset, default in PORTS}
            for name, offset, default in PORTS + CONSOLE_PROXIES:  # before any database is written
                check_port_free(self.bind, self.port(offset, default), name)
            config_files = [self._write_auth_config()]
        self.config_files = config_files + self.user_config_files
        CONF([], project="nova", default_config_files=self.config_files)
        defaults = {
            None: {"state_path": self.data_dir, "transport_url": SUPER_TRANSPORT,
                   "instances_path": os.path.join(self.data_dir, "instances")},
            "api_database": {"connection": self._url("api")},
            "api": {"auth_strategy": "keystone" if self.http else "noauth2"},
        }
        if self.http:
            # The console URLs the hosts answer open this process's proxies.
            ports = {name: self.port(offset, default) for name, offset, default in CONSOLE_PROXIES}
            defaults["vnc"] = {"novncproxy_base_url":
                               f"http://{self.bind}:{ports['novncproxy']}/vnc_lite.html"}
            defaults["serial_console"] = {"enabled": True,
                                          "base_url": f"ws://{self.bind}:{ports['serialproxy']}/"}
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
        # The all-in-one is its databases' only conductor: what a previous run
        # left in the middle is finished or undone now, before anything new starts.
        recovered = self.conductor.recover_operations(previous_owners=True)
        if recovered:
            self.log(f"Recovered {len(recovered)} operations left by the previous run.")
        self._seed_demo_data()
        self._start_api()
        if self.http:
            self._start_periodics()
        from novella.service import settle_collector
        settle_collector()
        return self

    def _start_periodics(self):
        """What each compute service runs on a timer (heartbeats, resources, power states),
        so a long-running all-in-one keeps its hosts up for the scheduler."""
        from novella.service import Periodic
        # The conductor's (cross-cell auto-confirm, its operations' leases, recovery)
        # and the scheduler's (host discovery).
        for role, mgr in (("conductor", self.conductor), ("scheduler", self.scheduler)):
            for name, interval in mgr.periodic_tasks.items():
                if interval and interval > 0:
                    self.periodics.append(Periodic(getattr(mgr, name), interval,
                                                   f"{role}-{name}").start())
        # Heartbeats, resource updates and power state syncs: a few statements per
        # cell per interval for all its hosts here (each cell's at its own offset
        # in the interval).
        from novella.compute import resource_tracker
        per_cell = {"heartbeat": lambda mgrs: functools.partial(
                        type(mgrs[0]).heartbeat_hosts, mgrs),
                    "update_available_resource": lambda mgrs: functools.partial(
                        resource_tracker.update_available_resources, [m.rt for m in mgrs]),
                    "sync_power_states": lambda mgrs: functools.partial(
                        type(mgrs[0]).sync_power_states_hosts, mgrs)}
        by_cell = {}
        for host, mgr in self.computes.items():
            by_cell.setdefault(id(mgr.cell_db), []).append(mgr)
            for name, interval in mgr.periodic_tasks.items():
                if interval and interval > 0 and name not in per_cell:
                    self.periodics.append(Periodic(getattr(mgr, name), interval,
                                                   f"{name}-{host}").start())
        for mgrs in by_cell.values():
            for name, task in per_cell.items():
                interval = mgrs[0].periodic_tasks.get(name)
                if interval and interval > 0:
                    self.periodics.append(Periodic(task(mgrs), interval,
                                                   f"{name}-{mgrs[0].host}").start())

    def _start_placement(self):
        from novella.placement import conf as pconf
        from novella.placement import wsgi as pwsgi
        from novella.placement.client import PlacementClient

        def placement_conf(strategy):
            return pconf.make_conf(
                default_config_files=self.config_files,
                overrides={"placement_database": {"connection": self._url("placement")},
                           "api": {"auth_strategy": strategy},
                           # one request size limit for every API of the all-in-one
                           "oslo_middleware": {"max_request_body_size":
                                               CONF.oslo_middleware.max_request_body_size}})
        # Services inside this process reach placement without a socket and
        # without tokens; the published endpoint validates Keystone tokens.
        internal_app = pwsgi.make_app(placement_conf("noauth2"))
        self.placement = PlacementClient(app=internal_app, token="admin")
        self.placement_app = (pwsgi.make_app(placement_conf("keystone")) if self.http
                              else internal_app)
        self.log("Placement ready (embedded).")

    def _start_databases(self):
        from novella.embedded import service_connections
        api_url = CONF.api_database.connection
        # Also the embedded image, network and volume services' tables.
        manage.api_db_sync(api_url, service_connections(CONF))
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
        # A bound port whose QoS policy is replaced has its allocation changed in placement.
        self.network_api.placement = self.placement

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
        from novella.rpc.notifier import Notifier
        return Notifier(rpc.get_transport(SUPER_TRANSPORT), publisher_id)

    def _start_computes(self):
        from novella.compute import fleet
        for cell in self.cells:
            # A cell's hosts start together (novella/compute/fleet.py), in batches.
            names = [f"{cell.name}-host{hi}" for hi in range(1, self.hosts_per_cell + 1)]
            for k in range(0, len(names), 500):
                mgrs = [self._manager(host, cell) for host in names[k:k + 500]]
                fleet.init_hosts(mgrs)
                for mgr in mgrs:
                    self._serve(mgr, cell)
        self.log(f"Compute hosts: {len(self.computes)} ({self.driver_kind()}).")

    def _compute(self, host, cell, **driver_options):
        mgr = self._manager(host, cell, **driver_options)
        mgr.init_host()
        self._serve(mgr, cell)
        return mgr

    def driver_kind(self):
        """'simulated', or 'real guests (QEMU ...)' with the QEMU driver."""
        from novella.virt import driver as driver_mod
        path = driver_mod.DRIVERS.get(CONF.compute_driver, CONF.compute_driver)
        if path.startswith("novella.virt.qemu."):
            return f"real guests, QEMU with {CONF.libvirt.virt_type}"
        return "simulated"

    def _manager(self, host, cell, **driver_options):
        from novella.compute.manager import ComputeManager
        from novella.virt.driver import load_compute_driver
        driver = load_compute_driver(CONF, host, **driver_options)
        return ComputeManager(CONF, host, cells_mod.cell_database(cell), self.placement, driver,
                              network_api=self.network_api, volume_api=self.volume_api,
                              image_api=self.image_api, notifier=self.notifier(f"nova-compute:{host}"),
                              transport=rpc.get_transport(cell.transport_url))

    def _serve(self, mgr, cell):
        rpc.get_transport(cell.transport_url).serve("compute", mgr.host, mgr)
        self.computes[mgr.host] = mgr

    def add_compute(self, host, cell=None, **driver_options):
        """Start one more compute host in ``cell`` (a cell name, default the
        first cell) and map it; ``driver_options`` as ``SimulatedDriver``'s (``nodename``,
        ``vcpus``, ``memory_mb``, ``local_gb``, ...). Returns its compute manager."""
        target = next(c for c in self.cells if cell is None or c.name == cell)
        mgr = self._compute(host, target, **driver_options)
        manage.discover_hosts(CONF.api_database.connection)
        return mgr

    def _seed_demo_data(self):
        # What `novella manage bootstrap` makes in a deployment of separate services.
        from novella.cmd import manage_bootstrap as bootstrap
        if self.driver_kind() == "simulated":
            bootstrap.ensure_flavors(self.api_db)
            self.demo_image, _created = bootstrap.ensure_image(self.image_api)
        else:
            self._seed_real_guest()
        self.demo_network, self.public_network = bootstrap.seed_networks(CONF, self.network_api)
        if self.qos_demo:
            self.demo_qos_policy, self.demo_physnet_network = self._ensure_demo_qos()

    def _seed_real_guest(self):
        """Real guests: flavors this machine can run (m1.tiny 256 MiB), and the guest
        image built from the installed packages (once: kept under the data directory)
        as the default image."""
        from novella.cmd import manage_bootstrap as bootstrap
        from novella.virt import guest_image
        bootstrap.ensure_flavors(self.api_db, REAL_GUEST_FLAVORS)
        build_dir = os.path.join(self.data_dir, "guest-image")
        if not guest_image.GuestImage.in_dir(build_dir).exists():
            self.log(f"Building the guest image (once, cached in {build_dir}) ...")
        self.demo_image, created = guest_image.ensure_guest_image(self.image_api, build_dir)
        if created:
            self.log(f"Guest image {self.demo_image['name']} uploaded "
                     f"({self.demo_image['size'] >> 10} KiB root disk, kernel and ramdisk).")

    def _ensure_demo_qos(self):
        """A shared QoS policy guaranteeing bandwidth each way, and a network on physnet1
        (administrators': a server of theirs names it, or 'private', to get a port)."""
        from novella.context import get_admin_context
        ctxt, api = get_admin_context(), self.network_api
        policy = next((p for p in api.list_qos_policies(ctxt) if p["name"] == DEMO_QOS_POLICY),
                      None)
        if policy is None:
            policy = api.create_qos_policy(
                ctxt, DEMO_QOS_POLICY, shared=True,
                description="Guarantees 100 Mbit/s each way (minimum bandwidth).",
                rules=[{"type": "minimum_bandwidth", "min_kbps": 100000, "direction": d}
                       for d in ("egress", "ingress")])
        network = next(iter(api.list_networks(ctxt, name=DEMO_PHYSNET_NETWORK)), None)
        if network is None:
            network = api.create_network(ctxt, DEMO_PHYSNET_NETWORK, cidr="10.1.0.0/24",
                                         physical_network="physnet1", network_type="vlan")
        return policy, network

    def _start_api(self):
        from novella.api.compute.wsgi import make_app
        self.compute_api_app = make_app(CONF, self.api_db, self.transport,
                                        network_api=self.network_api, image_api=self.image_api,
                                        volume_api=self.volume_api, placement=self.placement)
        self.volume_api.compute_events = self._send_compute_events
        self._make_service_apps()
        self._start_optimize()
        if not self.http:
            return
        from novella.api.identity.app import IdentityApp
        from novella.service import HTTPServer
        catalog = {stype: (name, self.urls[key] + suffix)
                   for key, (stype, name, suffix) in SERVICES.items()}
        self.identity_app = IdentityApp(self.identity, catalog, conf=CONF)
        apps = {"identity": self.identity_app,
                "compute": self.compute_api_app, "placement": self.placement_app,
                "image": self.image_api_app, "network": self.network_api_app,
                "volume": self.volume_api_app, "optimize": self.optimize_app}
        for name, _offset, _default in PORTS:
            port = int(self.urls[name].rsplit(":", 1)[1])
            self.servers.append(HTTPServer(apps[name], self.bind, port, name).start())
        self._start_console_proxies()
        self._write_clouds_yaml()
        self._write_service_configs()

    def _start_console_proxies(self):
        """The noVNC and serial console proxies (novella/console/proxy.py)."""
        from novella.console import proxy
        for name, types, web in (("novncproxy", proxy.NOVNC, CONF.web),
                                 ("serialproxy", proxy.SERIAL, None)):
            offset, default = next((o, d) for n, o, d in CONSOLE_PROXIES if n == name)
            self.servers.append(proxy.ConsoleProxy(self.api_db, types, self.bind,
                                                   self.port(offset, default), web=web,
                                                   name=name).start())

    def _start_optimize(self):
        """The Infrastructure Optimization API and its engine (docs/drain.md). The engine
        starts with the first audit or plan, or now when a previous run left one going."""
        from novella.api.optimize.app import make_app
        from novella.optimize.applier import Engine
        self.optimize_engine = Engine(CONF, self.api_db, self.placement, self.compute_api_app,
                                      hostname="allinone")
        self.optimize_app = make_app(CONF, self.api_db, self.placement, self.optimize_engine)
        if self.optimize_engine.has_work():
            self.log("Resuming the drains a previous run left going.")
            self.optimize_engine.start()

    def _send_compute_events(self, events):
        """The volume service's external events (volume-extended) to the Compute API,
        as the service user Cinder sends them with."""
        from novella.context import get_admin_context
        from novella.optimize.applier import ComputeClient
        return ComputeClient(self.compute_api_app).call(
            get_admin_context(), "POST", "/os-server-external-events", {"events": events},
            expect=(200, 207))

    def _make_service_apps(self):
        """The image, network and volume HTTP APIs over the embedded services."""
        from novella.embedded import service_app
        self.image_api_app = service_app(CONF, "image", self.image_api)
        self.network_api_app = service_app(CONF, "network", self.network_api)
        self.volume_api_app = service_app(CONF, "volume", self.volume_api)

    # -- identity ------------------------------------------------------------------
    def _write_auth_config(self):
        """Users, and the [keystone_authtoken] section every API validates tokens with."""
        from novella.api.identity.store import IdentityStore
        self.identity = IdentityStore(self._url("identity"))
        secrets_file = os.path.join(self.data_dir, "passwords.json")
        if os.path.exists(secrets_file):
            with open(secrets_file) as f:
                self.passwords = json.load(f)
        else:
            self.passwords = {u: uuid.uuid4().hex[:16] for u in ("admin", "demo", "novella")}
            with open(os.open(secrets_file, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
                json.dump(self.passwords, f)
        self.identity.ensure([
            {"name": "admin", "password": self.passwords["admin"], "project": "admin", "roles": ["admin"]},
            {"name": "demo", "password": self.passwords["demo"], "project": "demo", "roles": ["member"]},
            {"name": "novella", "password": self.passwords["novella"], "project": "service",
             "roles": ["admin", "service"]},
        ])
        path = os.path.join(self.data_dir, "auth.conf")
        with open(path, "w") as f:
            f.write("[keystone_authtoken]\n"
                    f"www_authenticate_uri = {self.urls['identity']}/v3\n"
                    f"auth_url = {self.urls['identity']}/v3\n"
                    "auth_type = password\n"
                    "username = novella\n"
                    f"password = {self.passwords['novella']}\n"
                    "project_name = service\n"
                    "user_domain_name = Default\n"
                    "project_domain_name = Default\n"
                    "service_token_roles_required = true\n"
                    # Every request asks the identity service, so a revoked token
                    # (DELETE /v3/auth/tokens) fails at once in every API.
                    "token_cache_time = -1\n")
        return path

    def _write_clouds_yaml(self):
        """A clouds.yaml with an admin and a demo (member) cloud."""
        def cloud(user):
            return (f"  novella-{user}:\n"
                    "    auth:\n"
                    f"      auth_url: {self.urls['identity']}/v3\n"
                    f"      username: {user}\n"
                    f"      password: {self.passwords[user]}\n"
                    f"      project_name: {user}\n"
                    "      user_domain_name: Default\n"
                    "      project_domain_name: Default\n"
                    "    region_name: RegionOne\n"
                    "    identity_api_version: 3\n")
        self.clouds_yaml = os.path.join(self.data_dir, "clouds.yaml")
        with open(self.clouds_yaml, "w") as f:
            f.write("clouds:\n" + cloud("admin") + cloud("demo"))

    def _write_service_configs(self):
        """nova.conf and placement.conf for `novella manage --config-file` (and a
        `novella serve` of an HTTP API over the same databases): the databases, the
        Keystone credentials of the service user, Placement's address."""
        with open(os.path.join(self.data_dir, "auth.conf")) as f:
            authtoken = f.read()
        credentials = "".join(line for line in authtoken.splitlines(keepends=True)
                              if line.split(" =")[0] in (
                                  "auth_url", "auth_type", "username", "password",
                                  "project_name", "user_domain_name", "project_domain_name"))
        header = ("# Written by `novella up` at each start: the all-in-one's databases and\n"
                  "# credentials. Its transports are in-process (inproc://), so a service\n"
                  "# started with this file shares the databases, not the message bus.\n")
        self.nova_conf = os.path.join(self.data_dir, "nova.conf")
        self.placement_conf = os.path.join(self.data_dir, "placement.conf")
        _write_private(self.nova_conf, header + (
            f"[DEFAULT]\nstate_path = {self.data_dir}\ntransport_url = {SUPER_TRANSPORT}\n\n"
            f"[api_database]\nconnection = {self._url('api')}\n\n"
            f"[database]\nconnection = {self.cells[0].database_connection}\n\n"
            f"[placement]\n{credentials}region_name = RegionOne\n"
            f"endpoint_override = {self.urls['placement']}\n\n" + authtoken))
        _write_private(self.placement_conf, header + (
            f"[placement_database]\nconnection = {self._url('placement')}\n"
            "sync_on_startup = false\n\n[api]\nauth_strategy = keystone\n\n" + authtoken))

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
        if getattr(self, "optimize_engine", None) is not None:
            self.optimize_engine.stop()
        for srv in self.servers:
            srv.stop()
        rpc.cleanup()
        engine_mod.dispose_under(f"sqlite:///{os.path.join(self.data_dir, '')}")
        self.log("Stopped.")

    def endpoints(self):
        return {s.name: s.url for s in self.servers}


def new_id():
    return str(uuid.uuid4())


def dumps(obj):
    return json.dumps(obj, indent=2, sort_keys=True)


def _write_private(path, text):
    """Write ``text`` to ``path``, readable by its owner alone (it holds passwords)."""
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
        f.write(text)
