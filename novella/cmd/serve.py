"""`novella serve SERVICE`: one service per process, over RabbitMQ and a server database.

Each process reads the usual nova.conf options: `[DEFAULT] transport_url`
(the top-level transport for api/conductor/scheduler, the cell's for a
compute), `[api_database] connection`, `[database] connection` (a compute's
cell), and how to reach Placement: `[placement]` keystoneauth options
(`auth_type`, `auth_url`, ...) with Keystone, `[placement] endpoint_override`
without (novella/clients.py). The conductor, scheduler and compute hosts ask
Placement for its versions before they serve: when it does not answer, or
Keystone refuses their credentials, they exit with one `error:` line. They
and the Compute API call the network, volume and image services' HTTP APIs
as `[neutron]`, `[cinder]` and `[glance]` say (keystoneauth options, and
`[service_user]` for the service token: novella/clients.py); a service whose
group says nothing is reached over its database instead. The image, network
and volume HTTP APIs (`serve image|network|volume`) need only the embedded
services' options (`novella.embedded`: the API database unless a service has
a connection of its own) and `[api] auth_strategy`.

`serve optimize` (the Infrastructure Optimization API and its drain engine)
needs the Compute API's options.

The HTTP APIs (api, placement, image, network, volume, optimize) run under gunicorn:
``--workers`` processes (default: the number of CPUs, at most 4), each with
``--threads`` threads (default 4) and HTTP/1.1 keep-alive. The options are
checked and the schemas looked at once, before any worker starts, so a
missing option is one `error:` line; every worker then builds its own
application (its own database connections and message transport).
``--workers 0`` serves from this one process with the in-process threaded
server instead. The same applications are importable for any WSGI server:
`novella.wsgi.compute:application`, `novella.wsgi.placement:application`, ...
"""
import logging
import os
import signal
import sys
import threading

from novella import clients, rpc
from novella.endpoints import PORTS, SERVE
from novella.conf import CONF, parse_args
from novella.db import cells as cells_mod
from novella.db.migrate import EMBEDDED

LOG = logging.getLogger(__name__)

DEFAULT_THREADS = 4


def default_workers():
    return max(1, min(os.cpu_count() or 1, 4))


class ConfigError(Exception):
    """An option a service needs is missing or wrong (the message says which)."""


def _placement_client():
    try:
        return clients.placement_client(CONF)
    except clients.MissingOption as exc:
        raise ConfigError(str(exc)) from None


def _answering_placement():
    """The Placement client, once Placement has answered (through Keystone when
    configured so): a service that needs it fails at start, in one line, rather
    than on its first request."""
    placement = _placement_client()
    try:
        placement.versions()
    except clients.UNREACHABLE + clients.REFUSED as exc:
        raise ConfigError(clients.describe_failure(CONF, exc)) from None
    return placement


def _embedded_services():
    """The image, network and volume services, shared through their databases."""
    from novella.db.migrate import SchemaNotSynced
    from novella.embedded import service_connections, services_from_conf
    missing = [name for name, url in service_connections(CONF).items() if not url]
    if missing:
        raise ConfigError(
            "no database for the %s service%s: set [api_database] connection (where the "
            "image, network and volume services live by default) or %s"
            % (", ".join(missing), "s" if len(missing) > 1 else "",
               ", ".join(f"[{name}_service] connection" for name in missing)))
    try:
        return services_from_conf(CONF)
    except SchemaNotSynced as exc:
        raise ConfigError(str(exc)) from None


def _service_clients():
    """The image, network and volume services as the Compute API, conductor and compute
    hosts use them: over HTTP where ``[glance]``, ``[neutron]``, ``[cinder]`` say where
    they are, else over their databases."""
    try:
        return clients.service_clients(CONF, _embedded_services)
    except clients.MissingOption as exc:
        raise ConfigError(str(exc)) from None


def _notifier(transport, publisher_id):
    from novella.rpc.notifier import Notifier
    return Notifier(transport, publisher_id)


def _wait_forever(stoppers):
    from novella.service import settle_collector
    settle_collector()
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    print("Running; Ctrl-C to stop.", flush=True)
    done.wait()
    for stop in stoppers:
        stop()
    rpc.cleanup()


# -- the HTTP APIs: each a check run once, and a builder run in every worker --------------

def compute_api_builder():
    """Check the Compute API's options and schemas; return the function that
    builds its WSGI application. Raises ConfigError naming what is missing."""
    if not CONF.api_database.connection:
        raise ConfigError("[api_database] connection is not set")
    if not CONF.transport_url:
        raise ConfigError("[DEFAULT] transport_url is not set")
    _placement_client()
    _service_clients()

    def build():
        from novella.api.compute.wsgi import make_app
        api_db = cells_mod.database(CONF.api_database.connection)
        transport = rpc.get_transport(CONF.transport_url)
        image_api, network_api, volume_api = _service_clients()
        return make_app(CONF, api_db, transport, network_api=network_api,
                        image_api=image_api, volume_api=volume_api,
                        placement=_placement_client())
    return build


def optimize_api_builder():
    """The same for the Infrastructure Optimization API (drains, docs/drain.md). Its
    engine moves servers through a Compute API of its own, built as `serve api` builds
    one (the same options), so it needs what the Compute API needs."""
    build_compute = compute_api_builder()

    def build():
        from novella.api.optimize.app import make_app
        from novella.optimize.applier import Engine
        api_db = cells_mod.database(CONF.api_database.connection)
        placement = _placement_client()
        engine = Engine(CONF, api_db, placement, build_compute(),
                        hostname=f"{CONF.host or 'optimize'}:{os.getpid()}")
        engine.start()   # plans left going by a process that died are taken over
        return make_app(CONF, api_db, placement, engine)
    return build


def embedded_api_builder(name):
    """The same for the HTTP API of embedded service ``name`` (image, network, volume)."""
    _embedded_services()

    def build():
        from novella.embedded import service_app
        service = dict(zip(EMBEDDED, _embedded_services()))[name]
        return service_app(CONF, name, service)
    return build


def placement_api_builder(conf):
    """The same for Placement, from its own ConfigOpts (placement.conf). The
    schema is made or upgraded here, once, when ``[placement_database]
    sync_on_startup`` asks for it, and the ledger's counter row written, not
    by every worker at once."""
    import sqlalchemy as sa
    from novella.db import migrate
    from novella.placement import ledger as ledger_mod, wsgi as placement_wsgi
    url = conf.placement_database.connection
    if not url:
        raise ConfigError("[placement_database] connection is not set")
    engine = placement_wsgi._engine(url)
    if conf.placement_database.sync_on_startup:
        migrate.sync("placement", engine=engine)
    try:
        ledger_mod.Ledger(engine).ensure_counter()
    except sa.exc.SQLAlchemyError as exc:
        raise ConfigError(f"the placement database cannot be used ({exc.orig}); with "
                          "[placement_database] sync_on_startup = false, run "
                          "`python -m novella.placement.cmd db sync --config-file FILE` first") from None
    return lambda: placement_wsgi.make_app(conf, sync_db=False)


def _serve_http(build, args, name):
    """Serve the application ``build()`` makes on ``--bind`` (default: the usual
    port of API ``name``) until stopped."""
    default_port = next(port for key, _offset, port in PORTS if key == name)
    host, port = _split(args.bind, default_port)
    label = "Compute" if name == "compute" else name.capitalize()
    workers = default_workers() if args.workers is None else args.workers
    if workers == 0:
        from novella.service import HTTPServer
        srv = HTTPServer(build(), host, port, name).start()
        print(f"{label} API listening on {srv.url}", flush=True)
        _wait_forever([srv.stop])
        return
    from novella.db import engine as engine_mod
    from novella.service import serve_wsgi
    # The checks opened database connections: no worker may inherit them.
    engine_mod.release_connections()
    serve_wsgi(build, host, port, name, workers=workers,
               threads=args.threads or DEFAULT_THREADS,
               ready=lambda url: print(f"{label} API listening on {url}", flush=True))


def serve_conductor(args):
    from novella.conductor.manager import ConductorManager
    from novella.service import Periodic
    api_db = cells_mod.database(CONF.api_database.connection)
    transport = rpc.get_transport(CONF.transport_url)
    image_api, network_api, volume_api = _service_clients()
    mgr = ConductorManager(CONF, api_db, _answering_placement(), network_api=network_api,
                           volume_api=volume_api, image_api=image_api,
                           notifier=_notifier(transport, "nova-conductor"))
    mgr.recover_operations()  # what conductors that died left, once their leases ran out
    transport.serve("conductor", CONF.host or "conductor", mgr)
    # Cross-cell auto-confirm (both cells are in view here), leases, recovery.
    periodics = [Periodic(getattr(mgr, name), interval, name).start()
                 for name, interval in mgr.periodic_tasks.items()]
    print(f"Conductor serving on {transport.url.split('@')[-1]}", flush=True)
    _wait_forever([p.stop for p in periodics])


def serve_scheduler(args):
    from novella.scheduler.manager import SchedulerManager
    from novella.service import Periodic
    api_db = cells_mod.database(CONF.api_database.connection)
    transport = rpc.get_transport(CONF.transport_url)
    mgr = SchedulerManager(CONF, api_db, _answering_placement())
    transport.serve("scheduler", CONF.host or "scheduler", mgr)
    periodics = [Periodic(getattr(mgr, name), interval, name).start()
                 for name, interval in mgr.periodic_tasks.items()]
    print(f"Scheduler serving on {transport.url.split('@')[-1]}", flush=True)
    _wait_forever([p.stop for p in periodics])


def serve_compute(args):
    from novella.virt import pci
    from novella.compute.manager import ComputeManager
    from novella.service import Periodic
    from novella.virt.driver import load_compute_driver
    host = args.host or CONF.host
    if not host:
        raise ConfigError("give --host NAME or [DEFAULT] host")
    if not CONF.database.connection:
        raise ConfigError("[database] connection (this host's cell database) is not set")
    try:
        pci.parse_device_specs(CONF.pci.device_spec)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    cell_db = cells_mod.database(CONF.database.connection)
    transport = rpc.get_transport(CONF.transport_url)
    image_api, network_api, volume_api = _service_clients()
    mgr = ComputeManager(CONF, host, cell_db, _answering_placement(),
                         load_compute_driver(CONF, host), network_api=network_api, volume_api=volume_api, image_api=image_api,
                         notifier=_notifier(transport, f"nova-compute:{host}"), transport=transport)
    mgr.init_host()
    transport.serve("compute", host, mgr)
    periodics = [Periodic(getattr(mgr, name), interval, name).start()
                 for name, interval in mgr.periodic_tasks.items()]
    print(f"Compute host {host} serving; run `novella manage cell_v2 discover_hosts` "
          "once to map it to its cell.", flush=True)
    _wait_forever([p.stop for p in periodics])


def serve_console_proxy(args):
    """The novncproxy or the serialproxy, on its ``[vnc]`` / ``[serial_console]``
    address (or ``--bind``), finding tokens in the cells ``[api_database]`` maps."""
    from novella.console import proxy
    from novella.service import check_port_free
    if not CONF.api_database.connection:
        raise ConfigError("[api_database] connection (where the cells are mapped) is not set")
    if args.service == "novncproxy":
        host, port = CONF.vnc.novncproxy_host, CONF.vnc.novncproxy_port
        types, web = proxy.NOVNC, CONF.web
    else:
        host, port = CONF.serial_console.serialproxy_host, CONF.serial_console.serialproxy_port
        types, web = proxy.SERIAL, None
    if args.bind:
        host, port = _split(args.bind, port)
    check_port_free(host, port, args.service)
    srv = proxy.ConsoleProxy(cells_mod.database(CONF.api_database.connection), types, host,
                             port, web=web, name=args.service).start()
    print(f"{args.service} listening on {srv.url}", flush=True)
    _wait_forever([srv.stop])


def _split(bind, default_port):
    host, _, port = (bind or f"127.0.0.1:{default_port}").rpartition(":")
    return host or "127.0.0.1", int(port)


def _check_port(args):
    """A taken port is said before any database is opened or written."""
    from novella.service import check_port_free
    name = SERVE.get(args.service)
    if name is not None:
        host, port = _split(args.bind, next(p for key, _o, p in PORTS if key == name))
        check_port_free(host, port, name)


def main(args):
    from novella.service import PortInUse
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    try:
        _check_port(args)
        if args.service == "placement":
            from novella.placement import conf as placement_conf
            conf = placement_conf.make_conf(default_config_files=args.config_file)
            return _serve_http(placement_api_builder(conf), args, "placement")
        parse_args([], default_config_files=args.config_file)
        if args.service == "api":
            return _serve_http(compute_api_builder(), args, "compute")
        if args.service == "optimize":
            return _serve_http(optimize_api_builder(), args, "optimize")
        if args.service in EMBEDDED:
            return _serve_http(embedded_api_builder(args.service), args, args.service)
        {"conductor": serve_conductor, "scheduler": serve_scheduler,
         "compute": serve_compute, "novncproxy": serve_console_proxy,
         "serialproxy": serve_console_proxy}[args.service](args)
    except (ConfigError, PortInUse) as exc:
        sys.exit(f"error: {exc}")
