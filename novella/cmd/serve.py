"""`novella serve SERVICE`: one service per process, over RabbitMQ and a server database.

Each process reads the usual nova.conf options: `[DEFAULT] transport_url`
(the top-level transport for api/conductor/scheduler, the cell's for a
compute), `[api_database] connection`, `[database] connection` (a compute's
cell), `[placement] endpoint_override`. The image, network and volume HTTP
APIs (`serve image|network|volume`) need only the embedded services' options
(`novella.embedded`: the API database unless a service has a connection of
its own) and `[api] auth_strategy`.
"""
import logging
import signal
import sys
import threading

from novella import rpc
from novella.allinone import PORTS
from novella.conf import CONF, parse_args
from novella.db import cells as cells_mod
from novella.db.migrate import EMBEDDED

LOG = logging.getLogger(__name__)


def _placement_client():
    from novella.placement.client import PlacementClient
    if not CONF.placement.endpoint_override:
        sys.exit("error: [placement] endpoint_override is not set")
    return PlacementClient(endpoint=CONF.placement.endpoint_override, token=CONF.placement.token)


def _embedded_services():
    """The image, network and volume services, shared through their databases."""
    from novella.db.migrate import SchemaNotSynced
    from novella.embedded import services_from_conf
    try:
        return services_from_conf(CONF)
    except SchemaNotSynced as exc:
        sys.exit(f"error: {exc}")


def _notifier(transport, publisher_id):
    from novella.rpc.notifier import Notifier
    return Notifier(transport, publisher_id)


def _wait_forever(stoppers):
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    print("Running; Ctrl-C to stop.", flush=True)
    done.wait()
    for stop in stoppers:
        stop()
    rpc.cleanup()


def _serve_http(app, args, name):
    """Serve ``app`` on ``--bind`` (default: the usual port of API ``name``) until stopped."""
    from novella.service import HTTPServer
    default_port = next(port for key, _offset, port in PORTS if key == name)
    host, port = _split(args.bind, default_port)
    srv = HTTPServer(app, host, port, name).start()
    print(f"{name.capitalize()} API listening on {srv.url}", flush=True)
    _wait_forever([srv.stop])


def serve_api(args):
    from novella.api.compute.wsgi import make_app
    api_db = cells_mod.database(CONF.api_database.connection)
    transport = rpc.get_transport(CONF.transport_url)
    image_api, network_api, volume_api = _embedded_services()
    app = make_app(CONF, api_db, transport, network_api=network_api,
                   image_api=image_api, volume_api=volume_api, placement=_placement_client())
    _serve_http(app, args, "compute")


def serve_embedded(args):
    """`novella serve image|network|volume`: one embedded service's HTTP API."""
    from novella.embedded import service_app
    service = dict(zip(EMBEDDED, _embedded_services()))[args.service]
    _serve_http(service_app(CONF, args.service, service), args, args.service)


def serve_conductor(args):
    from novella.conductor.manager import ConductorManager
    from novella.service import Periodic
    api_db = cells_mod.database(CONF.api_database.connection)
    transport = rpc.get_transport(CONF.transport_url)
    image_api, network_api, volume_api = _embedded_services()
    mgr = ConductorManager(CONF, api_db, _placement_client(), network_api=network_api,
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
    api_db = cells_mod.database(CONF.api_database.connection)
    transport = rpc.get_transport(CONF.transport_url)
    mgr = SchedulerManager(CONF, api_db, _placement_client())
    transport.serve("scheduler", CONF.host or "scheduler", mgr)
    print(f"Scheduler serving on {transport.url.split('@')[-1]}", flush=True)
    _wait_forever([])


def serve_compute(args):
    from novella.compute.manager import ComputeManager
    from novella.service import Periodic
    from novella.virt.simulated import SimulatedDriver
    host = args.host or CONF.host
    if not host:
        sys.exit("error: give --host NAME or [DEFAULT] host")
    if not CONF.database.connection:
        sys.exit("error: [database] connection (this host's cell database) is not set")
    cell_db = cells_mod.database(CONF.database.connection)
    transport = rpc.get_transport(CONF.transport_url)
    image_api, network_api, volume_api = _embedded_services()
    mgr = ComputeManager(CONF, host, cell_db, _placement_client(), SimulatedDriver(host, CONF),
                         network_api=network_api, volume_api=volume_api, image_api=image_api,
                         notifier=_notifier(transport, f"nova-compute:{host}"), transport=transport)
    mgr.init_host()
    transport.serve("compute", host, mgr)
    periodics = [Periodic(getattr(mgr, name), interval, name).start()
                 for name, interval in mgr.periodic_tasks.items()]
    print(f"Compute host {host} serving; run `novella manage cell_v2 discover_hosts` "
          "once to map it to its cell.", flush=True)
    _wait_forever([p.stop for p in periodics])


def _split(bind, default_port):
    host, _, port = (bind or f"127.0.0.1:{default_port}").rpartition(":")
    return host or "127.0.0.1", int(port)


def main(args):
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    if args.service == "placement":
        from novella.placement import cmd as placement_cmd
        argv = ["serve", "placement"]
        for f in args.config_file:
            argv += ["--config-file", f]
        if args.bind:
            argv += ["--bind", args.bind]
        return placement_cmd.main(argv)
    parse_args([], default_config_files=args.config_file)
    {"api": serve_api, "conductor": serve_conductor, "scheduler": serve_scheduler,
     "compute": serve_compute, "image": serve_embedded, "network": serve_embedded,
     "volume": serve_embedded}[args.service](args)
