"""Archiving deleted rows of a cell database into its shadow tables, and purging them.

A batch moves, in one transaction, at most about ``max_rows`` rows:

1. deleted instances (``deleted != 0``), oldest first, each with every row
   that hangs off it (metadata, extra, info cache, tags, system metadata,
   migrations, block device mappings, faults, actions and their events,
   operations a host left unfinished on it), deleted or not;
2. then the soft-deleted rows of the other tables (events, actions, faults,
   block device mappings, migrations, services, compute nodes).

``before`` keeps rows deleted at or after that time. The caller removes the
API database's rows of the archived instances (``forget_instances``).
"""
import sqlalchemy as sa

from novella.db import api_models as am
from novella.db import cell_models as cm
from novella.db import shadow

_T = cm.metadata.tables

# Rows that belong to an instance, by the column naming it (events via their action).
INSTANCE_KEY = {
    "instance_metadata": "instance_uuid", "instance_extra": "instance_uuid",
    "instance_info_caches": "instance_uuid", "tags": "resource_id",
    "instance_system_metadata": "instance_uuid", "migrations": "instance_uuid",
    "block_device_mapping": "instance_uuid", "instance_faults": "instance_uuid",
    "instance_actions": "instance_uuid", "host_operations": "instance_uuid",
}
# Soft-deleted tables archived on their own, children before parents.
SOFT_DELETED = ("instance_actions_events", "instance_actions", "instance_faults",
                "block_device_mapping", "migrations", "services", "compute_nodes")


def _move(conn, name, where):
    """Copy the rows of ``name`` matching ``where`` to its shadow, delete them; -> count."""
    table, shadow_table = _T[name], _T[shadow.shadow_name(name)]
    cols = [c.name for c in table.columns]
    conn.execute(shadow_table.insert().from_select(cols, sa.select(*table.c).where(where)))
    return conn.execute(table.delete().where(where)).rowcount


def _deleted(table, before):
    cond = table.c.deleted != 0
    if before is not None:
        cond = sa.and_(cond, table.c.deleted_at < before)
    return cond


def _count(counts, name, n):
    if n:
        counts[name] = counts.get(name, 0) + n


def archive_batch(cell_db, max_rows, before=None):
    """One batch; -> ({table: rows archived}, [uuids of the archived instances])."""
    counts = {}
    with cell_db.connection(write=True) as conn:
        instances = _T["instances"]
        uuids = list(conn.scalars(sa.select(instances.c.uuid)
                                  .where(_deleted(instances, before))
                                  .order_by(instances.c.id).limit(max_rows)))
        if uuids:
            actions = _T["instance_actions"]
            action_ids = sa.select(actions.c.id).where(actions.c.instance_uuid.in_(uuids))
            _count(counts, "instance_actions_events", _move(
                conn, "instance_actions_events",
                _T["instance_actions_events"].c.action_id.in_(action_ids)))
            for name, column in INSTANCE_KEY.items():
                _count(counts, name, _move(conn, name, _T[name].c[column].in_(uuids)))
            _count(counts, "instances", _move(conn, "instances", instances.c.uuid.in_(uuids)))
        for name in SOFT_DELETED:
            budget = max_rows - sum(counts.values())
            if budget <= 0:
                break
            table = _T[name]
            ids = list(conn.scalars(sa.select(table.c.id).where(_deleted(table, before))
                                    .order_by(table.c.id).limit(budget)))
            if not ids:
                continue
            if name == "instance_actions":  # their events go with them
                _count(counts, "instance_actions_events", _move(
                    conn, "instance_actions_events",
                    _T["instance_actions_events"].c.action_id.in_(ids)))
            _count(counts, name, _move(conn, name, table.c.id.in_(ids)))
    return counts, uuids


def forget_instances(api_db, uuids):
    """Delete the API database's rows of archived instances; -> {table: rows}."""
    counts = {}
    with api_db.session(write=True) as s:
        for model in (am.InstanceMapping, am.RequestSpec, am.BuildRequest,
                      am.InstanceGroupMember):
            n = s.execute(sa.delete(model).where(model.instance_uuid.in_(uuids))).rowcount
            counts[model.__tablename__] = n
    return counts


def purge(cell_db, before=None):
    """Delete shadow rows (all, or those deleted before ``before``); -> {shadow table: rows}.

    A row without a deletion time of its own (an instance's metadata, extra,
    tags, ..., or the actions of a deleted instance) goes with its archived
    instance; shadow actions and events go by their creation time.
    """
    counts = {}
    with cell_db.connection(write=True) as conn:
        s_instances = _T[shadow.shadow_name("instances")]
        old = sa.select(s_instances.c.uuid)
        if before is not None:
            old = old.where(s_instances.c.deleted_at < before)
        old_uuids = list(conn.scalars(old))
        for name in ("instance_actions_events",) + tuple(INSTANCE_KEY) + (
                "services", "compute_nodes", "instances"):
            table = _T[shadow.shadow_name(name)]
            where = sa.true()
            if before is not None:
                where = _purge_condition(table, name, old_uuids, before)
            n = conn.execute(table.delete().where(where)).rowcount
            if n:
                counts[table.name] = n
    return counts


def _purge_condition(table, name, old_uuids, before):
    own = []
    if name in ("instance_actions", "instance_actions_events"):
        own.append(table.c.created_at < before)
    elif "deleted_at" in table.c:
        own.append(table.c.deleted_at < before)
    if name == "instances":
        return sa.or_(*own)
    if name == "instance_actions_events":
        actions = _T[shadow.shadow_name("instance_actions")]
        own.append(table.c.action_id.in_(sa.select(actions.c.id).where(
            sa.or_(actions.c.created_at < before, actions.c.instance_uuid.in_(old_uuids)))))
    elif name in INSTANCE_KEY:
        own.append(table.c[INSTANCE_KEY[name]].in_(old_uuids))
    return sa.or_(*own) if own else sa.false()
