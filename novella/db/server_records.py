"""A server as the Compute API shows it: a *record*, read from wherever it is
(its build request in the API database, its row in a cell database).

A record is a dict of the instance's columns plus ``metadata``, ``flavor``,
``tags``, ``network_info``, ``fault``, ``volumes`` and ``cell`` (its
CellMapping, None while it is a build request). A list reads one page from
one cell here (``cell_page``); ``novella.api.compute.instances`` merges the
cells' pages.
"""
import datetime
import functools
import json

import sqlalchemy as sa
from sqlalchemy import orm

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
# Filters that match a column's value (or one of a list of values) exactly.
EXACT_FILTERS = ("project_id", "user_id", "host", "node", "image_ref", "reservation_id",
                 "availability_zone", "key_name", "instance_type_id", "uuid", "hostname",
                 "launch_index", "power_state", "config_drive", "access_ip_v4", "access_ip_v6",
                 "locked", "task_state", "vm_state")


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
        rec = build_request(api_db, uuid)
        if rec is not None:
            return rec
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


def build_request(api_db, uuid):
    """The record of a server that is still a build request, or None."""
    with api_db.session() as s:
        br = s.scalars(sa.select(am.BuildRequest).where(am.BuildRequest.instance_uuid == uuid)).first()
        return None if br is None else build_request_record(br)


def load_in(db, cell, uuid):
    """The record of a server in that cell's database (deleted or not), or None."""
    with db.session() as s:
        row = s.scalars(sa.select(cm.Instance).where(cm.Instance.uuid == uuid)
                        .options(*VIEW_LOADS)).first()
        return record(row, cell) if row is not None else None


# --- one page of a list --------------------------------------------------------------
def sort_value(rec, key):
    """The record's value of a sort key, NULL as the SQL order takes it."""
    v = rec.get(key)
    return SORT_KEYS[key] if v is None else v


def _sort_expr(key):
    col = getattr(cm.Instance, key)
    return sa.func.coalesce(col, SORT_KEYS[key])


def _after(sort, marker_rec):
    """WHERE clause selecting rows strictly after the marker in ``sort`` order."""
    ors = []
    for i, (key, direction) in enumerate(sort):
        ands = [_sort_expr(k) == sort_value(marker_rec, k) for k, _d in sort[:i]]
        expr, value = _sort_expr(key), sort_value(marker_rec, key)
        ands.append(expr > value if direction == "asc" else expr < value)
        ors.append(sa.and_(*ands))
    return sa.or_(*ors)


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
    for key in EXACT_FILTERS:
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


def cell_page(db, cell, filters, sort, marker_rec, limit, keep=None):
    """Records of one cell's servers matching ``filters``, in ``sort`` order after
    ``marker_rec`` (when given), at most ``limit``; ``keep``: a test each record
    must also pass (every matching row is then read)."""
    with db.session() as s:
        rows = s.scalars(_cell_query(filters, sort, marker_rec, None if keep else limit)
                         .options(*VIEW_LOADS)).all()
        recs = [record(r, cell) for r in rows]
        if keep is not None:
            recs = [r for r in recs if keep(r)][:limit]
        _add_faults_and_volumes(s, recs)
        return recs


def building(api_db, project_id=None):
    """{uuid: record} of the servers still build requests (a project's only, when given)."""
    q = sa.select(am.BuildRequest)
    if project_id is not None:
        q = q.where(am.BuildRequest.project_id == project_id)
    with api_db.session() as s:
        return {br.instance_uuid: build_request_record(br) for br in s.scalars(q)}


def still_building(api_db, uuids):
    """Those of the servers that are still build requests."""
    with api_db.session() as s:
        return set(s.scalars(sa.select(am.BuildRequest.instance_uuid).where(
            am.BuildRequest.instance_uuid.in_(uuids))))
