"""A server's rows in its cell database as the Compute API reads and changes them
(beside ``records``, which every service shares): its info cache, block device
mappings, metadata and tags, and its delete when no host will do it.
"""
import json

import sqlalchemy as sa

from novella.compute import states
from novella.db import cell_models as cm, records
from novella.db.timestamps import utcnow


def network_info(cell_db, instance_uuid):
    """The server's info cache (a list of VIFs; empty when it has none)."""
    with cell_db.read_session() as s:
        cache = s.scalars(sa.select(cm.InstanceInfoCache.network_info).where(
            cm.InstanceInfoCache.instance_uuid == instance_uuid)).first()
    return json.loads(cache or "[]")


def volume_mappings(cell_db, instance_uuid):
    """The server's BlockDeviceMappings of volumes, in id order."""
    with cell_db.read_session() as s:
        return s.scalars(sa.select(cm.BlockDeviceMapping).where(
            cm.BlockDeviceMapping.instance_uuid == instance_uuid,
            cm.BlockDeviceMapping.deleted == 0,
            cm.BlockDeviceMapping.destination_type == "volume")
            .order_by(cm.BlockDeviceMapping.id)).all()


def delete_here(cell_db, instance_uuid):
    """Soft-delete a server no host knows about (cell0, or never placed), with its
    block device mappings, in one transaction."""
    now = utcnow()
    with cell_db.session(write=True) as s:
        inst = s.scalars(sa.select(cm.Instance).where(cm.Instance.uuid == instance_uuid,
                                                      cm.Instance.deleted == 0)).first()
        if inst is None:
            return
        inst.vm_state = states.DELETED
        inst.task_state = None
        inst.terminated_at = now
        inst.deleted_at = now
        inst.deleted = inst.id
        s.execute(sa.update(cm.BlockDeviceMapping)
                  .where(cm.BlockDeviceMapping.instance_uuid == instance_uuid,
                         cm.BlockDeviceMapping.deleted == 0)
                  .values(deleted=cm.BlockDeviceMapping.id, deleted_at=now))


def start_rebuild(cell_db, instance_uuid, metadata=None, **values):
    """Set the server's task state to rebuilding with ``values`` (guarded: no task
    under way) and, given ``metadata``, replace its metadata, in one transaction."""
    with cell_db.connection(write=True) as conn:
        records.guarded_update(conn, instance_uuid, expected_task_state=(None,), **values)
        if metadata is not None:
            conn.execute(sa.delete(cm.InstanceMetadata).where(
                cm.InstanceMetadata.instance_uuid == instance_uuid))
            for key, value in metadata.items():
                conn.execute(sa.insert(cm.InstanceMetadata).values(
                    instance_uuid=instance_uuid, key=key, value=value))


def root_volume(cell_db, instance_uuid):
    """The id of the volume the server boots from, or None."""
    with cell_db.read_session() as s:
        return s.scalars(sa.select(cm.BlockDeviceMapping.volume_id).where(
            cm.BlockDeviceMapping.instance_uuid == instance_uuid,
            cm.BlockDeviceMapping.deleted == 0,
            cm.BlockDeviceMapping.boot_index == 0)).first()


def reset_state(cell_db, ctxt, instance_uuid, vm_state):
    """Set the server's vm_state (no task) and record the 'resetState' action, begun
    and ended now, in one transaction; False when there is no such server."""
    now = utcnow()
    with cell_db.connection(write=True) as conn:
        if not conn.execute(sa.update(cm.Instance).where(
                cm.Instance.uuid == instance_uuid, cm.Instance.deleted == 0).values(
                vm_state=vm_state, task_state=None, updated_at=now)).rowcount:
            return False
        conn.execute(sa.insert(cm.InstanceAction).values(
            action="resetState", instance_uuid=instance_uuid, request_id=ctxt.request_id,
            user_id=ctxt.user_id, project_id=ctxt.project_id, start_time=now,
            finish_time=now, created_at=now))
        return True


def holding_volume(cell_db, volume_id):
    """The server the volume is attached to (an Instance), or None."""
    with cell_db.read_session() as s:
        return s.scalars(sa.select(cm.Instance).join(
            cm.BlockDeviceMapping,
            cm.BlockDeviceMapping.instance_uuid == cm.Instance.uuid).where(
            cm.BlockDeviceMapping.volume_id == volume_id,
            cm.BlockDeviceMapping.deleted == 0, cm.Instance.deleted == 0)).first()


def block_device_mappings(cell_db, instance_uuid):
    """The server's BlockDeviceMappings, in id order."""
    with cell_db.read_session() as s:
        return list(s.scalars(sa.select(cm.BlockDeviceMapping).where(
            cm.BlockDeviceMapping.instance_uuid == instance_uuid,
            cm.BlockDeviceMapping.deleted == 0).order_by(cm.BlockDeviceMapping.id)))


def set_metadata(cell_db, instance_uuid, metadata):
    """Make the server's metadata ``metadata`` ({key: value}), changing only what differs."""
    with cell_db.session(write=True) as s:
        rows = {m.key: m for m in s.scalars(sa.select(cm.InstanceMetadata).where(
            cm.InstanceMetadata.instance_uuid == instance_uuid))}
        for key, row in rows.items():
            if key not in metadata:
                s.delete(row)
            elif row.value != metadata[key]:
                row.value = metadata[key]
        s.add_all(cm.InstanceMetadata(instance_uuid=instance_uuid, key=k, value=v)
                  for k, v in metadata.items() if k not in rows)


def delete_metadata(cell_db, instance_uuid, key):
    with cell_db.session(write=True) as s:
        s.execute(sa.delete(cm.InstanceMetadata).where(
            cm.InstanceMetadata.instance_uuid == instance_uuid, cm.InstanceMetadata.key == key))


def set_tags(cell_db, instance_uuid, tags):
    """Make the server's tags ``tags``."""
    with cell_db.session(write=True) as s:
        s.execute(sa.delete(cm.Tag).where(cm.Tag.resource_id == instance_uuid))
        s.add_all(cm.Tag(resource_id=instance_uuid, tag=t) for t in tags)


def add_tag(cell_db, instance_uuid, tag):
    with cell_db.session(write=True) as s:
        s.add(cm.Tag(resource_id=instance_uuid, tag=tag))


def delete_tags(cell_db, instance_uuid, tag=None):
    """Remove the server's tag ``tag`` (every tag when None)."""
    q = sa.delete(cm.Tag).where(cm.Tag.resource_id == instance_uuid)
    if tag is not None:
        q = q.where(cm.Tag.tag == tag)
    with cell_db.session(write=True) as s:
        s.execute(q)


def active_in(cell_db, start, stop, project_id=None):
    """[(Instance, its stored flavors' text)] of the servers launched before ``stop``
    and not terminated before ``start`` (a project's only, when given), ordered by
    project and uuid."""
    q = (sa.select(cm.Instance).where(
        sa.or_(cm.Instance.terminated_at.is_(None), cm.Instance.terminated_at > start),
        cm.Instance.launched_at < stop)
        .order_by(cm.Instance.project_id, cm.Instance.uuid))
    if project_id:
        q = q.where(cm.Instance.project_id == project_id)
    with cell_db.read_session() as s:
        return [(row, row.extra.flavor if row.extra else None) for row in s.scalars(q)]


def add_volume_mapping(cell_db, **values):
    """A new BlockDeviceMapping of the server (``instance_uuid=``); returns its id."""
    with cell_db.session(write=True) as s:
        row = cm.BlockDeviceMapping(**values)
        s.add(row)
        s.flush()
        return row.id


def _mapping(s, bdm_id, uuid):
    if bdm_id is not None:
        return s.get(cm.BlockDeviceMapping, bdm_id)
    return s.scalars(sa.select(cm.BlockDeviceMapping).where(
        cm.BlockDeviceMapping.uuid == uuid)).one()


def update_mapping(cell_db, bdm_id=None, uuid=None, **values):
    """Set columns of the BlockDeviceMapping of that id (or uuid)."""
    with cell_db.session(write=True) as s:
        row = _mapping(s, bdm_id, uuid)
        for column, value in values.items():
            setattr(row, column, value)


def delete_mapping(cell_db, bdm_id=None, uuid=None):
    """Soft-delete the BlockDeviceMapping of that id (or uuid), its attachment forgotten."""
    with cell_db.session(write=True) as s:
        row = _mapping(s, bdm_id, uuid)
        row.deleted, row.deleted_at, row.attachment_id = row.id, utcnow(), None


def numa_topology(cell_db, instance_uuid):
    """The NUMA topology the server's host claimed for it (claims.py's form), or None."""
    with cell_db.read_session() as s:
        text = s.scalars(sa.select(cm.InstanceExtra.numa_topology).where(
            cm.InstanceExtra.instance_uuid == instance_uuid)).first()
    return json.loads(text) if text else None
