"""The `novella` command.

    novella up [--data-dir DIR]                 the whole system in one process
    novella up --separate --database URL --transport URL [--keystone]
                                                each service in a process of its own
    novella serve api|placement|conductor|scheduler|compute|image|network|volume|optimize|novncproxy|serialproxy [--config-file F]
    novella drain --source-cell CELL [--target-cell CELL] ...   (docs/drain.md)
    novella image build-guest [--output DIR] [--config-file F]  (docs/real-guests.md)
    novella manage [--config-file F] api_db sync
    novella manage [--config-file F] db sync|archive_deleted_rows|purge
    novella manage [--config-file F] cell_v2 map_cell0|create_cell|list_cells|discover_hosts|
        verify_instance|list_hosts|delete_host|delete_cell|update_cell
    novella manage [--config-file F] placement audit|heal_allocations
    novella manage [--config-file F] bootstrap
    (docs/manage.md)
"""
import argparse
import sys
import textwrap


def _manage(args):
    from oslo_config import cfg

    from novella.cmd import manage_cli
    from novella.conf import CONF, parse_args
    try:
        parse_args([], default_config_files=args.config_file)
    except cfg.Error as exc:
        print(f"error: the configuration cannot be read: {exc}")
        sys.exit(manage_cli.CONFIG_ERROR)
    api_url = args.api_database_connection or CONF.api_database.connection
    code = args.run(args, api_url)
    if code:
        sys.exit(code)


def _serve(args):
    from novella.cmd import serve
    serve.main(args)


def _drain(args):
    from novella.cmd import drain
    sys.exit(drain.main(args))


def _image(args):
    from novella.cmd import image
    sys.exit(image.main(args))


def _up(args):
    if args.separate:
        from novella.cmd import separate
        return separate.main(args)
    from novella.cmd import up
    up.main(args)


# What each `novella serve SERVICE` runs (novella.endpoints.SERVE: the HTTP APIs' ports).
SERVE_SERVICES = {
    "api": "the Compute API (nova-api)",
    "placement": "Placement, reading placement.conf",
    "image": "the image service's HTTP API (Glance's)",
    "network": "the network service's HTTP API (Neutron's)",
    "volume": "the volume service's HTTP API (Cinder's)",
    "optimize": "the Infrastructure Optimization API (drains, the dashboard)",
    "conductor": "the super-conductor (nova-conductor), on [DEFAULT] transport_url",
    "scheduler": "the scheduler (nova-scheduler), on [DEFAULT] transport_url",
    "compute": "one compute host (nova-compute) of the cell [database] connection names",
    "novncproxy": "the VNC console proxy and noVNC's pages (nova-novncproxy)",
    "serialproxy": "the serial console proxy (nova-serialproxy)",
}


def _serve_services_help():
    from novella.endpoints import CONSOLE_PROXIES, PORTS, SERVE
    api_ports = {name: port for name, _offset, port in PORTS}
    proxy_ports = {name: port for name, _offset, port in CONSOLE_PROXIES}
    lines = []
    for service, what in SERVE_SERVICES.items():
        # A service's own name may be an API's ("compute"): only SERVE says which it runs.
        port = api_ports[SERVE[service]] if service in SERVE else proxy_ports.get(service)
        where = f"port {port}" if port else "RabbitMQ"
        lines.append(f"  {service:<11} {where:<10} {what}")
    return "\n".join(lines)


def build_parser():
    p = argparse.ArgumentParser(prog="novella", description="Novella compute control plane: "
                                "the OpenStack Compute and Placement APIs, their services "
                                "and their administration.")
    sub = p.add_subparsers(dest="command", required=True)

    up = sub.add_parser("up", help="run the whole system in one process",
                        description="Run Placement, the Compute API, the conductor, the "
                                    "scheduler, the image, network, volume and optimize APIs "
                                    "and the compute hosts (simulated unless --driver) in one "
                                    "process, on SQLite files in --data-dir, until Ctrl-C; or, "
                                    "with --separate, each service in a process of its own "
                                    "(docs/deploy.md).")
    up.add_argument("--data-dir", default="./novella-data",
                    help="where the databases, disks, clouds.yaml, nova.conf and novella.log "
                         "are kept (default ./novella-data)")
    up.add_argument("--host", default="127.0.0.1", help="address the HTTP APIs listen on")
    up.add_argument("--port-base", type=int, default=0,
                    help="first port of the HTTP APIs (0: the usual OpenStack ports)")
    up.add_argument("--cells", type=int, default=2,
                    help="how many cells (each with a database of its own) to run (default 2)")
    up.add_argument("--hosts-per-cell", type=int, default=2,
                    help="how many compute hosts each cell has (default 2)")
    up.add_argument("--driver", choices=("simulated", "qemu", "kvm"), default="simulated",
                    help="the compute hosts' hypervisor: simulated, or real guests as QEMU "
                         "processes emulated with TCG (qemu) or on KVM (kvm); "
                         "docs/real-guests.md")
    up.add_argument("--config-file", action="append", default=[],
                    help="nova.conf/placement.conf options, as the separate services read them "
                         "(with --separate: read by every service after its own files)")
    up.add_argument("--separate", action="store_true",
                    help="every service in a process of its own, on --database and --transport "
                         "(docs/deploy.md)")
    up.add_argument("--database", help="--separate: the database server, e.g. "
                                       "postgresql://postgres@127.0.0.1:5432")
    up.add_argument("--transport", help="--separate: the RabbitMQ broker, e.g. "
                                        "rabbit://guest:guest@127.0.0.1:5672/")
    up.add_argument("--keystone", action="store_true",
                    help="--separate: run the real Keystone (the keystone package) and "
                         "authenticate every API and service with it")
    up.add_argument("--name", default="novella",
                    help="--separate: prefix of the databases and virtual hosts")
    up.set_defaults(fn=_up)

    serve = sub.add_parser(
        "serve", help="run one service", formatter_class=argparse.RawDescriptionHelpFormatter,
        description=textwrap.fill(
            "Run one service in this process until stopped, configured by its configuration "
            "files (docs/services.md). The services, and where each listens by default "
            "(--bind changes it):") + "\n\n" + _serve_services_help())
    serve.add_argument("service", choices=list(SERVE_SERVICES), metavar="SERVICE",
                       help="the service to run: " + ", ".join(SERVE_SERVICES))
    serve.add_argument("--config-file", action="append", default=[],
                       help="a configuration file to read: nova.conf, or placement.conf for "
                            "placement (may be given several times; later files win)")
    serve.add_argument("--bind", help="HTTP APIs: the HOST:PORT to listen on (default "
                                      "127.0.0.1 and the service's usual port, listed above)")
    serve.add_argument("--host", help="compute only: the compute host's name "
                                      "([DEFAULT] host if not given)")
    serve.add_argument("--workers", type=int, default=None,
                       help="HTTP APIs: worker processes (default: the CPUs, at most 4; "
                            "0: one process, the in-process threaded server)")
    serve.add_argument("--threads", type=int, default=None,
                       help="HTTP APIs: threads per worker process (default 4)")
    serve.set_defaults(fn=_serve)

    from novella.cmd import drain
    drain.add_parser(sub).set_defaults(fn=_drain)
    from novella.cmd import image
    image.add_parser(sub).set_defaults(fn=_image)

    m = sub.add_parser("manage", help="database and cell administration (as nova-manage)",
                       description="Database, cell and placement administration, with "
                                   "nova-manage's commands, options and exit codes "
                                   "(docs/manage.md).")
    m.add_argument("--config-file", action="append", default=[],
                   help="A nova.conf to read (may be given several times; later files win).")
    m.add_argument("--api-database-connection",
                   help="The API database's URL; [api_database] connection if not given.")
    m.set_defaults(fn=_manage)
    from novella.cmd import manage
    manage.add_commands(m.add_subparsers(dest="group", required=True))
    return p


def main(argv=None):
    args = build_parser().parse_args(argv)
    args.fn(args)


if __name__ == "__main__":
    main()
