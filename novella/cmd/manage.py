"""`novella manage`: database and cells v2 administration, as nova-manage."""
import logging
import os
import uuid

import sqlalchemy as sa

from novella.db import api_models as am
from novella.db import cell_models as cm
from novella.db import cells as cells_mod
from novella.db import migrate
from novella.cmd.manage_cli import (CONFIG_ERROR, CommandError, command, mask_url, mask_url_in,
                                    require_api, table)
from novella.db.cells import CELL0_UUID

LOG = logging.getLogger(__name__)


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
    """Map a new cell to ``database_connection`` and ``transport_url`` and make its
    schema; the mapping is written only once the schema is there. CommandError
    (code 1) when either is missing or no URL, or the database cannot be reached;
    (code 2) when another cell already uses that database or that combination."""
    if not transport_url:
        raise CommandError("Must specify --transport-url if [DEFAULT]/transport_url is not "
                           "set in the configuration file.", 1)
    if not database_connection:
        raise CommandError("Must specify --database_connection if [database]/connection is "
                           "not set in the configuration file.", 1)
    if not _valid_url(database_connection):
        raise CommandError(f"Invalid database connection URL: {mask_url(database_connection)}", 1)
    db = cells_mod.database(api_url)
    with db.session() as s:
        taken = s.execute(sa.select(am.CellMapping.uuid, am.CellMapping.name,
                                    am.CellMapping.transport_url,
                                    am.CellMapping.database_connection)).all()
    wanted = _same_database_key(database_connection)
    for uuid_, other, transport, url in taken:
        if transport == transport_url and url == database_connection:
            raise CommandError("The specified transport_url and/or database_connection "
                               "combination already exists for another cell with uuid "
                               f"{uuid_}.", 2)
        if _valid_url(url) and _same_database_key(url) == wanted:
            raise CommandError(f"The database {mask_url(database_connection)} is already "
                               f"the database of cell {other or ''} ({uuid_}): each cell "
                               "needs a database of its own.", 2)
    try:
        migrate.sync("cell", database_connection)
    except sa.exc.SQLAlchemyError as exc:
        reason = getattr(exc, "orig", None) or exc.__class__.__name__
        raise CommandError(f"Unable to reach or create the schema of the cell database "
                           f"{mask_url(database_connection)}: {reason}. No cell was "
                           "mapped.", 1) from exc
    with db.session(write=True) as s:
        cell = am.CellMapping(uuid=str(uuid.uuid4()), name=name, transport_url=transport_url,
                              database_connection=database_connection, disabled=disabled)
        s.add(cell)
    return cell


def _same_database_key(url):
    """What names one database whatever the driver, options or credentials: the
    backend, host, port and database name (a SQLite file by its absolute path)."""
    parsed = sa.engine.make_url(url)
    backend = parsed.get_backend_name()
    name = parsed.database or ""
    if backend == "sqlite" and name not in ("", ":memory:"):
        name = os.path.abspath(name)
    return backend, parsed.host or "", parsed.port, name


def list_cells(api_url):
    return cells_mod.list_cells(cells_mod.database(api_url))


def discover_hosts(api_url, cell_uuid=None, unreachable=None):
    """Map every compute host found in a cell's services table to that cell.

    A cell whose database cannot be read is passed over (logged, and added to
    ``unreachable`` as (cell, error) when a list is given): the others are still
    discovered."""
    api_db = cells_mod.database(api_url)
    added = []
    for cell in cells_mod.list_cells(api_db, include_cell0=False):
        if cell_uuid and cell.uuid != cell_uuid:
            continue
        try:
            added += _discover_in_cell(api_db, cell)
        except sa.exc.SQLAlchemyError as exc:
            LOG.warning("cell %s (%s) could not be read: %s", cell.name, cell.uuid,
                        mask_url_in(str(exc)))
            if unreachable is not None:
                unreachable.append((cell, exc))
    return added


def _discover_in_cell(api_db, cell):
    cell_db = cells_mod.cell_database(cell)
    with cell_db.session() as s:
        hosts = set(s.scalars(sa.select(cm.Service.host).where(
            cm.Service.binary == "nova-compute", cm.Service.deleted == 0)))
    added = []
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
def _database_option(p, help_text):
    p.add_argument("--database_connection", "--database-connection", dest="database_connection",
                   help=help_text)


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
    cell = create_cell(require_api(api_url), args.name, args.transport_url or CONF.transport_url,
                       args.database_connection or CONF.database.connection,
                       disabled=args.disabled)
    if args.verbose:
        print(cell.uuid)


def _list_cells(args, api_url):
    shown = (lambda url: url) if args.verbose else mask_url
    rows = [(c.name or "", c.uuid, shown(c.transport_url), shown(c.database_connection),
             c.disabled) for c in sorted(list_cells(require_api(api_url)),
                                         key=lambda c: c.name or "")]
    print(table(["Name", "UUID", "Transport URL", "Database Connection", "Disabled"], rows))


def _discover_hosts(args, api_url):
    say = print if args.verbose else (lambda *_: None)
    api_url = require_api(api_url)
    cells = [c for c in cells_mod.list_cells(cells_mod.database(api_url), include_cell0=False)
             if not args.cell_uuid or c.uuid == args.cell_uuid]
    if args.cell_uuid and not cells:
        raise CommandError(f"Cell with uuid {args.cell_uuid} was not found.", 1)
    say(f"Found {len(cells)} cell mapping(s).")
    unreachable = []
    added = discover_hosts(api_url, args.cell_uuid, unreachable)
    for cell_name, host in added:
        print(f"Mapped host {host} to cell {cell_name}.")
    for cell, exc in unreachable:
        print(f"Cell {cell.name or ''} ({cell.uuid}) could not be read, its hosts were not "
              f"looked for: {type(exc).__name__}: "
              f"{mask_url_in(str(getattr(exc, 'orig', None) or exc))}")
    say(f"Mapped {len(added)} new host(s).")
    print("Host discovery complete.")
    if (args.strict and not added) or unreachable:
        return 1
    return 0


def _group(groups, name, help_text):
    """A command group (`novella manage NAME COMMAND`)."""
    return groups.add_parser(name, help=help_text, description=help_text).add_subparsers(
        dest="action", required=True)


def add_commands(groups):
    """The `novella manage` command groups, on an argparse sub-parsers object."""
    from novella.cmd import manage_bootstrap, manage_cells, manage_db, manage_placement
    command(_group(groups, "api_db", "The API database."), "sync", _api_db_sync,
            "Create or upgrade the schema of the API database, and of the embedded image, "
            "network and volume services' tables (in the API database unless their "
            "[image_service], [network_service] or [volume_service] connection says otherwise).")
    db = _group(groups, "db", "The cell databases: schema, archiving and purging of deleted "
                              "rows.")
    _database_option(command(db, "sync", _db_sync,
                             "Create or upgrade the schema of every cell database (cell0 and "
                             "each mapped cell), and of [database] connection."),
                     "A cell database to sync too.")
    manage_db.add_commands(db)
    cell = _group(groups, "cell_v2", "Cells v2: the cell mappings, and the host and instance "
                                     "mappings that say which cell holds what.")
    _database_option(command(cell, "map_cell0", _map_cell0,
                             "Map cell0, where servers that got no host are kept, and make "
                             "its schema."),
                     "cell0's database connection URL; [database] connection with _cell0 "
                     "appended to its database name if not given.")
    p = command(cell, "create_cell", _create_cell,
                "Create a cell mapping to a database and a message transport, and make the "
                "cell database's schema. Exit 0: created; 1: the transport URL or database "
                "connection is missing or unusable; 2: another cell uses that database.")
    p.add_argument("--name", help="A name for the cell.")
    p.add_argument("--transport-url", "--transport_url", dest="transport_url",
                   help="The cell's message transport URL; [DEFAULT] transport_url if not "
                        "given.")
    _database_option(p, "The cell's database connection URL; [database] connection if "
                        "not given.")
    p.add_argument("--verbose", action="store_true",
                   help="Print the UUID of the cell mapping created.")
    p.add_argument("--disabled", action="store_true",
                   help="Create the cell disabled: the scheduler places no new server in it.")
    command(cell, "list_cells", _list_cells,
            "List the cells, their transports and databases (passwords masked).").add_argument(
        "--verbose", action="store_true",
        help="Show the transport URLs and database connections with their passwords.")
    p = command(cell, "discover_hosts", _discover_hosts,
                "Map the compute hosts of each cell's services table that no host mapping "
                "names yet. Exit 0, or 1 with --strict when no new host was mapped.")
    p.add_argument("--cell_uuid", "--cell-uuid", dest="cell_uuid",
                   help="Look in this cell only.")
    p.add_argument("--verbose", action="store_true",
                   help="Say what is looked at, as well as what is mapped.")
    p.add_argument("--strict", action="store_true",
                   help="Exit 1 unless at least one new host was mapped.")
    p.add_argument("--by-service", "--by_service", dest="by_service", action="store_true",
                   help="Find hosts by their nova-compute service records (what discovery "
                        "always reads here).")
    manage_cells.add_commands(cell)
    manage_placement.add_commands(_group(
        groups, "placement", "Placement's books as the cells see them: orphaned allocations "
                             "and missing or wrong ones."))
    manage_bootstrap.add_command(groups)
