"""Copying a server between cell databases for a cross-cell move.

While a server moves between cells both databases hold it: the instance
row and what hangs off it (instance extra, info cache, metadata, tags, block
device mappings, actions and their events, faults) and the migration. One
copy is ``hidden``; the instance mapping points at the other. A finished
move hard-deletes the copy left behind.
"""
import sqlalchemy as sa

from novella.db import cell_models as m

# Rows keyed by the instance uuid, copied as they are (new primary keys).
_BY_INSTANCE = (m.InstanceExtra, m.InstanceInfoCache, m.InstanceMetadata,
                m.BlockDeviceMapping, m.InstanceFault)


def _columns(row, skip=("id",)):
    return {c.name: getattr(row, c.name) for c in type(row).__table__.columns
            if c.name not in skip}


def copy_instance(src_db, dst_db, instance_uuid, migration_uuid, hidden=True):
    """Copy the server and its migration from ``src_db`` into ``dst_db``.

    The copy (instance and migration) is ``hidden``; the migration rows in
    both databases are marked ``cross_cell_move``. Raises if ``dst_db``
    already holds the server.
    """
    with src_db.session(write=True) as s:
        inst = s.scalars(sa.select(m.Instance).where(m.Instance.uuid == instance_uuid,
                                                     m.Instance.deleted == 0)).one()
        instance = _columns(inst)
        related = []
        for model in _BY_INSTANCE:
            q = sa.select(model).where(model.instance_uuid == instance_uuid)
            if hasattr(model, "deleted"):
                q = q.where(model.deleted == 0)
            related.extend((model, _columns(r)) for r in s.scalars(q))
        tags = [t.tag for t in s.scalars(sa.select(m.Tag).where(m.Tag.resource_id == instance_uuid))]
        actions, events = _actions_and_events(s.connection(), instance_uuid)
        mig = s.scalars(sa.select(m.Migration).where(m.Migration.uuid == migration_uuid)).one()
        mig.cross_cell_move = True
        migration = _columns(mig)
    with dst_db.session(write=True) as s:
        s.add(m.Instance(**dict(instance, hidden=hidden)))
        for model, values in related:
            s.add(model(**values))
        for tag in tags:
            s.add(m.Tag(resource_id=instance_uuid, tag=tag))
        s.add(m.Migration(**dict(migration, hidden=hidden, cross_cell_move=True)))
        s.flush()
        _insert_actions(s.connection(), actions, events)


def hard_delete_instance(cell_db, instance_uuid, migration_uuid=None):
    """Remove every row of the server (and the migration) from one cell database."""
    with cell_db.session(write=True) as s:
        action_ids = list(s.scalars(sa.select(m.InstanceAction.id).where(
            m.InstanceAction.instance_uuid == instance_uuid)))
        if action_ids:
            s.execute(sa.delete(m.InstanceActionEvent).where(
                m.InstanceActionEvent.action_id.in_(action_ids)))
            s.execute(sa.delete(m.InstanceAction).where(m.InstanceAction.id.in_(action_ids)))
        for model in _BY_INSTANCE:
            s.execute(sa.delete(model).where(model.instance_uuid == instance_uuid))
        s.execute(sa.delete(m.Tag).where(m.Tag.resource_id == instance_uuid))
        if migration_uuid:
            s.execute(sa.delete(m.Migration).where(m.Migration.uuid == migration_uuid))
        s.execute(sa.delete(m.Instance).where(m.Instance.uuid == instance_uuid))


def set_hidden(cell_db, instance_uuid, migration_uuid, hidden):
    with cell_db.session(write=True) as s:
        s.execute(sa.update(m.Instance).where(m.Instance.uuid == instance_uuid,
                                              m.Instance.deleted == 0).values(hidden=hidden))
        s.execute(sa.update(m.Migration).where(m.Migration.uuid == migration_uuid)
                  .values(hidden=hidden))


def holds(cell_db, instance_uuid):
    with cell_db.session() as s:
        return s.scalars(sa.select(m.Instance.id).where(
            m.Instance.uuid == instance_uuid)).first() is not None


_ACTIONS = m.InstanceAction.__table__
_EVENTS = m.InstanceActionEvent.__table__


def _actions_and_events(conn, instance_uuid):
    """The server's actions (by id) and their events (by action id): two SELECTs."""
    actions = [dict(r._mapping) for r in conn.execute(
        sa.select(_ACTIONS).where(_ACTIONS.c.instance_uuid == instance_uuid)
        .order_by(_ACTIONS.c.id))]
    events = {a["id"]: [] for a in actions}
    if actions:
        for r in conn.execute(sa.select(_EVENTS).where(_EVENTS.c.action_id.in_(list(events)))
                              .order_by(_EVENTS.c.id)):
            events[r.action_id].append(dict(r._mapping))
    return actions, events


def _insert_actions(conn, actions, events):
    """Insert copies of ``actions`` (new ids) and of their events: one INSERT per action."""
    rows = []
    for action in actions:
        action_id = conn.execute(sa.insert(_ACTIONS).values(
            **{k: v for k, v in action.items() if k != "id"})).inserted_primary_key[0]
        rows.extend(dict({k: v for k, v in ev.items() if k != "id"}, action_id=action_id)
                    for ev in events[action["id"]])
    if rows:
        conn.execute(sa.insert(_EVENTS), rows)


def sync_actions(src_db, dst_db, instance_uuid):
    """Bring the server's actions and events in ``dst_db`` up to ``src_db``'s.

    Actions are matched by request id (a step a host recorded outside the
    action of its cell lands in the request's action), events by (event, host, start time):
    missing ones are added, finished ones take the source's result.
    Core statements, a fixed number whatever the server's history (it runs
    twice per move).
    """
    with src_db.connection() as conn:
        actions, events = _actions_and_events(conn, instance_uuid)
    with dst_db.connection(write=True) as conn:
        have_actions, have_events = _actions_and_events(conn, instance_uuid)
        by_request = {}
        for a in have_actions:
            by_request.setdefault(a["request_id"], a)  # the oldest, as it was recorded
        new_events = []
        for action in actions:
            row = by_request.get(action["request_id"])
            if row is None:
                values = {k: v for k, v in action.items() if k != "id"}
                action_id = conn.execute(sa.insert(_ACTIONS).values(**values)
                                         ).inserted_primary_key[0]
                row = by_request[action["request_id"]] = dict(values, id=action_id)
                have_events[action_id] = []
            else:
                changed = {k: action[k] for k in ("finish_time", "message")
                           if action[k] and action[k] != row[k]}
                if changed:
                    conn.execute(sa.update(_ACTIONS).where(_ACTIONS.c.id == row["id"])
                                 .values(**changed))
            mine = {(e["event"], e["host"], e["start_time"]): e for e in have_events[row["id"]]}
            for ev in events[action["id"]]:
                found = mine.get((ev["event"], ev["host"], ev["start_time"]))
                if found is None:
                    new_events.append(dict({k: v for k, v in ev.items() if k != "id"},
                                           action_id=row["id"]))
                elif ev["finish_time"] and not found["finish_time"]:
                    conn.execute(sa.update(_EVENTS).where(_EVENTS.c.id == found["id"]).values(
                        finish_time=ev["finish_time"], result=ev["result"],
                        traceback=ev["traceback"]))
        if new_events:
            conn.execute(sa.insert(_EVENTS), new_events)


def sync_changes_back(src_db, dst_db, instance_uuid):
    """Changes made to the server while it was resized (``src_db``'s copy) go to ``dst_db``.

    Tags and metadata are replaced; a volume detached meanwhile is
    soft-deleted there too. Returns the BDMs gone (``{"volume_id",
    "attachment_id", "device_name"}``) so their attachments can be deleted.
    """
    with src_db.session() as s:
        inst = s.scalars(sa.select(m.Instance).where(m.Instance.uuid == instance_uuid,
                                                     m.Instance.deleted == 0)).one()
        tags = {t.tag for t in inst.tags}
        metadata = {i.key: i.value for i in inst.metadata_items}
        values = {k: getattr(inst, k) for k in ("display_name", "display_description",
                                                "locked", "locked_by", "access_ip_v4",
                                                "access_ip_v6")}
        volumes = set(s.scalars(sa.select(m.BlockDeviceMapping.volume_id).where(
            m.BlockDeviceMapping.instance_uuid == instance_uuid,
            m.BlockDeviceMapping.deleted == 0)))
    gone = []
    with dst_db.session(write=True) as s:
        s.execute(sa.delete(m.Tag).where(m.Tag.resource_id == instance_uuid))
        for tag in sorted(tags):
            s.add(m.Tag(resource_id=instance_uuid, tag=tag))
        s.execute(sa.delete(m.InstanceMetadata).where(
            m.InstanceMetadata.instance_uuid == instance_uuid))
        for key, value in metadata.items():
            s.add(m.InstanceMetadata(instance_uuid=instance_uuid, key=key, value=value))
        s.execute(sa.update(m.Instance).where(m.Instance.uuid == instance_uuid,
                                              m.Instance.deleted == 0).values(**values))
        for bdm in s.scalars(sa.select(m.BlockDeviceMapping).where(
                m.BlockDeviceMapping.instance_uuid == instance_uuid,
                m.BlockDeviceMapping.deleted == 0,
                m.BlockDeviceMapping.destination_type == "volume")):
            if bdm.volume_id and bdm.volume_id not in volumes:
                gone.append({"volume_id": bdm.volume_id, "attachment_id": bdm.attachment_id,
                             "device_name": bdm.device_name})
                bdm.deleted, bdm.attachment_id = bdm.id, None
    return gone
