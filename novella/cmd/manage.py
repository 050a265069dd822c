"""`novella manage`: database and cells v2 administration, as nova-manage."""
import datetime
import uuid

import sqlalchemy as sa

from novella.db import api_models as am
from novella.db import cell_models as cm
from novella.db import cells as cells_mod
from novella.db import migrate
from novella.db.cells import CELL0_UUID


def api_db_sync(api_url, service_urls=None):
    """The API database, then the embedded image, network and volume services'
    tables: in the API database, unless ``service_urls`` ({name: url}, as
    ``novella.embedded.service_connections`` gives) puts a service elsewhere."""
    migrate.sync("api", api_url)
    service_urls = service_urls or {}
    for name in migrate.EMBEDDED:
        migrate.sync(name, service_urls.get(name) or api_url)


def cell_db_sync(api_url, cell_urls=()):
    """Sync cell0 and every mapped cell (and any extra URLs given)."""
    urls = list(cell_urls)
    if api_url:
        db = cells_mod.database(api_url)
        urls += [c.database_connection for c in cells_mod.list_cells(db)]
    for url in dict.fromkeys(urls):
        migrate.sync("cell", url)
    return urls


class CommandError(Exception):
    """A command cannot go on: its message is printed and it exits with ``code``."""

    def __init__(self, message, code=1):
        super().__init__(message)
        self.code = code


def cell0_url(main_url):
    """cell0's database URL derived from a cell's: its database name + ``_cell0``
    (``nova.db`` -> ``nova_cell0.db`` for SQLite files). CommandError when the
    URL is unset or names no database."""
    if not main_url:
        raise CommandError("Cannot derive the cell0 database connection: [database] connection "
                           "is not set; pass --database_connection or set it.")
    try:
        url = sa.engine.make_url(main_url)
    except sa.exc.ArgumentError as exc:
        raise CommandError(f"Cannot derive the cell0 database connection from [database] "
                           f"connection: {exc}") from exc
    name = url.database
    if not name or name == ":memory:":
        raise CommandError("Cannot derive the cell0 database connection: [database] connection "
                           "names no database; pass --database_connection.")
    if url.get_backend_name() == "sqlite" and name.endswith(".db"):
        name = name[:-3] + "_cell0.db"
    else:
        name += "_cell0"
    return url.set(database=name).render_as_string(hide_password=False)


def _valid_url(url):
    try:
        sa.engine.make_url(url)
    except sa.exc.ArgumentError:
        return False
    return True


def map_cell0(api_url, database_connection):
    """Map cell0 to ``database_connection`` and make its schema; -> (mapping, created).

    An existing mapping is kept as it is (cell0 is already set up), unless its
    connection is not a usable URL (such as the ``_cell0`` older versions left
    behind), which is then replaced. The schema is made before the mapping is
    written, so a database that cannot be reached leaves no mapping behind.
    """
    if not _valid_url(database_connection):
        raise CommandError(f"Invalid database connection URL for cell0: {database_connection!r}")
    db = cells_mod.database(api_url)
    with db.session() as s:
        cell0 = s.scalars(sa.select(am.CellMapping).where(am.CellMapping.uuid == CELL0_UUID)).first()
    if cell0 is not None and _valid_url(cell0.database_connection):
        return cell0, False
    try:
        migrate.sync("cell", database_connection)
    except sa.exc.SQLAlchemyError as exc:
        raise CommandError(f"Unable to sync cell0 schema: {exc}") from exc
    with db.session(write=True) as s:
        cell0 = s.scalars(sa.select(am.CellMapping).where(am.CellMapping.uuid == CELL0_UUID)).first()
        if cell0 is None:
            cell0 = am.CellMapping(uuid=CELL0_UUID, name="cell0", transport_url="none:///",
                                   database_connection=database_connection)
            s.add(cell0)
        else:
            cell0.database_connection = database_connection
    return cell0, True


def create_cell(api_url, name, transport_url, database_connection, disabled=False):
    db = cells_mod.database(api_url)
    with db.session(write=True) as s:
        existing = s.scalars(sa.select(am.CellMapping).where(
            am.CellMapping.database_connection == database_connection,
            am.CellMapping.transport_url == transport_url)).first()
        if existing is not None:
            raise ValueError(f"The specified transport_url and/or database_connection "
                             f"combination already exists for another cell with uuid {existing.uuid}.")
        cell = am.CellMapping(uuid=str(uuid.uuid4()), name=name, transport_url=transport_url,
                              database_connection=database_connection, disabled=disabled)
        s.add(cell)
    migrate.sync("cell", database_connection)
    return cell


def list_cells(api_url):
    return cells_mod.list_cells(cells_mod.database(api_url))


def discover_hosts(api_url, cell_uuid=None):
    """Map every compute host found in a cell's services table to that cell."""
    api_db = cells_mod.database(api_url)
    added = []
    for cell in cells_mod.list_cells(api_db, include_cell0=False):
        if cell_uuid and cell.uuid != cell_uuid:
            continue
        cell_db = cells_mod.cell_database(cell)
        with cell_db.session() as s:
            hosts = set(s.scalars(sa.select(cm.Service.host).where(
                cm.Service.binary == "nova-compute", cm.Service.deleted == 0)))
        with api_db.session(write=True) as s:
            known = set(s.scalars(sa.select(am.HostMapping.host)))
            for host in sorted(hosts - known):
                s.add(am.HostMapping(cell_id=cell.id, host=host))
                added.append((cell.name, host))
        with cell_db.session(write=True) as s:
            s.execute(sa.update(cm.ComputeNode).where(cm.ComputeNode.mapped == 0)
                      .values(mapped=1))
    return added


# --- the command line -----------------------------------------------------------------------
def table(headers, rows):
    """An ASCII table, as the reference's commands print them."""
    cells = [[str(v) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+"

    def line(values):
        return "| " + " | ".join(v.ljust(w) for v, w in zip(values, widths)) + " |"
    return "\n".join([rule, line(headers), rule] + [line(r) for r in cells] + [rule])


_DATE_FORMATS = ("%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d", "%Y-%m-%dT%H:%M:%S",
                 "%Y-%m-%dT%H:%M:%S.%f", "%Y-%m-%d %H:%M:%S.%f",
                 "%a %b %d %H:%M:%S %Z %Y", "%a %b %d %H:%M:%S %Y", "%a %d %b %Y %H:%M:%S %Z",
                 "%b %d %Y", "%b %d %Y %H:%M", "%d %b %Y")


def parse_date(text):
    """A --before value: ``YYYY-MM-DD[ HH:MM[:SS]]``, ISO 8601, or what `date` prints.
    Raises ValueError."""
    value = " ".join(text.split())
    for fmt in _DATE_FORMATS:
        try:
            return datetime.datetime.strptime(value, fmt)
        except ValueError:
            continue
    raise ValueError(f"unknown date format: {text!r}")


def require_api(api_url):
    if not api_url:
        raise CommandError("error: [api_database] connection is not set "
                           "(config file or --api-database-connection)")
    return api_url


def command(subparsers, name, fn, help_text=None):
    """A sub-command whose ``fn(args, api_url)`` returns the exit code (None: 0);
    a CommandError prints its message and exits with its code."""
    def run(args, api_url):
        try:
            return fn(args, api_url)
        except CommandError as exc:
            print(exc)
            return exc.code
    p = subparsers.add_parser(name, help=help_text)
    p.set_defaults(run=run)
    return p


def _database_option(p):
    p.add_argument("--database_connection", "--database-connection", dest="database_connection")


def _api_db_sync(args, api_url):
    from novella.conf import CONF
    from novella.embedded import service_connections
    api_db_sync(require_api(api_url), service_connections(CONF, api_url))
    print("API database and the embedded image, network and volume services' "
          "tables are at the newest schema.")


def _db_sync(args, api_url):
    from novella.conf import CONF
    extra = [args.database_connection or CONF.database.connection]
    if not api_url and not args.database_connection:
        require_api(api_url)
    synced = cell_db_sync(api_url, [u for u in extra if u])
    print(f"{len(synced)} cell database(s) are at the newest schema.")


def _map_cell0(args, api_url):
    from novella.conf import CONF
    require_api(api_url)
    url = args.database_connection or cell0_url(CONF.database.connection)
    cell0, created = map_cell0(api_url, url)
    if created:
        print(f"Cell0 is mapped ({cell0.uuid}) to {migrate._hide_password(url)}.")
    else:
        print("Cell0 is already setup")


def _create_cell(args, api_url):
    from novella.conf import CONF
    try:
        cell = create_cell(require_api(api_url), args.name, args.transport_url or CONF.transport_url,
                           args.database_connection or CONF.database.connection)
    except ValueError as exc:
        raise CommandError(f"error: {exc}") from exc
    print(cell.uuid)


def _list_cells(args, api_url):
    rows = list_cells(require_api(api_url))
    print(f"{'Name':<12} {'UUID':<36} {'Transport URL':<40} {'Database Connection':<50} Disabled")
    for c in rows:
        print(f"{c.name or '':<12} {c.uuid:<36} {c.transport_url:<40} "
              f"{c.database_connection:<50} {c.disabled}")


def _discover_hosts(args, api_url):
    for cell_name, host in discover_hosts(require_api(api_url), args.cell_uuid):
        print(f"Mapped host {host} to cell {cell_name}.")
    print("Host discovery complete.")


def add_commands(groups):
    """The `novella manage` command groups, on an argparse sub-parsers object."""
    from novella.cmd import manage_bootstrap, manage_cells, manage_db, manage_placement
    command(groups.add_parser("api_db").add_subparsers(dest="action", required=True),
            "sync", _api_db_sync)
    db = groups.add_parser("db").add_subparsers(dest="action", required=True)
    _database_option(command(db, "sync", _db_sync))
    manage_db.add_commands(db)
    cell = groups.add_parser("cell_v2").add_subparsers(dest="action", required=True)
    _database_option(command(cell, "map_cell0", _map_cell0))
    p = command(cell, "create_cell", _create_cell)
    p.add_argument("--name")
    p.add_argument("--transport-url", "--transport_url", dest="transport_url")
    _database_option(p)
    command(cell, "list_cells", _list_cells)
    command(cell, "discover_hosts", _discover_hosts).add_argument(
        "--cell_uuid", "--cell-uuid", dest="cell_uuid")
    manage_cells.add_commands(cell)
    manage_placement.add_commands(
        groups.add_parser("placement").add_subparsers(dest="action", required=True))
    manage_bootstrap.add_command(groups)
