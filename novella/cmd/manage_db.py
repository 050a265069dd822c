"""`novella manage db archive_deleted_rows` and `db purge` (docs/manage.md).

Without --all-cells they work on the cell database of ``[database]
connection``; with it, on every mapped cell, cell0 included.
"""
import sqlalchemy as sa

from novella.cmd import manage_cli
from novella.cmd.manage_cli import CommandError
from novella.db import archive
from novella.db import cells as cells_mod

MAX_INT = 2 ** 31 - 1


def _before(text, code):
    if not text:
        return None
    try:
        return manage_cli.parse_date(text)
    except ValueError as exc:
        raise CommandError(f"Invalid value for --before: {exc}", code) from exc


def _targets(all_cells, api_db, code):
    """[(label or None, Database)] the command works on."""
    from novella.conf import CONF
    if all_cells:
        try:
            return [(c.name or c.uuid, cells_mod.cell_database(c))
                    for c in sorted(cells_mod.list_cells(api_db), key=lambda c: c.name or "")]
        except sa.exc.SQLAlchemyError as exc:
            raise CommandError(f"Unable to get cell list from API DB. Is it configured? ({exc})",
                               code) from exc
    if not CONF.database.connection:
        raise CommandError("[database] connection is not set: give it, or use --all-cells.",
                           manage_cli.CONFIG_ERROR)
    return [(None, cells_mod.database(CONF.database.connection))]


def _api_db(api_url, code):
    if not api_url:
        raise CommandError("Failed to connect to API DB so aborting this archival attempt. "
                           "Please check your config file to make sure that "
                           "[api_database]/connection is set and run this command again.", code)
    db = cells_mod.database(api_url)
    try:
        with db.connection() as conn:
            conn.execute(sa.text("SELECT 1"))
    except sa.exc.SQLAlchemyError as exc:
        raise CommandError(f"Failed to connect to API DB so aborting this archival attempt: "
                           f"{exc}", code) from exc
    return db


def archive_deleted_rows(args, api_url):
    """0 nothing archived; 1 rows archived; 2 bad --max_rows; 3 no API database; 4 bad --before."""
    if args.max_rows < 1 or args.max_rows > MAX_INT:
        raise CommandError(f"Must supply a positive value for max_rows, at most {MAX_INT}", 2)
    api_db = _api_db(api_url, 3)
    before = _before(args.before, 4)
    archived = {}   # "[cell.]table" -> rows
    total = 0
    targets = _targets(args.all_cells, api_db, 3)
    if args.until_complete and args.verbose:
        print("Archiving..", end="", flush=True)
    for label, cell_db in targets:
        if not args.until_complete and total >= args.max_rows:
            break
        while True:
            budget = args.max_rows if args.until_complete else args.max_rows - total
            counts, uuids = archive.archive_batch(cell_db, budget, before)
            for table, n in counts.items():
                key = f"{label}.{table}" if label else table
                archived[key] = archived.get(key, 0) + n
            total += sum(counts.values())
            if uuids:
                for table, n in archive.forget_instances(api_db, uuids).items():
                    archived["API_DB." + table] = archived.get("API_DB." + table, 0) + n
            if not args.until_complete or not counts:
                break
            if args.verbose:
                print(".", end="", flush=True)
    if args.until_complete and args.verbose:
        print(".complete")
    if args.verbose:
        if archived:
            print(manage_cli.table(["Table", "Number of Rows Archived"], sorted(archived.items())))
        else:
            print("Nothing was archived.")
    if archived and args.purge:
        if args.verbose:
            print("Rows were archived, running purge...")
        _purge(targets, None, args.verbose)
    return 1 if archived else 0


def _purge(targets, before, verbose):
    deleted = 0
    for label, cell_db in targets:
        for table, n in archive.purge(cell_db, before).items():
            if verbose:
                print(f"{'Cell ' + label if label else 'DB'}: Deleted {n} rows from {table}")
            deleted += n
    return deleted


def purge(args, api_url):
    """0 rows deleted; 1 neither --all nor --before; 2 bad --before; 3 nothing purged;
    4 no API database (with --all-cells)."""
    if not args.purge_all and not args.before:
        raise CommandError("Either --before or --all is required", 1)
    before = _before(args.before, 2)
    api_db = None
    if args.all_cells:
        if not api_url:
            raise CommandError("Unable to get cell list from API DB. Is it configured?", 4)
        api_db = cells_mod.database(api_url)
    deleted = _purge(_targets(args.all_cells, api_db, 4), before, args.verbose)
    if not deleted and args.verbose:
        print("Nothing was purged.")
    return 0 if deleted else 3


def add_commands(db):
    p = manage_cli.command(
        db, "archive_deleted_rows", archive_deleted_rows,
        "Move deleted rows from the cell database's tables to its shadow tables, and drop "
        "the API database's records of the instances archived. Exit 0: nothing archived; "
        "1: rows archived (run again); 2: bad --max_rows; 3: no API database; 4: bad "
        "--before.")
    p.add_argument("--max_rows", "--max-rows", dest="max_rows", type=int, default=1000,
                   help="How many deleted rows to archive, at most (default 1000; an "
                        "instance always goes with all its rows). With --until-complete: "
                        "the size of each batch.")
    p.add_argument("--verbose", action="store_true",
                   help="Print a table of the rows archived from each table.")
    p.add_argument("--until-complete", "--until_complete", dest="until_complete",
                   action="store_true",
                   help="Archive in batches of --max_rows until nothing is left.")
    p.add_argument("--before", metavar="DATE",
                   help="Archive only rows deleted before this date (YYYY-MM-DD[ HH:MM[:SS]], "
                        "ISO 8601, or what `date` prints).")
    p.add_argument("--purge", action="store_true",
                   help="Once rows were archived, delete every row of the shadow tables.")
    p.add_argument("--all-cells", "--all_cells", dest="all_cells", action="store_true",
                   help="Archive in every mapped cell's database, cell0 included, instead "
                        "of [database] connection.")
    p = manage_cli.command(
        db, "purge", purge,
        "Delete rows from the shadow tables that archive_deleted_rows fills. Exit 0: rows "
        "deleted; 1: neither --all nor --before; 2: bad --before; 3: nothing to purge; "
        "4: --all-cells without an API database.")
    p.add_argument("--all", dest="purge_all", action="store_true",
                   help="Delete every archived row.")
    p.add_argument("--before", metavar="DATE",
                   help="Delete the archived rows deleted before this date (same formats as "
                        "archive_deleted_rows --before).")
    p.add_argument("--verbose", action="store_true",
                   help="Print how many rows were deleted from each shadow table.")
    p.add_argument("--all-cells", "--all_cells", dest="all_cells", action="store_true",
                   help="Purge every mapped cell's database, cell0 included, instead of "
                        "[database] connection.")
