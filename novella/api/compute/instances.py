"""Finding servers wherever they are: build requests, cells, cell0.

A server is a *record* here (``novella.db.server_records`` reads them):
a dict of the instance's columns plus ``metadata``, ``flavor``, ``tags``,
``network_info``, ``fault``, ``volumes`` and ``cell`` (its CellMapping,
None while it is a build request). Views render records; handlers never
care where one came from.

Listing asks every cell database in parallel, each for at most one page in
the requested order after the marker, then merges the pages with the build
requests and cuts one page: the result is the same as one big sorted query.
"""
import functools
import re

from novella.api.compute import errors
from novella.compute import states
from novella.db import cells as cells_mod, server_records
from novella.db.server_records import load, sort_value

# Keys a list may be sorted by.
SORT_KEYS = server_records.SORT_KEYS
# Keys the reference refuses outright (400) rather than ignoring.
BAD_SORT_KEYS = {"deleted", "cleaned", "default_ephemeral_device", "default_swap_device",
                 "display_name_lower", "ephemeral_key_uuid", "locked", "pci_devices",
                 "security_groups", "info_cache", "system_metadata", "metadata",
                 "flavor", "vm_state_dummy", "id"}
ADMIN_SORT_KEYS = {"host", "node"}


# --- one server -----------------------------------------------------------------------
def get(req, uuid, rule=None, read_deleted=False, view=True):
    """A server the caller may see, else 404 (another project's too); ``view`` as ``load``."""
    rec = load(req.api.api_db, uuid, read_deleted=read_deleted, view=view)
    ctxt = req.context
    if rec is None or (rec["project_id"] != ctxt.project_id and not req.is_admin()):
        raise errors.instance_not_found(uuid)
    if rule:
        req.authorize(rule, {"project_id": rec["project_id"], "user_id": rec["user_id"]})
    return rec


# --- listing across cells --------------------------------------------------------------
STATUS_MAP = {
    "BUILD": ([states.BUILDING], None),
    "ACTIVE": ([states.ACTIVE], None),
    "SHUTOFF": ([states.STOPPED], None),
    "ERROR": ([states.ERROR], None),
    "PAUSED": ([states.PAUSED], None),
    "SUSPENDED": ([states.SUSPENDED], None),
    "RESCUE": ([states.RESCUED], None),
    "SOFT_DELETED": ([states.SOFT_DELETED], None),
    "DELETED": ([states.DELETED], None),
    "SHELVED": ([states.SHELVED], None),
    "SHELVED_OFFLOADED": ([states.SHELVED_OFFLOADED], None),
    "VERIFY_RESIZE": ([states.RESIZED], None),
    "REBOOT": ([states.ACTIVE], ["rebooting", "reboot_pending", "reboot_started"]),
    "HARD_REBOOT": ([states.ACTIVE], ["rebooting_hard", "reboot_pending_hard",
                                      "reboot_started_hard"]),
    "RESIZE": ([states.ACTIVE, states.STOPPED], ["resize_prep", "resize_migrating",
                                                 "resize_migrated", "resize_finish"]),
    "REVERT_RESIZE": ([states.RESIZED], ["resize_reverting"]),
    "MIGRATING": ([states.ACTIVE], ["migrating"]),
    "REBUILD": ([states.ACTIVE, states.STOPPED], ["rebuilding", "rebuild_block_device_mapping",
                                                  "rebuild_spawning"]),
}


def _compare(sort, a, b):
    for key, direction in sort:
        va, vb = sort_value(a, key), sort_value(b, key)
        if va != vb:
            less = va < vb
            return (-1 if less else 1) * (1 if direction == "asc" else -1)
    return 0


def _ip_matches(rec, filters):
    """``ip`` / ``ip6``: a regular expression one of the server's fixed addresses of
    that version matches from its start (as the reference filters, on its info cache)."""
    from novella.api.compute import views
    patterns = {4: filters.get("ip"), 6: filters.get("ip6")}
    patterns = {v: re.compile(p) for v, p in patterns.items() if p is not None}
    return any(ip["version"] in patterns and patterns[ip["version"]].match(ip["addr"] or "")
               for ips in views.addresses(rec).values() for ip in ips
               if ip["OS-EXT-IPS:type"] == "fixed")


def _matches(rec, filters):
    """The same filters applied to a build request record in Python."""
    if ("ip" in filters or "ip6" in filters) and not _ip_matches(rec, filters):
        return False
    for key in server_records.EXACT_FILTERS:
        if key in filters:
            value = filters[key]
            if (rec.get(key) not in value) if isinstance(value, (list, tuple)) else rec.get(key) != value:
                return False
    if filters.get("deleted") is True:
        return False
    if filters.get("vm_states") is not None and rec["vm_state"] not in filters["vm_states"]:
        return False
    if filters.get("task_states") is not None and rec["task_state"] not in filters["task_states"]:
        return False
    if filters.get("name") and not re.search(filters["name"], rec.get("display_name") or ""):
        return False
    if filters.get("changes-since") and (rec["updated_at"] or rec["created_at"]) < filters["changes-since"]:
        return False
    if filters.get("changes-before") and (rec["updated_at"] or rec["created_at"]) > filters["changes-before"]:
        return False
    tags = set(rec["tags"])
    if filters.get("tags") and not set(filters["tags"]) <= tags:
        return False
    if filters.get("tags-any") and not set(filters["tags-any"]) & tags:
        return False
    if filters.get("not-tags") and set(filters["not-tags"]) <= tags:
        return False
    if filters.get("not-tags-any") and set(filters["not-tags-any"]) & tags:
        return False
    return True


def _marker_record(api_db, marker, cells):
    rec = server_records.build_request(api_db, marker)
    if rec is not None:
        return rec
    rec = load(api_db, marker, read_deleted=True)
    if rec is None:
        # Not mapped (an old or hand-made row): look in every cell.
        found = cells_mod.scatter(cells, lambda c, db: server_records.load_in(db, c, marker))
        rec = next((r for r in found.values() if isinstance(r, dict)), None)
    if rec is None:
        raise errors.BadRequest(f"marker [{marker}] not found")
    return rec


def list_records(api, filters, sort, limit, marker=None):
    """One page of server records from every cell and the build requests."""
    cells = cells_mod.list_cells(api.api_db)
    sort = list(sort)
    if not any(k == "uuid" for k, _d in sort):
        sort.append(("uuid", sort[-1][1] if sort else "desc"))
    marker_rec = _marker_record(api.api_db, marker, cells) if marker else None

    # ip and ip6 are matched here, on every row of the cell.
    keep = (lambda rec: _ip_matches(rec, filters)) if "ip" in filters or "ip6" in filters else None

    def in_cell(cell, db):
        return server_records.cell_page(db, cell, filters, sort, marker_rec, limit, keep)

    # The build requests first, then the cells: a server is created in its cell before
    # its build request goes, so one that moves meanwhile is read in one or the other.
    project_id = filters.get("project_id")
    building = server_records.building(
        api.api_db, None if isinstance(project_id, (list, tuple)) else project_id)
    results = cells_mod.scatter(cells, in_cell)
    merged = {}
    for cell_uuid, recs in results.items():
        if isinstance(recs, Exception):
            if not api.conf.api.list_records_by_skipping_down_cells:
                raise recs
            continue
        for rec in recs:
            merged[rec["uuid"]] = rec
    missing = [uuid for uuid in building if uuid not in merged]
    if missing:
        still = server_records.still_building(api.api_db, missing)
        for uuid in missing:
            # Still a build request; or it reached its cell after that cell was read.
            rec = building[uuid] if uuid in still else load(api.api_db, uuid)
            if rec is not None and _matches(rec, filters) and (
                    marker_rec is None or _compare(sort, rec, marker_rec) > 0):
                merged[uuid] = rec
    ordered = sorted(merged.values(), key=functools.cmp_to_key(lambda a, b: _compare(sort, a, b)))
    return ordered[:limit]
