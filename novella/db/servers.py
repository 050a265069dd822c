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
            cm.BlockDeviceMapping.destination_type == "volume")).all()


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
