"""Gabbi fixtures for running Placement's HTTP conformance suite.

The YAML files shipped with the ``openstack-placement`` package name their
fixtures (``APIFixture``, ``AllocationFixture``, ...).  This module provides
classes with those names.  Each fixture:

* builds a brand new Placement WSGI application with its own, empty SQLite
  database (one per YAML file),
* exports the environment variables the YAML files read through
  ``$ENVIRON[...]``,
* creates its sample data by talking HTTP to that application, so the same
  fixtures work against any Placement implementation.

Which implementation is exercised is chosen with ``NOVELLA_GABBI_TARGET``:
``novella`` (default) or ``reference`` (the installed ``openstack-placement``
package, used to prove that these fixtures are faithful).

How requests reach it is chosen with ``NOVELLA_GABBI_SERVER``:

* ``intercept`` (default): in process, through wsgi-intercept, no socket;
* ``threaded``: through a real socket to the in-process threaded HTTP/1.1
  server of the all-in-one (``novella.service.HTTPServer``), one per file;
* ``gunicorn``: through a real socket to ``novella serve placement`` itself,
  a process of its own under gunicorn (two workers, keep-alive) for every
  YAML file, on the file's own fresh database and configuration file
  (:class:`GunicornServer`; the runner takes one with
  :func:`acquire_server`, which starts the next one ahead); the fixture
  seeds its data over HTTP too. Novella only.
"""
import atexit
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid

import webob
import webob.client
from gabbi import fixture as gabbi_fixture

TARGET_ENV = "NOVELLA_GABBI_TARGET"
TARGETS = ("novella", "reference")
SERVER_ENV = "NOVELLA_GABBI_SERVER"
SERVERS = ("intercept", "threaded", "gunicorn")

ADMIN_TOKEN = "admin"
# Microversions used while seeding data.  Aggregates are written with the
# list form (1.1 .. 1.18) because that form leaves the provider generation
# untouched, which is what the suite expects of pre-made aggregates.
_MV_DEFAULT = "1.14"
_MV_AGGREGATES = "1.1"
_MV_RESOURCE_CLASS = "1.7"
_MV_ALLOCATIONS = "1.28"


def current_target():
    target = os.environ.get(TARGET_ENV, "novella").strip().lower() or "novella"
    if target not in TARGETS:
        raise ValueError("%s must be one of %s, not %r"
                         % (TARGET_ENV, ", ".join(TARGETS), target))
    return target


def current_server():
    server = os.environ.get(SERVER_ENV, "intercept").strip().lower() or "intercept"
    if server not in SERVERS:
        raise ValueError("%s must be one of %s, not %r"
                         % (SERVER_ENV, ", ".join(SERVERS), server))
    if server == "gunicorn" and current_target() != "novella":
        raise ValueError("%s=gunicorn runs Novella's own `serve placement`" % SERVER_ENV)
    return server


# The gunicorn server of the YAML file being run (set by the runner, with
# acquire_server, before gabbi builds the file's tests on its port).
SOCKET = {"server": None}


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _scratch_dir():
    """Where the per-file databases live: memory-backed when available."""
    shm = "/dev/shm"
    if os.path.isdir(shm) and os.access(shm, os.W_OK):
        return shm
    return None


def _new_uuid():
    return str(uuid.uuid4())


# ---------------------------------------------------------------------------
# Building the application under test
# ---------------------------------------------------------------------------

def _build_novella(overrides):
    from novella.placement import conf as novella_conf
    from novella.placement import wsgi as novella_wsgi

    conf = novella_conf.make_conf(overrides=overrides)
    app = novella_wsgi.make_app(conf)

    def cleanup():
        # Release the database connections of this file's app, if it
        # shows how; the database file itself is removed by the fixture.
        close = getattr(app, "close", None)
        engine = getattr(getattr(app, "ledger", None), "engine", None)
        if callable(close):
            close()
        elif engine is not None and hasattr(engine, "dispose"):
            engine.dispose()

    return app, cleanup


class _ReferenceState:
    """Process-wide bits of the reference package that must be reset."""
    configured = False


def _build_reference(overrides):
    """Build the reference Placement app on a fresh database.

    The reference keeps a process-global database transaction factory, a
    global policy enforcer and "already synced" flags for traits and
    resource classes.  They are pointed at / reset for the new database so
    every YAML file starts from nothing.
    """
    from oslo_config import cfg
    from oslo_db.sqlalchemy import engines
    from oslo_policy import opts as policy_opts
    from placement import conf as placement_conf
    from placement import db_api
    from placement import deploy
    from placement import policy as placement_policy
    from placement.db.sqlalchemy import migration
    from placement.objects import resource_class as rc_obj
    from placement.objects import trait as trait_obj

    conf = cfg.ConfigOpts()
    placement_conf.register_opts(conf)
    policy_opts.set_defaults(conf)
    for group, values in overrides.items():
        for name, value in values.items():
            conf.set_override(name, value, group=group)
    conf([], default_config_files=[])

    if not _ReferenceState.configured:
        db_api.configure(conf)
        _ReferenceState.configured = True
    engine = engines.create_engine(conf.placement_database.connection)
    unpatch = db_api.placement_context_manager.patch_engine(engine)
    migration.create_schema(engine)
    trait_obj._TRAITS_SYNCED = False
    rc_obj._RESOURCE_CLASSES_SYNCED = False
    placement_policy.reset()
    app = deploy.loadapp(conf)

    def cleanup():
        placement_policy.reset()
        unpatch()
        engine.dispose()

    return app, cleanup


_BUILDERS = {"novella": _build_novella, "reference": _build_reference}


class _Remote:
    """A WSGI app that sends each request to host:port over HTTP."""

    def __init__(self, host, port):
        self.host, self.port = host, port

    def __call__(self, environ, start_response):
        environ = dict(environ, SERVER_NAME=self.host, SERVER_PORT=str(self.port),
                       HTTP_HOST="%s:%s" % (self.host, self.port))
        return webob.client.send_request_app(environ, start_response)


def _conf_text(overrides):
    lines = []
    for group, values in overrides.items():
        lines.append("[%s]" % group)
        for name, value in values.items():
            if isinstance(value, (list, tuple)):
                value = ",".join(value)
            lines.append("%s = %s" % (name, value))
    return "\n".join(lines) + "\n"


class GunicornServer:
    """`novella serve placement` under gunicorn, as operators run it: its own
    process (two workers of two threads, keep-alive), port, `placement.conf`
    and fresh SQLite database, configured as ``fixture_class`` asks. One
    serves one YAML file and is then stopped."""

    def __init__(self, fixture_class):
        self.fixture_class = fixture_class
        self.key = server_key(fixture_class)
        self.workdir = tempfile.mkdtemp(prefix="placement-gabbi-",
                                        dir=_scratch_dir())
        self.port = free_port()
        probe = fixture_class()
        probe.workdir = self.workdir
        probe.write_policy()
        conf = os.path.join(self.workdir, "placement.conf")
        with open(conf, "w") as f:
            f.write(_conf_text(probe.config_overrides()))
        self.log_path = os.path.join(self.workdir, "serve.log")
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "novella.cmd.main", "serve", "placement",
             "--config-file", conf, "--bind", "127.0.0.1:%d" % self.port,
             "--workers", "2", "--threads", "2"],
            stdout=self._log, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout=120):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.proc.poll() is None:
            with open(self.log_path) as f:
                if "Placement API listening on" in f.read():
                    return _Remote("127.0.0.1", self.port)
            time.sleep(0.02)
        with open(self.log_path) as f:
            log = f.read()[-3000:]
        self.stop()
        raise RuntimeError("serve placement did not start:\n" + log)

    def stop(self):
        """Ask gunicorn to stop (SIGINT: its quick shutdown) without waiting."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        _STOPPING.append(self)

    def reap(self, wait=0.0):
        """True once the process has exited and its files are gone."""
        try:
            self.proc.wait(wait) if wait else None
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        if self.proc.poll() is None:
            return False
        self._log.close()
        shutil.rmtree(self.workdir, ignore_errors=True)
        return True


def server_key(fixture_class):
    """What makes two servers interchangeable: the configuration and the
    policy file the fixture asks for, apart from where its files live."""
    probe = fixture_class()
    probe.workdir = "@WORKDIR@"
    return json.dumps([probe.config_overrides(), probe.policy()],
                      sort_keys=True)


# One server (with a database of its own) per YAML file, and one started
# ahead, configured as APIFixture (most files), which the next file takes if
# it asks for that configuration: its start-up overlaps the file before.
_SPARE = {"server": None}
_STOPPING = []


def acquire_server(fixture_class):
    """A freshly started server for one YAML file whose fixture is
    ``fixture_class``; ``SOCKET["server"]`` is where the fixture finds it."""
    _reap_stopped()
    spare, _SPARE["server"] = _SPARE["server"], None
    if spare is not None and spare.key != server_key(fixture_class):
        spare.stop()
        spare = None
    for attempt in range(3):
        server = spare or GunicornServer(fixture_class)
        spare = None
        try:
            server.wait_ready()
            break
        except RuntimeError as exc:
            # The free port taken meanwhile by another process: another one.
            if "already in use" not in str(exc) or attempt == 2:
                raise
    SOCKET["server"] = server
    return server


def release_server(server):
    """Stop the file's server and start the next one ahead."""
    SOCKET["server"] = None
    server.stop()
    if _SPARE["server"] is None:
        _SPARE["server"] = GunicornServer(APIFixture)


def stop_servers():
    """Stop every server this process started, and wait for them."""
    if _SPARE["server"] is not None:
        _SPARE["server"].stop()
        _SPARE["server"] = None
    while _STOPPING:
        _STOPPING.pop().reap(wait=30)


def _reap_stopped():
    _STOPPING[:] = [s for s in _STOPPING if not s.reap()]


atexit.register(stop_servers)


class _StrictHeaders:
    """WSGI wrapper insisting on native ``str`` status and headers."""

    def __init__(self, app):
        self.app = app

    def __call__(self, environ, start_response):
        def checking_start_response(status, headers, exc_info=None):
            if not isinstance(status, str):
                raise TypeError("WSGI status must be str: %r" % (status,))
            for name, value in headers:
                if not isinstance(name, str) or not isinstance(value, str):
                    raise TypeError("WSGI header must be (str, str): %r"
                                    % ((name, value),))
            if exc_info is None:
                return start_response(status, headers)
            return start_response(status, headers, exc_info)

        return self.app(environ, checking_start_response)


# The application of the YAML file being run in this process.  Gabbi asks
# for its WSGI app when it builds the tests, before any fixture starts, so
# it is handed a dispatcher that forwards to whatever app is current.
_CURRENT = {"app": None}


def _dispatch(environ, start_response):
    app = _CURRENT["app"]
    if app is None:
        raise RuntimeError("no Placement app: the suite fixture did not start")
    return app(environ, start_response)


def setup_app():
    """Gabbi intercept factory."""
    return _dispatch


# ---------------------------------------------------------------------------
# Talking to the app while seeding data
# ---------------------------------------------------------------------------

class SeedError(RuntimeError):
    pass


class Seeder:
    """Creates sample data through the Placement HTTP API."""

    def __init__(self, app):
        self.app = app

    def call(self, method, path, body=None, version=_MV_DEFAULT,
             expect=(200, 201, 204)):
        req = webob.Request.blank(path, method=method)
        req.headers["x-auth-token"] = ADMIN_TOKEN
        req.headers["accept"] = "application/json"
        req.headers["openstack-api-version"] = "placement %s" % version
        if body is not None:
            req.body = json.dumps(body).encode("utf-8")
            req.content_type = "application/json"
        resp = req.get_response(self.app)
        if resp.status_int not in expect:
            raise SeedError("%s %s -> %s: %s"
                            % (method, path, resp.status, resp.text[:2000]))
        if resp.body and resp.content_type == "application/json":
            return resp.json
        return None

    def generation(self, rp):
        return self.call("GET", "/resource_providers/%s" % rp)["generation"]

    def provider(self, name, *aggregates, parent=None, rp_uuid=None):
        rp_uuid = rp_uuid or _new_uuid()
        body = {"name": name, "uuid": rp_uuid}
        if parent:
            body["parent_provider_uuid"] = parent
        self.call("POST", "/resource_providers", body)
        if aggregates:
            self.aggregates(rp_uuid, *aggregates)
        return rp_uuid

    def aggregates(self, rp, *aggregates):
        self.call("PUT", "/resource_providers/%s/aggregates" % rp,
                  list(aggregates), version=_MV_AGGREGATES)

    def resource_class(self, name):
        if name.startswith("CUSTOM_"):
            self.call("PUT", "/resource_classes/%s" % name,
                      version=_MV_RESOURCE_CLASS)

    def inventory(self, rp, resource_class, total, **fields):
        self.resource_class(resource_class)
        body = {"resource_class": resource_class, "total": total,
                "max_unit": total}
        body.update(fields)
        body["resource_provider_generation"] = self.generation(rp)
        self.call("POST", "/resource_providers/%s/inventories" % rp, body)

    def traits(self, rp, *names):
        for name in names:
            if name.startswith("CUSTOM_"):
                self.call("PUT", "/traits/%s" % name, version="1.6")
        self.call("PUT", "/resource_providers/%s/traits" % rp,
                  {"traits": list(names),
                   "resource_provider_generation": self.generation(rp)},
                  version="1.6")

    def allocate(self, rp, resources, project_id, user_id, consumer=None):
        consumer = consumer or _new_uuid()
        self.call("PUT", "/allocations/%s" % consumer,
                  {"allocations": {rp: {"resources": dict(resources)}},
                   "project_id": project_id, "user_id": user_id,
                   "consumer_generation": None},
                  version=_MV_ALLOCATIONS)
        return consumer


# ---------------------------------------------------------------------------
# Fixtures
# ---------------------------------------------------------------------------

class APIFixture(gabbi_fixture.GabbiFixture):
    """A fresh, empty Placement service with noauth2 and default policy."""

    #: [oslo_policy] enforce_new_defaults for this fixture.
    secure_rbac = False
    #: Policy rules written to the policy file (None: defaults only).
    policy_rules = None

    def start_fixture(self):
        self._saved_environ = dict(os.environ)
        self._cleanup = None
        self.export_environment()
        if current_server() == "gunicorn":
            # Started by the runner on this file's configuration; it owns
            # its directory and is stopped by the runner.
            server = SOCKET["server"]
            if server is None:
                raise RuntimeError("no server: the runner starts one per file"
                                   " (acquire_server)")
            if server.key != server_key(type(self)):
                raise RuntimeError("the server was started for %s, not %s"
                                   % (server.fixture_class.__name__, type(self).__name__))
            self.workdir = None
            app = _Remote("127.0.0.1", server.port)
        else:
            self.workdir = tempfile.mkdtemp(prefix="placement-gabbi-",
                                            dir=_scratch_dir())
            self.write_policy()
            app, self._cleanup = _BUILDERS[current_target()](
                self.config_overrides())
            _CURRENT["app"] = _StrictHeaders(app)
        self.seed = Seeder(app)
        self.populate()

    def stop_fixture(self):
        _CURRENT["app"] = None
        try:
            if self._cleanup:
                self._cleanup()
        finally:
            if self.workdir:
                shutil.rmtree(self.workdir, ignore_errors=True)
            for name in set(os.environ) - set(self._saved_environ):
                del os.environ[name]
            for name, value in self._saved_environ.items():
                if os.environ.get(name) != value:
                    os.environ[name] = value

    # -- hooks for subclasses -------------------------------------------

    def policy(self):
        """The rules of this fixture's policy file."""
        return self.policy_rules or {}

    def write_policy(self):
        with open(os.path.join(self.workdir, "policy.yaml"), "w") as f:
            json.dump(self.policy(), f, indent=1, sort_keys=True)

    def config_overrides(self):
        return {
            "placement_database": {
                "connection": "sqlite:///%s"
                              % os.path.join(self.workdir, "placement.db"),
            },
            "api": {"auth_strategy": "noauth2"},
            "oslo_policy": {
                "enforce_new_defaults": self.secure_rbac,
                "policy_file": os.path.join(self.workdir, "policy.yaml"),
            },
        }

    def export_environment(self):
        env = os.environ
        for suffix in ("", "1", "2"):
            env["RP_UUID" + suffix] = _new_uuid()
            env["RP_NAME" + suffix] = _new_uuid()
            env["CUSTOM_RES_CLASS" + suffix] = "CUSTOM_IRON_NFV" + suffix
        for name in ("PROJECT_ID", "ADMIN_PROJECT_ID", "SERVICE_PROJECT_ID",
                     "USER_ID", "PROJECT_ID_ALT", "USER_ID_ALT",
                     "INSTANCE_UUID", "MIGRATION_UUID", "CONSUMER_UUID",
                     "PARENT_PROVIDER_UUID", "ALT_PARENT_PROVIDER_UUID"):
            env[name] = _new_uuid()

    def populate(self):
        """Create this fixture's sample data (nothing for the base)."""


class AllocationFixture(APIFixture):
    """One provider (VCPU 10, DISK_GB 2048) already used by three consumers.

    Two consumers belong to USER_ID (DISK_GB 1000 and VCPU 6), a third to
    ALT_USER_ID (DISK_GB 20 + VCPU 1); all three are in PROJECT_ID.
    """

    def populate(self):
        env = os.environ
        env["ALT_USER_ID"] = _new_uuid()
        project, user, alt_user = (env["PROJECT_ID"], env["USER_ID"],
                                   env["ALT_USER_ID"])
        s = self.seed
        rp = s.provider(env["RP_NAME"], rp_uuid=env["RP_UUID"])
        s.inventory(rp, "DISK_GB", 2048, step_size=10, min_unit=10,
                    max_unit=1000)
        s.inventory(rp, "VCPU", 10, max_unit=10)
        env["CONSUMER_0"] = s.allocate(rp, {"DISK_GB": 1000}, project, user)
        env["CONSUMER_ID"] = s.allocate(rp, {"VCPU": 6}, project, user)
        env["ALT_CONSUMER_ID"] = s.allocate(
            rp, {"DISK_GB": 20, "VCPU": 1}, project, alt_user)
        # A provider the tests create themselves.
        env["ALT_RP_UUID"] = _new_uuid()
        env["ALT_RP_NAME"] = _new_uuid()


class SharedStorageFixture(APIFixture):
    """Two compute nodes and two sharing DISK_GB providers in one aggregate.

    cn1 has VCPU/MEMORY_MB and SSE/SSE2 traits; cn2 also has local DISK_GB.
    Each compute node has two NUMA children, each with one PF child
    offering SRIOV_NET_VF.
    """

    def populate(self):
        env, s = os.environ, self.seed
        agg = env["AGG_UUID"] = _new_uuid()
        cn1 = env["CN1_UUID"] = s.provider("cn1", agg)
        cn2 = env["CN2_UUID"] = s.provider("cn2", agg)
        ss = env["SS_UUID"] = s.provider("ss", agg)
        ss2 = env["SS2_UUID"] = s.provider("ss2", agg)
        numas = {}
        for host, cn in (("1", cn1), ("2", cn2)):
            for node in ("1", "2"):
                key = "%s_%s" % (host, node)
                numas[key] = env["NUMA%s_UUID" % key] = s.provider(
                    "numa" + key, parent=cn)
        pfs = []
        for key in ("1_1", "1_2", "2_1", "2_2"):
            pf = env["PF%s_UUID" % key] = s.provider(
                "pf" + key, parent=numas[key])
            pfs.append(pf)
        for cn in (cn1, cn2):
            s.inventory(cn, "VCPU", 24, allocation_ratio=16.0)
            s.inventory(cn, "MEMORY_MB", 128 * 1024, allocation_ratio=1.5)
        s.traits(cn1, "HW_CPU_X86_SSE", "HW_CPU_X86_SSE2")
        s.inventory(cn2, "DISK_GB", 2000, reserved=100, allocation_ratio=1.0)
        for shared in (ss, ss2):
            s.inventory(shared, "DISK_GB", 2000, reserved=100,
                        allocation_ratio=1.0)
            s.traits(shared, "MISC_SHARES_VIA_AGGREGATE")
        for pf in pfs:
            s.inventory(pf, "SRIOV_NET_VF", 8, allocation_ratio=1.0)


class NUMAAggregateFixture(APIFixture):
    """Compute nodes without inventory whose NUMA children carry VCPU.

    cn1 (aggA) and cn2 (aggA, aggB) share ss1 (aggA); NUMA node numa1_1 of
    cn1 is additionally in aggC together with the sharing provider ss2.
    """

    def populate(self):
        env, s = os.environ, self.seed
        agg_a = env["AGGA_UUID"] = _new_uuid()
        agg_b = env["AGGB_UUID"] = _new_uuid()
        agg_c = env["AGGC_UUID"] = _new_uuid()
        cn1 = env["CN1_UUID"] = s.provider("cn1", agg_a)
        cn2 = env["CN2_UUID"] = s.provider("cn2", agg_a, agg_b)
        ss1 = env["SS1_UUID"] = s.provider("ss1", agg_a)
        ss2 = env["SS2_UUID"] = s.provider("ss2", agg_c)
        numas = [
            s.provider("numa1_1", agg_c, parent=cn1),
            s.provider("numa1_2", parent=cn1),
            s.provider("numa2_1", parent=cn2),
            s.provider("numa2_2", parent=cn2),
        ]
        for key, numa in zip(("1_1", "1_2", "2_1", "2_2"), numas):
            env["NUMA%s_UUID" % key] = numa
        for numa in numas:
            s.inventory(numa, "VCPU", 24, allocation_ratio=16.0)
        for shared in (ss1, ss2):
            s.inventory(shared, "DISK_GB", 2000, reserved=100,
                        allocation_ratio=1.0)
            s.traits(shared, "MISC_SHARES_VIA_AGGREGATE")


class NUMANetworkFixture(APIFixture):
    """Two differently shaped compute trees sharing disk via aggregate A.

    cn1 has no inventory of its own: two HW_NUMA_ROOT children with VCPU and
    MEMORY_MB (unusual min_unit/step_size/max_unit), FPGA and VGPU devices
    below them, and an SR-IOV and an OVS agent with bandwidth providers on
    physnets 0-2.  cn2 has VCPU/MEMORY_MB/DISK_GB itself and three NICs with
    PFs offering CUSTOM_VF on physnets 1 and 2.  Some VCPU is already used on
    numa0 and on cn2.  The sharing provider ss1 offers DISK_GB to both.
    """

    def populate(self):
        self.make_trees(None, None)

    def make_trees(self, cn1, cn2):
        env, s = os.environ, self.seed
        agg_a = env["AGGA_UUID"] = _new_uuid()

        ss1 = env["SS1_UUID"] = s.provider("ss1", agg_a)
        s.traits(ss1, "MISC_SHARES_VIA_AGGREGATE")
        s.inventory(ss1, "DISK_GB", 2000)

        # --- cn1: NUMA nodes, devices and network agents -----------------
        if cn1 is None:
            cn1 = s.provider("cn1", agg_a)
        s.aggregates(cn1, agg_a)
        s.traits(cn1, "COMPUTE_VOLUME_MULTI_ATTACH")
        env["CN1_UUID"] = cn1

        numa0 = env["NUMA0_UUID"] = s.provider("numa0", parent=cn1)
        s.traits(numa0, "HW_NUMA_ROOT")
        s.inventory(numa0, "VCPU", 4)
        numa1 = env["NUMA1_UUID"] = s.provider("numa1", parent=cn1)
        s.traits(numa1, "HW_NUMA_ROOT", "CUSTOM_FOO")
        s.inventory(numa1, "VCPU", 4)
        s.inventory(numa0, "MEMORY_MB", 2048, min_unit=512, step_size=256)
        s.inventory(numa1, "MEMORY_MB", 2048, min_unit=256, max_unit=1024)

        project, user = "numafx-project", "numafx-user"
        s.allocate(numa0, {"VCPU": 2}, project, user)

        fpga0 = env["FPGA0_UUID"] = s.provider("fpga0", parent=numa0)
        s.inventory(fpga0, "FPGA", 1)
        pgpu0 = env["PGPU0_UUID"] = s.provider("pgpu0", parent=numa0)
        s.inventory(pgpu0, "VGPU", 8)
        for i in (0, 1):
            fpga = env["FPGA1_%d_UUID" % i] = s.provider(
                "fpga1_%d" % i, parent=numa1)
            s.inventory(fpga, "FPGA", 1)

        sriov = env["SRIOV_AGENT_UUID"] = s.provider(
            "sriov_agent", parent=cn1)
        s.traits(sriov, "CUSTOM_VNIC_TYPE_DIRECT")
        for i in (1, 2):
            esn = env["ESN%d_UUID" % i] = s.provider(
                "esn%d" % i, parent=sriov)
            s.traits(esn, "CUSTOM_PHYSNET%d" % i)
            s.inventory(esn, "NET_BW_EGR_KILOBIT_PER_SEC", 10000 * i)

        ovs = env["OVS_AGENT_UUID"] = s.provider("ovs_agent", parent=cn1)
        s.traits(ovs, "CUSTOM_VNIC_TYPE_NORMAL")
        br_int = env["BR_INT_UUID"] = s.provider("br_int", parent=ovs)
        s.traits(br_int, "CUSTOM_PHYSNET0")
        s.inventory(br_int, "NET_BW_EGR_KILOBIT_PER_SEC", 1000)

        # --- cn2: a plain compute node with NICs -------------------------
        if cn2 is None:
            cn2 = s.provider("cn2")
        s.aggregates(cn2, agg_a)
        s.inventory(cn2, "VCPU", 8)
        s.allocate(cn2, {"VCPU": 3}, project, user)
        s.inventory(cn2, "MEMORY_MB", 2048, min_unit=1024, step_size=128)
        s.inventory(cn2, "DISK_GB", 1000)
        s.traits(cn2, "CUSTOM_FOO")
        env["CN2_UUID"] = cn2

        nics = []
        for i in (1, 2, 3):
            nic = env["NIC%d_UUID" % i] = s.provider("nic%d" % i, parent=cn2)
            s.traits(nic, "CUSTOM_HW_NIC_ROOT")
            nics.append(nic)
        # (nic index, pf suffix, physnet, VF count)
        layout = [(0, "1_1", 1, 4), (0, "1_2", 2, 4),
                  (1, "2_1", 1, 2), (1, "2_2", 2, 2),
                  (1, "2_3", 1, 2), (1, "2_4", 2, 2),
                  (2, "3_1", 1, 8)]
        for nic_index, suffix, physnet, vfs in layout:
            pf = env["PF%s_UUID" % suffix] = s.provider(
                "pf" + suffix, parent=nics[nic_index])
            s.traits(pf, "CUSTOM_PHYSNET%d" % physnet)
            s.inventory(pf, "CUSTOM_VF", vfs)


class DeepNUMANetworkFixture(NUMANetworkFixture):
    """NUMANetworkFixture with cn1 and cn2 below resource-less ancestors.

    gp1 is the root; p1 (parent of cn1) and p2 (parent of cn2) are its
    children.
    """

    def populate(self):
        s = self.seed
        gp1 = s.provider("gp1")
        p1 = s.provider("p1", parent=gp1)
        p2 = s.provider("p2", parent=gp1)
        cn1 = s.provider("cn1", parent=p1)
        cn2 = s.provider("cn2", parent=p2)
        self.make_trees(cn1, cn2)


class NonSharedStorageFixture(APIFixture):
    """Three compute nodes with local VCPU, MEMORY_MB and DISK_GB."""

    def populate(self):
        env, s = os.environ, self.seed
        for name in ("AGGA_UUID", "AGGB_UUID", "AGGC_UUID"):
            env[name] = _new_uuid()
        for i in (1, 2, 3):
            cn = env["CN%d_UUID" % i] = s.provider("cn%d" % i)
        for i in (1, 2, 3):
            cn = env["CN%d_UUID" % i]
            s.inventory(cn, "VCPU", 24)
            s.inventory(cn, "MEMORY_MB", 128 * 1024)
            s.inventory(cn, "DISK_GB", 2000)


class CORSFixture(APIFixture):
    """The CORS middleware enabled for one allowed origin."""

    def config_overrides(self):
        overrides = super().config_overrides()
        overrides["cors"] = {
            "allowed_origin": ["http://valid.example.com"],
            "allow_headers": ["openstack-api-version"],
        }
        return overrides


class GranularFixture(APIFixture):
    """Three compute nodes and three sharing providers for granular requests.

    cn_left (aggA), cn_middle (aggA, aggB), cn_right (aggB, aggC); shared
    disk shr_disk_1 (aggA, SSD), shr_disk_2 (aggA, aggB) and shared network
    shr_net (aggC).
    """

    def populate(self):
        env, s = os.environ, self.seed
        s.resource_class("CUSTOM_NET_MBPS")
        agg_a = env["AGGA"] = _new_uuid()
        agg_b = env["AGGB"] = _new_uuid()
        agg_c = env["AGGC"] = _new_uuid()

        left = env["CN_LEFT"] = s.provider("cn_left", agg_a)
        for rc, total in (("VCPU", 8), ("MEMORY_MB", 4096), ("DISK_GB", 500),
                          ("VGPU", 8), ("SRIOV_NET_VF", 8),
                          ("CUSTOM_NET_MBPS", 4000)):
            s.inventory(left, rc, total)
        s.traits(left, "HW_CPU_X86_AVX", "HW_CPU_X86_AVX2", "HW_GPU_API_DXVA",
                 "HW_NIC_DCB_PFC", "CUSTOM_FOO")

        middle = env["CN_MIDDLE"] = s.provider("cn_middle", agg_a, agg_b)
        for rc, total in (("VCPU", 8), ("MEMORY_MB", 4096),
                          ("SRIOV_NET_VF", 8), ("CUSTOM_NET_MBPS", 4000)):
            s.inventory(middle, rc, total)
        s.traits(middle, "HW_CPU_X86_AVX", "HW_CPU_X86_AVX2",
                 "HW_CPU_X86_SSE", "HW_NIC_ACCEL_TLS")

        right = env["CN_RIGHT"] = s.provider("cn_right", agg_b, agg_c)
        s.inventory(right, "VCPU", 8)
        s.inventory(right, "MEMORY_MB", 4096)
        s.inventory(right, "DISK_GB", 500)
        s.inventory(right, "VGPU", 8, max_unit=2)
        s.traits(right, "HW_CPU_X86_MMX", "HW_GPU_API_DXVA", "CUSTOM_DISK_SSD")

        disk1 = env["SHR_DISK_1"] = s.provider("shr_disk_1", agg_a)
        s.inventory(disk1, "DISK_GB", 1000)
        s.traits(disk1, "MISC_SHARES_VIA_AGGREGATE", "CUSTOM_DISK_SSD")

        disk2 = env["SHR_DISK_2"] = s.provider("shr_disk_2", agg_a, agg_b)
        s.inventory(disk2, "DISK_GB", 1000)
        s.traits(disk2, "MISC_SHARES_VIA_AGGREGATE")

        net = env["SHR_NET"] = s.provider("shr_net", agg_c)
        s.inventory(net, "SRIOV_NET_VF", 16)
        s.inventory(net, "CUSTOM_NET_MBPS", 40000)
        s.traits(net, "MISC_SHARES_VIA_AGGREGATE")


def _placement_rule_names():
    """Names of the Placement policy rules, as published to oslo.policy."""
    from importlib import metadata

    for ep in metadata.entry_points(group="oslo.policy.policies"):
        if ep.name == "placement":
            return [rule.name for rule in ep.load()()]
    raise RuntimeError("no 'placement' entry in oslo.policy.policies")


class OpenPolicyFixture(APIFixture):
    """Every policy rule (except the admin_api base rule) opened to anyone."""

    def policy(self):
        return {name: "@" for name in _placement_rule_names()
                if name != "admin_api"}


class SecureRBACPolicyFixture(APIFixture):
    """The new (secure RBAC) policy defaults enforced."""

    secure_rbac = True


class LegacyRBACPolicyFixture(APIFixture):
    """The deprecated (legacy) policy defaults, stated explicitly."""

    secure_rbac = False


class NeutronQoSMultiSegmentFixture(APIFixture):
    """Four compute trees as Neutron reports them with QoS on segments.

    Each computeN has VCPU 8, MEMORY_MB 4096, DISK_GB 500 and two agent
    children:

    * ``computeN:Open vSwitch agent`` (packet rate 1000, VNIC normal) with
      bridge ``br-ex`` (egress/ingress bandwidth, VNIC normal, a physnet);
    * ``computeN:NIC Switch agent`` (VNIC direct/direct-physical/macvtap)
      with PF ``enp129s0f0`` (bandwidth, the same VNIC types, a physnet).

    compute0 is on CUSTOM_PHYSNET_OTHER, compute1 on MSN_S1, compute2 on
    MSN_S2.  compute3 reaches both segments through a second bridge
    ``br-ex2`` and a second PF ``enp129s0f1``, but with only 1000 kbps on
    each bandwidth provider (5000 / 10000 elsewhere).
    """

    SRIOV_VNICS = ("CUSTOM_VNIC_TYPE_DIRECT",
                   "CUSTOM_VNIC_TYPE_DIRECT_PHYSICAL",
                   "CUSTOM_VNIC_TYPE_MACVTAP")

    def populate(self):
        hosts = [
            # name, bridges [(suffix, physnet)], pfs [(suffix, physnet)],
            # bridge bandwidth, pf bandwidth
            ("compute0", [("br_ex", "OTHER")], [("pf0", "OTHER")],
             5000, 10000),
            ("compute1", [("br_ex", "MSN_S1")], [("pf0", "MSN_S1")],
             5000, 10000),
            ("compute2", [("br_ex", "MSN_S2")], [("pf0", "MSN_S2")],
             5000, 10000),
            ("compute3", [("br_ex", "MSN_S1"), ("br_ex2", "MSN_S2")],
             [("pf0", "MSN_S1"), ("pf1", "MSN_S2")], 1000, 1000),
        ]
        for host, bridges, pfs, bridge_bw, pf_bw in hosts:
            self._host(host, bridges, pfs, bridge_bw, pf_bw)

    def _host(self, host, bridges, pfs, bridge_bw, pf_bw):
        env, s = os.environ, self.seed
        cn = env[host] = s.provider(host)
        s.inventory(cn, "VCPU", 8)
        s.inventory(cn, "MEMORY_MB", 4096)
        s.inventory(cn, "DISK_GB", 500)

        ovs_name = "%s:Open vSwitch agent" % host
        ovs = env[host + ":ovs_agent"] = s.provider(ovs_name, parent=cn)
        s.inventory(ovs, "NET_PACKET_RATE_KILOPACKET_PER_SEC", 1000)
        s.traits(ovs, "CUSTOM_VNIC_TYPE_NORMAL")
        for key, physnet in bridges:
            device = key.replace("_", "-")
            br = env["%s:%s" % (host, key)] = s.provider(
                "%s:%s" % (ovs_name, device), parent=ovs)
            s.inventory(br, "NET_BW_EGR_KILOBIT_PER_SEC", bridge_bw)
            s.inventory(br, "NET_BW_IGR_KILOBIT_PER_SEC", bridge_bw)
            s.traits(br, "CUSTOM_VNIC_TYPE_NORMAL", "CUSTOM_PHYSNET_" + physnet)

        sriov_name = "%s:NIC Switch agent" % host
        sriov = env[host + ":sriov_agent"] = s.provider(sriov_name, parent=cn)
        s.traits(sriov, *self.SRIOV_VNICS)
        for key, physnet in pfs:
            device = "enp129s0f" + key[-1]
            pf = env["%s:%s" % (host, key)] = s.provider(
                "%s:%s" % (sriov_name, device), parent=sriov)
            s.inventory(pf, "NET_BW_EGR_KILOBIT_PER_SEC", pf_bw)
            s.inventory(pf, "NET_BW_IGR_KILOBIT_PER_SEC", pf_bw)
            s.traits(pf, *(self.SRIOV_VNICS + ("CUSTOM_PHYSNET_" + physnet,)))
