"""`novella manage cell_v2` verify_instance, list_hosts, delete_host, delete_cell and
update_cell: the reference's options, messages and exit codes (docs/manage.md)."""
import sqlalchemy as sa

from novella.cmd import manage_cli
from novella.cmd.manage_cli import CommandError
from novella.db import api_models as am
from novella.db import cell_models as cm
from novella.db import cells as cells_mod
from novella.db.cells import CELL0_UUID


def _cell(api_db, cell_uuid):
    with api_db.session() as s:
        cell = s.scalars(sa.select(am.CellMapping).where(am.CellMapping.uuid == cell_uuid)).first()
    if cell is None:
        raise CommandError(f"Cell with uuid {cell_uuid} was not found.", 1)
    return cell


def verify_instance(args, api_url):
    """0 mapped and alive; 1 no mapping; 2 mapped to no cell; 3 deleted; 4 archived."""
    say = (lambda *_: None) if args.quiet else print
    api_db = cells_mod.database(manage_cli.require_api(api_url))
    uuid = args.uuid
    with api_db.session() as s:
        mapping = s.scalars(sa.select(am.InstanceMapping)
                            .where(am.InstanceMapping.instance_uuid == uuid)).first()
        cell = s.get(am.CellMapping, mapping.cell_id) if mapping and mapping.cell_id else None
    if mapping is None:
        say(f"Instance {uuid} is not mapped to a cell (upgrade is incomplete) "
            "or instance does not exist")
        return 1
    if cell is None:
        say(f"Instance {uuid} is not mapped to a cell")
        return 2
    with cells_mod.cell_database(cell).session() as s:
        deleted = s.scalar(sa.select(cm.Instance.deleted).where(cm.Instance.uuid == uuid))
    if deleted is None:
        say(f"The instance with uuid {uuid} has been archived.")
        say("However its instance_mapping remains.")
        return 4
    if deleted:
        say(f"The instance with uuid {uuid} has been deleted.")
        say("Execute `novella manage db archive_deleted_rows` command to archive this "
            "deleted instance and remove its instance_mapping.")
        return 3
    say(f"Instance {uuid} is in cell: {cell.name} ({cell.uuid})")
    return 0


def list_hosts(args, api_url):
    api_db = cells_mod.database(manage_cli.require_api(api_url))
    q = (sa.select(am.CellMapping.name, am.CellMapping.uuid, am.HostMapping.host)
         .join(am.HostMapping, am.HostMapping.cell_id == am.CellMapping.id)
         .order_by(am.HostMapping.host))
    if args.cell_uuid:
        q = q.where(am.CellMapping.id == _cell(api_db, args.cell_uuid).id)
    with api_db.session() as s:
        rows = s.execute(q).all()
    print(manage_cli.table(["Cell Name", "Cell UUID", "Hostname"],
                       [(name or "", uuid, host) for name, uuid, host in rows]))
    return 0


def delete_host(args, api_url):
    """0 deleted; 1 no such cell; 2 no such host; 3 host in another cell; 4 host has instances."""
    api_db = cells_mod.database(manage_cli.require_api(api_url))
    cell = _cell(api_db, args.cell_uuid)
    with api_db.session() as s:
        mapping = s.scalars(sa.select(am.HostMapping).where(am.HostMapping.host == args.host)).first()
    if mapping is None:
        raise CommandError(f"The host {args.host} was not found.", 2)
    if mapping.cell_id != cell.id:
        raise CommandError(f"The host {args.host} was not found in the cell {cell.uuid}.", 3)
    cell_db = cells_mod.cell_database(cell)
    with cell_db.session() as s:
        busy = s.scalar(sa.select(sa.func.count()).select_from(cm.Instance).where(
            cm.Instance.host == args.host, cm.Instance.deleted == 0))
    if busy:
        raise CommandError(f"There are instances on the host {args.host}.", 4)
    with cell_db.session(write=True) as s:
        s.execute(sa.update(cm.ComputeNode).where(cm.ComputeNode.host == args.host)
                  .values(mapped=0))
    with api_db.session(write=True) as s:
        s.execute(sa.delete(am.HostMapping).where(am.HostMapping.id == mapping.id))
    return 0


def delete_cell(args, api_url):
    """0 deleted; 1 no such cell; 2 hosts without --force; 3 live instances;
    4 mappings of deleted instances without --force."""
    api_db = cells_mod.database(manage_cli.require_api(api_url))
    cell = _cell(api_db, args.cell_uuid)
    with api_db.session() as s:
        hosts = s.scalar(sa.select(sa.func.count()).select_from(am.HostMapping)
                         .where(am.HostMapping.cell_id == cell.id))
        mapped = s.scalar(sa.select(sa.func.count()).select_from(am.InstanceMapping)
                          .where(am.InstanceMapping.cell_id == cell.id))
    if hosts and not args.force:
        raise CommandError(f"There are existing hosts mapped to cell with uuid {cell.uuid}.", 2)
    cell_db = cells_mod.cell_database(cell)
    if mapped:
        with cell_db.session() as s:
            live = s.scalar(sa.select(sa.func.count()).select_from(cm.Instance)
                            .where(cm.Instance.deleted == 0))
        if live:
            raise CommandError(
                f"There are existing instances mapped to cell with uuid {cell.uuid}.", 3)
        if not args.force:
            raise CommandError(
                f"There are instance mappings to cell with uuid {cell.uuid}, but all instances "
                "have been deleted in the cell.\nSo execute `novella manage db "
                "archive_deleted_rows` to delete the instance mappings.", 4)
    if hosts:
        with cell_db.session(write=True) as s:
            s.execute(sa.update(cm.ComputeNode).values(mapped=0))
    with api_db.session(write=True) as s:
        for model in (am.InstanceMapping, am.HostMapping):
            s.execute(sa.delete(model).where(model.cell_id == cell.id))
        s.execute(sa.delete(am.CellMapping).where(am.CellMapping.id == cell.id))
    return 0


def update_cell(args, api_url):
    """0 updated; 1 no such cell; 2 not saved; 3 URL of another cell; 4 --disable with
    --enable; 5 cell0 enabled or disabled."""
    api_db = cells_mod.database(manage_cli.require_api(api_url))
    cell = _cell(api_db, args.cell_uuid)
    transport_url, db_url = args.transport_url, args.database_connection
    for other in cells_mod.list_cells(api_db):
        if other.uuid != cell.uuid and (
                (db_url and other.database_connection == db_url)
                or (transport_url and other.transport_url == transport_url)):
            raise CommandError(
                "The specified transport_url and/or database_connection combination already "
                f"exists for another cell with uuid {other.uuid}.", 3)
    if args.disable and args.enable:
        raise CommandError("Cell cannot be disabled and enabled at the same time.", 4)
    values = {k: v for k, v in (("name", args.name), ("transport_url", transport_url),
                                ("database_connection", db_url)) if v}
    if args.disable or args.enable:
        if cell.uuid == CELL0_UUID:
            raise CommandError("Cell0 cannot be disabled.", 5)
        if bool(cell.disabled) == bool(args.disable):
            print(f"Cell {cell.uuid} is already {'disabled' if args.disable else 'enabled'}")
        else:
            values["disabled"] = bool(args.disable)
    if not values:
        return 0
    try:
        with api_db.session(write=True) as s:
            s.execute(sa.update(am.CellMapping).where(am.CellMapping.id == cell.id)
                      .values(**values))
    except sa.exc.SQLAlchemyError as exc:
        raise CommandError(f"Unable to update CellMapping: {exc}", 2) from exc
    return 0


def add_commands(cell_v2):
    p = manage_cli.command(
        cell_v2, "verify_instance", verify_instance,
        "Say which cell holds an instance. Exit 0: mapped and alive; 1: no instance "
        "mapping; 2: mapped to no cell yet; 3: deleted; 4: archived, its mapping left.")
    p.add_argument("--uuid", required=True, help="The instance's UUID.")
    p.add_argument("--quiet", action="store_true",
                   help="Print nothing: the exit code alone answers.")
    p = manage_cli.command(cell_v2, "list_hosts", list_hosts,
                           "List the compute hosts mapped to cells, with their cell.")
    p.add_argument("--cell_uuid", "--cell-uuid", dest="cell_uuid",
                   help="List the hosts of this cell only.")
    p = manage_cli.command(
        cell_v2, "delete_host", delete_host,
        "Delete a host's mapping to its cell (discover_hosts can map it again). Exit 0: "
        "deleted; 1: no such cell; 2: no such host; 3: the host is in another cell; "
        "4: instances are on the host.")
    p.add_argument("--cell_uuid", "--cell-uuid", dest="cell_uuid", required=True,
                   help="The cell the host is mapped to.")
    p.add_argument("--host", required=True, help="The compute host's name.")
    p = manage_cli.command(
        cell_v2, "delete_cell", delete_cell,
        "Delete an empty cell's mapping. Exit 0: deleted; 1: no such cell; 2: hosts are "
        "mapped to it; 3: instances live in it; 4: only mappings of deleted instances are "
        "left.")
    p.add_argument("--cell_uuid", "--cell-uuid", dest="cell_uuid", required=True,
                   help="The cell to delete.")
    p.add_argument("--force", action="store_true",
                   help="Delete the cell's host mappings, and the mappings of its deleted "
                        "instances, with it (never a live instance's).")
    p = manage_cli.command(
        cell_v2, "update_cell", update_cell,
        "Change a cell mapping's name, transport URL or database, or enable or disable it. "
        "Exit 0: done; 1: no such cell; 2: not saved; 3: another cell's transport URL or "
        "database; 4: --disable with --enable; 5: cell0 cannot be disabled or enabled.")
    p.add_argument("--cell_uuid", "--cell-uuid", dest="cell_uuid", required=True,
                   help="The cell to change.")
    p.add_argument("--name", help="The cell's new name.")
    p.add_argument("--transport-url", "--transport_url", dest="transport_url",
                   help="The cell's new message transport URL.")
    p.add_argument("--database_connection", "--database-connection", dest="database_connection",
                   help="The cell's new database connection URL.")
    p.add_argument("--disable", action="store_true",
                   help="Disable the cell: the scheduler places no new server in it.")
    p.add_argument("--enable", action="store_true",
                   help="Enable the cell again.")
