"""Finding servers wherever they are: build requests, cells, cell0.

A server is a *record* here: a dict of the instance's columns plus
``metadata``, ``flavor``, ``tags``, ``network_info``, ``fault``,
``volumes`` and ``cell`` (its CellMapping, None while it is a build
request). Views render records; handlers never care where one came from.

Listing asks every cell database in parallel, each for at most one page in
the requested order after the marker, then merges the pages with the build
requests and cuts one page: the result is the same as one big sorted query.
"""
import datetime
import functools
import json

import sqlalchemy as sa
from sqlalchemy import orm

from novella.api.compute import errors
from novella.compute import states
from novella.db import api_models as am, cell_models as cm, cells as cells_mod

_EPOCH = datetime.datetime(1, 1, 1)
_COLUMNS = [c.key for c in cm.Instance.__table__.columns]

# Keys a list may be sorted by, with the value NULL sorts as, so every
# backend orders NULLs alike and the merge matches the SQL order.
SORT_KEYS = {
    "access_ip_v4": "", "access_ip_v6": "", "availability_zone": "",
    "config_drive": "", "created_at": _EPOCH, "display_description": "",
    "display_name": "", "host": "", "hostname": "", "image_ref": "",
    "instance_type_id": -1, "key_name": "", "launch_index": -1,
    "launched_at": _EPOCH, "locked_by": "", "node": "", "power_state": -1,
    "progress": -1, "project_id": "", "task_state": "", "terminated_at": _EPOCH,
    "updated_at": _EPOCH, "user_id": "", "uuid": "", "vm_state": "",
}
# Keys the reference refuses outright (400) rather than ignoring.
BAD_SORT_KEYS = {"deleted", "cleaned", "default_ephemeral_device", "default_swap_device",
                 "display_name_lower", "ephemeral_key_uuid", "locked", "pci_devices",
                 "security_groups", "info_cache", "system_metadata", "metadata",
                 "flavor", "vm_state_dummy", "id"}
ADMIN_SORT_KEYS = {"host", "node"}


# --- records ---------------------------------------------------------------------------
def _json(text, default):
    if not text:
        return default
    return json.loads(text)


# Metadata and tags load lazily elsewhere; the views need them, one query each per page.
VIEW_LOADS = (orm.selectinload(cm.Instance.metadata_items), orm.selectinload(cm.Instance.tags))


def record(row, cell, view=True):
    rec = {k: getattr(row, k) for k in _COLUMNS}
    rec["metadata"] = {m.key: m.value for m in row.metadata_items} if view else {}
    flavors = _json(row.extra.flavor if row.extra else None, {})
    rec["flavor"] = flavors.get("cur") or {}
    rec["tags"] = sorted(t.tag for t in row.tags) if view else []
    rec["network_info"] = _json(row.info_cache.network_info if row.info_cache else None, [])
    rec["cell"] = cell
    rec["fault"] = None
    rec["volumes"] = []
    return rec


def build_request_record(br):
    inst = json.loads(br.instance)
    rec = {k: None for k in _COLUMNS}
    rec.update({k: v for k, v in inst.items() if k in rec})
    rec.update(uuid=br.instance_uuid, project_id=br.project_id, deleted=0, hidden=False,
               vm_state=states.BUILDING, task_state=inst.get("task_state") or
               states.task_states.SCHEDULING, power_state=0, locked=bool(inst.get("locked")),
               created_at=br.created_at, updated_at=br.updated_at)
    rec["metadata"] = inst.get("metadata") or {}
    rec["flavor"] = inst.get("flavor") or {}
    rec["tags"] = sorted(json.loads(br.tags or "[]"))
    rec["network_info"] = []
    rec["cell"] = None
    rec["fault"] = None
    bdms = json.loads(br.block_device_mappings or "[]")
    rec["volumes"] = [{"id": b["volume_id"], "delete_on_termination": bool(b.get("delete_on_termination"))}
                      for b in bdms if b.get("destination_type") == "volume" and b.get("volume_id")]
    return rec


def _add_faults_and_volumes(s, recs):
    """One query each for the latest fault and the attached volumes of a page."""
    uuids = [r["uuid"] for r in recs]
    if not uuids:
        return
    by_uuid = {r["uuid"]: r for r in recs}
    faults = s.scalars(sa.select(cm.InstanceFault)
                       .where(cm.InstanceFault.instance_uuid.in_(uuids),
                              cm.InstanceFault.deleted == 0)
                       .order_by(cm.InstanceFault.id))
    for f in faults:
        by_uuid[f.instance_uuid]["fault"] = {"code": f.code, "message": f.message,
                                             "details": f.details, "created": f.created_at}
    bdms = s.scalars(sa.select(cm.BlockDeviceMapping)
                     .where(cm.BlockDeviceMapping.instance_uuid.in_(uuids),
                            cm.BlockDeviceMapping.deleted == 0,
                            cm.BlockDeviceMapping.destination_type == "volume")
                     .order_by(cm.BlockDeviceMapping.id))
    for b in bdms:
        if b.volume_id:
            by_uuid[b.instance_uuid]["volumes"].append(
                {"id": b.volume_id, "delete_on_termination": bool(b.delete_on_termination)})


# --- one server -----------------------------------------------------------------------
# The mapping and its cell in one statement (no cell cache token to check).
_MAPPING = sa.select(am.InstanceMapping, am.CellMapping).outerjoin(
    am.CellMapping, am.CellMapping.id == am.InstanceMapping.cell_id).where(
    am.InstanceMapping.instance_uuid == sa.bindparam("b_uuid"))


def mapping(api_db, uuid):
    """(InstanceMapping, CellMapping or None) or (None, None)."""
    with api_db.read_session() as s:
        row = s.execute(_MAPPING, {"b_uuid": uuid}).first()
    if row is None:
        return None, None
    return row[0], row[1]


@functools.cache
def _instance_query(view, read_deleted):
    """``load``'s select, built once per kind."""
    q = sa.select(cm.Instance).where(cm.Instance.uuid == sa.bindparam("b_uuid"))
    if view:
        q = q.options(*VIEW_LOADS)
    if not read_deleted:
        q = q.where(cm.Instance.deleted == 0)
    return q


def load(api_db, uuid, read_deleted=False, view=True):
    """The record of a server, or None: build request first, then its cell.

    ``view=False``: without metadata, tags, fault and volumes, for handlers
    that act on a server rather than show it (they are left empty).
    """
    im, cell = mapping(api_db, uuid)
    if im is None:
        return None
    if cell is None:
        with api_db.session() as s:
            br = s.scalars(sa.select(am.BuildRequest)
                           .where(am.BuildRequest.instance_uuid == uuid)).first()
            if br is not None:
                return build_request_record(br)
        # The conductor may have just placed it; read the mapping again.
        im, cell = mapping(api_db, uuid)
        if cell is None:
            return None
    with cells_mod.cell_database(cell).read_session() as s:
        row = s.scalars(_instance_query(view, read_deleted), {"b_uuid": uuid}).first()
        if row is None:
            return None
        rec = record(row, cell, view)
        if view:
            _add_faults_and_volumes(s, [rec])
        return rec


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


def _sort_expr(key):
    col = getattr(cm.Instance, key)
    return sa.func.coalesce(col, SORT_KEYS[key])


def _sort_value(rec, key):
    v = rec.get(key)
    return SORT_KEYS[key] if v is None else v


def _after(sort, marker_rec):
    """WHERE clause selecting rows strictly after the marker in ``sort`` order."""
    ors = []
    for i, (key, direction) in enumerate(sort):
        ands = [_sort_expr(k) == _sort_value(marker_rec, k) for k, _d in sort[:i]]
        expr, value = _sort_expr(key), _sort_value(marker_rec, key)
        ands.append(expr > value if direction == "asc" else expr < value)
        ors.append(sa.and_(*ands))
    return sa.or_(*ors)


def _compare(sort, a, b):
    for key, direction in sort:
        va, vb = _sort_value(a, key), _sort_value(b, key)
        if va != vb:
            less = va < vb
            return (-1 if less else 1) * (1 if direction == "asc" else -1)
    return 0


def _tag_filters(q, filters):
    tag_q = lambda t: sa.exists().where(cm.Tag.resource_id == cm.Instance.uuid, cm.Tag.tag == t)  # noqa: E731
    any_q = lambda ts: sa.exists().where(cm.Tag.resource_id == cm.Instance.uuid, cm.Tag.tag.in_(ts))  # noqa: E731
    if filters.get("tags"):
        q = q.where(*[tag_q(t) for t in filters["tags"]])
    if filters.get("tags-any"):
        q = q.where(any_q(filters["tags-any"]))
    if filters.get("not-tags"):
        q = q.where(sa.not_(sa.and_(*[tag_q(t) for t in filters["not-tags"]])))
    if filters.get("not-tags-any"):
        q = q.where(sa.not_(any_q(filters["not-tags-any"])))
    return q


_EXACT = ("project_id", "user_id", "host", "node", "image_ref", "reservation_id",
          "availability_zone", "key_name", "instance_type_id", "uuid", "hostname",
          "launch_index", "power_state", "config_drive", "access_ip_v4", "access_ip_v6",
          "locked", "task_state", "vm_state")


def _cell_query(filters, sort, marker_rec, limit):
    q = sa.select(cm.Instance).where(cm.Instance.hidden.is_(False))
    deleted = filters.get("deleted")
    if deleted is True:
        q = q.where(cm.Instance.deleted != 0)
    elif deleted is None and not filters.get("changes-since"):
        q = q.where(cm.Instance.deleted == 0)
    elif deleted is False:
        q = q.where(cm.Instance.deleted == 0)
    if (deleted is False or deleted is None and not filters.get("changes-since")
            and not filters.get("changes-before")) and not filters.get("soft_deleted"):
        # Soft-deleted servers are listed only on request (as the reference).
        q = q.where(sa.or_(cm.Instance.vm_state != states.SOFT_DELETED,
                           cm.Instance.vm_state.is_(None)))
    for key in _EXACT:
        if key in filters:
            value = filters[key]
            col = getattr(cm.Instance, key)
            q = q.where(col.in_(value) if isinstance(value, (list, tuple)) else col == value)
    if filters.get("task_states") is not None:
        q = q.where(cm.Instance.task_state.in_(filters["task_states"]))
    if filters.get("vm_states") is not None:
        q = q.where(cm.Instance.vm_state.in_(filters["vm_states"]))
    if filters.get("name"):
        q = q.where(cm.Instance.display_name.regexp_match(filters["name"]))
    if filters.get("changes-since"):
        q = q.where(cm.Instance.updated_at >= filters["changes-since"])
    if filters.get("changes-before"):
        q = q.where(cm.Instance.updated_at <= filters["changes-before"])
    q = _tag_filters(q, filters)
    if marker_rec is not None:
        q = q.where(_after(sort, marker_rec))
    q = q.order_by(*[_sort_expr(k).asc() if d == "asc" else _sort_expr(k).desc()
                     for k, d in sort])
    return q.limit(limit)


def _ip_matches(rec, filters):
    """``ip`` / ``ip6``: a regular expression one of the server's fixed addresses of
    that version matches from its start (as the reference filters, on its info cache)."""
    import re
    from novella.api.compute import views
    patterns = {4: filters.get("ip"), 6: filters.get("ip6")}
    patterns = {v: re.compile(p) for v, p in patterns.items() if p is not None}
    return any(ip["version"] in patterns and patterns[ip["version"]].match(ip["addr"] or "")
               for ips in views.addresses(rec).values() for ip in ips
               if ip["OS-EXT-IPS:type"] == "fixed")


def _matches(rec, filters):
    """The same filters applied to a build request record in Python."""
    import re
    if ("ip" in filters or "ip6" in filters) and not _ip_matches(rec, filters):
        return False
    for key in _EXACT:
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
    with api_db.session() as s:
        br = s.scalars(sa.select(am.BuildRequest).where(am.BuildRequest.instance_uuid == marker)).first()
        if br is not None:
            return build_request_record(br)
    rec = load(api_db, marker, read_deleted=True)
    if rec is None:
        # Not mapped (an old or hand-made row): look in every cell.
        found = cells_mod.scatter(cells, lambda c, db: _load_in(db, c, marker))
        rec = next((r for r in found.values() if isinstance(r, dict)), None)
    if rec is None:
        raise errors.BadRequest(f"marker [{marker}] not found")
    return rec


def _load_in(db, cell, uuid):
    with db.session() as s:
        row = s.scalars(sa.select(cm.Instance).where(cm.Instance.uuid == uuid)
                        .options(*VIEW_LOADS)).first()
        return record(row, cell) if row is not None else None


def list_records(api, filters, sort, limit, marker=None):
    """One page of server records from every cell and the build requests."""
    cells = cells_mod.list_cells(api.api_db)
    sort = list(sort)
    if not any(k == "uuid" for k, _d in sort):
        sort.append(("uuid", sort[-1][1] if sort else "desc"))
    marker_rec = _marker_record(api.api_db, marker, cells) if marker else None

    by_ip = "ip" in filters or "ip6" in filters  # matched here, on every row of the cell

    def in_cell(cell, db):
        with db.session() as s:
            rows = s.scalars(_cell_query(filters, sort, marker_rec, None if by_ip else limit)
                             .options(*VIEW_LOADS)).all()
            recs = [record(r, cell) for r in rows]
            if by_ip:
                recs = [r for r in recs if _ip_matches(r, filters)][:limit]
            _add_faults_and_volumes(s, recs)
            return recs

    # The build requests first, then the cells: a server is created in its cell before
    # its build request goes, so one that moves meanwhile is read in one or the other.
    building = {}
    with api.api_db.session() as s:
        q = sa.select(am.BuildRequest)
        if "project_id" in filters and not isinstance(filters["project_id"], (list, tuple)):
            q = q.where(am.BuildRequest.project_id == filters["project_id"])
        for br in s.scalars(q):
            rec = build_request_record(br)
            building[rec["uuid"]] = rec
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
        with api.api_db.session() as s:
            still = set(s.scalars(sa.select(am.BuildRequest.instance_uuid).where(
                am.BuildRequest.instance_uuid.in_(missing))))
        for uuid in missing:
            # Still a build request; or it reached its cell after that cell was read.
            rec = building[uuid] if uuid in still else load(api.api_db, uuid)
            if rec is not None and _matches(rec, filters) and (
                    marker_rec is None or _compare(sort, rec, marker_rec) > 0):
                merged[uuid] = rec
    ordered = sorted(merged.values(), key=functools.cmp_to_key(lambda a, b: _compare(sort, a, b)))
    return ordered[:limit]
