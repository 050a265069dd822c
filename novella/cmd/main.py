"""The `novella` command.

    novella up [--data-dir DIR]                 the whole system in one process
    novella serve api|placement|conductor|scheduler|compute|image|network|volume [--config-file F]
    novella manage [--config-file F] api_db sync | db sync
    novella manage [--config-file F] cell_v2 map_cell0|create_cell|list_cells|discover_hosts
"""
import argparse
import sys


def _manage(args):
    from novella.cmd import manage
    from novella.conf import CONF, parse_args
    parse_args([], default_config_files=args.config_file)
    api_url = args.api_database_connection or CONF.api_database.connection
    if not api_url and not (args.group == "db" and args.database_connection):
        sys.exit("error: [api_database] connection is not set (config file or --api-database-connection)")
    if args.group == "api_db":
        from novella.embedded import service_connections
        manage.api_db_sync(api_url, service_connections(CONF, api_url))
        print("API database and the embedded image, network and volume services' "
              "tables are at the newest schema.")
    elif args.group == "db":
        extra = [args.database_connection or CONF.database.connection]
        synced = manage.cell_db_sync(api_url, [u for u in extra if u])
        print(f"{len(synced)} cell database(s) are at the newest schema.")
    elif args.action == "map_cell0":
        url = args.database_connection or manage._cell0_url(CONF.database.connection or "")
        cell0 = manage.map_cell0(api_url, url)
        print(f"Cell0 is mapped ({cell0.uuid}) to {url}.")
    elif args.action == "create_cell":
        try:
            cell = manage.create_cell(api_url, args.name,
                                      args.transport_url or CONF.transport_url,
                                      args.database_connection or CONF.database.connection)
        except ValueError as exc:
            sys.exit(f"error: {exc}")
        print(cell.uuid)
    elif args.action == "list_cells":
        rows = manage.list_cells(api_url)
        print(f"{'Name':<12} {'UUID':<36} {'Transport URL':<40} {'Database Connection':<50} Disabled")
        for c in rows:
            print(f"{c.name or '':<12} {c.uuid:<36} {c.transport_url:<40} {c.database_connection:<50} {c.disabled}")
    elif args.action == "discover_hosts":
        for cell_name, host in manage.discover_hosts(api_url, args.cell_uuid):
            print(f"Mapped host {host} to cell {cell_name}.")
        print("Host discovery complete.")


def _serve(args):
    from novella.cmd import serve
    serve.main(args)


def _up(args):
    from novella.cmd import up
    up.main(args)


def build_parser():
    p = argparse.ArgumentParser(prog="novella", description="Novella compute control plane")
    sub = p.add_subparsers(dest="command", required=True)

    up = sub.add_parser("up", help="run the whole system in one process")
    up.add_argument("--data-dir", default="./novella-data", help="where databases and disks live")
    up.add_argument("--host", default="127.0.0.1", help="address the HTTP APIs listen on")
    up.add_argument("--port-base", type=int, default=0,
                    help="first port of the HTTP APIs (0: the usual OpenStack ports)")
    up.add_argument("--cells", type=int, default=2)
    up.add_argument("--hosts-per-cell", type=int, default=2)
    up.set_defaults(fn=_up)

    serve = sub.add_parser("serve", help="run one service")
    serve.add_argument("service", choices=["api", "placement", "conductor", "scheduler", "compute",
                                           "image", "network", "volume"])
    serve.add_argument("--config-file", action="append", default=[])
    serve.add_argument("--bind", help="HOST:PORT for HTTP services")
    serve.add_argument("--host", help="compute host name (compute only)")
    serve.set_defaults(fn=_serve)

    m = sub.add_parser("manage", help="database and cell administration")
    m.add_argument("--config-file", action="append", default=[])
    m.add_argument("--api-database-connection")
    msub = m.add_subparsers(dest="group", required=True)
    api_db = msub.add_parser("api_db")
    api_db.add_argument("action", choices=["sync"])
    db = msub.add_parser("db")
    db.add_argument("action", choices=["sync"])
    db.add_argument("--database_connection", "--database-connection", dest="database_connection")
    cell = msub.add_parser("cell_v2")
    cell.add_argument("action", choices=["map_cell0", "create_cell", "list_cells", "discover_hosts"])
    cell.add_argument("--name")
    cell.add_argument("--transport-url", "--transport_url", dest="transport_url")
    cell.add_argument("--database_connection", "--database-connection", dest="database_connection")
    cell.add_argument("--cell_uuid", "--cell-uuid", dest="cell_uuid")
    m.set_defaults(fn=_manage)
    return p


def main(argv=None):
    args = build_parser().parse_args(argv)
    args.fn(args)


if __name__ == "__main__":
    main()
