"""A server on this host as every operation reads and writes it.

Plain functions over the host's ``ComputeManager`` (``compute``: its cell
database, driver, notifier and per-server locks), imported by the modules
of each operation: the server's row read and written, under its lock; what
the driver is told of it (``instance_dict``, ``block_device_info``); its
network info cache; its block device mappings; its move's migration row; the
notifications it sends.
"""
import contextlib
import json
import logging

import sqlalchemy as sa

from novella.db import cell_models as m
from novella.db import migration_records
from novella.db import records
from novella.rpc import notifier as notifier_mod

LOG = logging.getLogger(__name__)


@contextlib.contextmanager
def locked(compute, instance_uuid):
    with compute._locks_lock:
        lock = compute._instance_locks[instance_uuid]
    with lock:
        yield


def forget_lock(compute, instance_uuid):
    """The server's lock goes with the server (deleted here)."""
    with compute._locks_lock:
        compute._instance_locks.pop(instance_uuid, None)


def get(compute, instance_uuid):
    with compute.cell_db.read_session() as s:
        return records.get_instance(s, instance_uuid)


def update(compute, instance_uuid, **values):
    return records.update_instance(compute.cell_db, instance_uuid, **values)


def instance_dict(inst, flavor=None):
    """What the driver is told about an instance."""
    return {"uuid": inst.uuid, "name": f"instance-{inst.id:08x}", "id": inst.id,
            "display_name": inst.display_name, "project_id": inst.project_id,
            "user_id": inst.user_id, "host": inst.host, "node": inst.node,
            "image_ref": inst.image_ref, "vm_state": inst.vm_state,
            "availability_zone": inst.availability_zone,
            # What a guest is told about itself (the config drive's metadata).
            "hostname": inst.hostname, "key_name": inst.key_name, "key_data": inst.key_data,
            "user_data": inst.user_data, "config_drive": inst.config_drive,
            "launch_index": inst.launch_index,
            "flavor": flavor or records.flavor_of(inst) or {
                "vcpus": inst.vcpus, "memory_mb": inst.memory_mb, "root_gb": inst.root_gb,
                "ephemeral_gb": inst.ephemeral_gb, "swap": 0, "extra_specs": {}}}


def notify(compute, ctxt, inst, event_type, fault=None, network_info=None, flavor=None,
            **extra):
    """``event_type`` of novella/rpc/notifications.py, its payload from ``inst``."""
    if compute.notifier is None:
        return
    try:
        if network_info is None:
            try:
                network_info = network_info_of(inst)
            except Exception:  # noqa: BLE001 - a row without its cache (deleted)
                network_info = []
        bdms = (bdms_of(compute, inst.uuid)
                if notifier_mod._conf().notifications.bdms_in_notifications else None)
        payload = notifier_mod.instance_payload(
            inst, flavor or records.flavor_of(inst), network_info=network_info,
            fault=fault, ctxt=ctxt, bdms=bdms, event_type=event_type, **extra)
        compute.notifier(ctxt, compute.publisher_id, event_type, payload)
    except Exception:  # noqa: BLE001 - a notification never breaks an operation
        LOG.exception("could not send %s", event_type)


def network_info_of(inst):
    """The server's network info, as its info cache holds it."""
    cache = inst.info_cache
    return json.loads(cache.network_info) if cache is not None and cache.network_info else []


def save_network_info(compute, instance_uuid, network_info, read=None):
    """Replace the instance's info cache. ``read``: the instance row read under its
    lock, whose cache is the one there (written then without being read again)."""
    if read is not None:
        keep_cached(network_info_of(read), network_info)
        text = json.dumps(network_info or [])
        if read.info_cache is None or read.info_cache.network_info != text:
            records.set_network_info(compute.cell_db, instance_uuid, network_info)
            if read.info_cache is not None:
                read.info_cache.network_info = text
        return
    with compute.cell_db.session(write=True) as s:
        cache = info_cache_in(s, instance_uuid)
        keep_cached(json.loads(cache.network_info or "[]"), network_info)
        cache.network_info = json.dumps(network_info or [])


def info_cache_in(s, instance_uuid):
    """The server's info cache row in session ``s`` (made when it has none)."""
    cache = s.scalars(sa.select(m.InstanceInfoCache).where(
        m.InstanceInfoCache.instance_uuid == instance_uuid)).first()
    if cache is None:
        cache = m.InstanceInfoCache(instance_uuid=instance_uuid)
        s.add(cache)
    return cache


def bdms_of(compute, instance_uuid):
    with compute.cell_db.read_session() as s:
        return list(s.scalars(sa.select(m.BlockDeviceMapping).where(
            m.BlockDeviceMapping.instance_uuid == instance_uuid,
            m.BlockDeviceMapping.deleted == 0).order_by(m.BlockDeviceMapping.id)))


def block_device_info(compute, instance_uuid, bdms=None):
    """The volumes of an instance as the driver sees them.

    ``bdms``: the instance's BDM rows when the caller has just read them;
    read again only if one is a volume (its attachment may have changed).
    """
    if bdms is None or any(is_volume(b) for b in bdms):
        bdms = bdms_of(compute, instance_uuid)
    vols = [driver_volume(b, b.attachment_id,
                          json.loads(b.connection_info) if b.connection_info else None)
            for b in bdms if is_volume(b)]
    return {"block_device_mapping": vols}


def driver_volume(bdm, attachment_id, connection_info):
    """A volume of ``block_device_info``: the driver's view of a volume mapping."""
    return {"volume_id": bdm.volume_id, "boot_index": bdm.boot_index,
            "image_id": bdm.image_id,  # what a volume made from an image was made of
            "mount_device": bdm.device_name, "attachment_id": attachment_id,
            "connection_info": connection_info}


def is_volume(bdm):
    return bdm.destination_type == "volume" and bool(bdm.volume_id)


def migration(compute, migration_uuid, **values):
    if values:
        return migration_records.update(compute.cell_db, migration_uuid, **values)
    return migration_records.get(compute.cell_db, migration_uuid)


def power(compute, instance_uuid):
    return compute.driver.get_info({"uuid": instance_uuid})["state"]


def keep_cached(cached, network_info):
    """What the ports do not say is kept from ``cached`` (the info cache as it was)
    through the moves and rebinds that write the cache again from the ports: a
    device tag (kept nowhere else), and whether the port is the user's
    (``preserve_on_delete``, which a network client reading ports back from
    Neutron cannot know and gives as None)."""
    known = {vif.get("id"): vif for vif in cached or []}
    for vif in network_info or []:
        was = known.get(vif.get("id"))
        if was is None:
            continue
        if not vif.get("tag") and was.get("tag"):
            vif["tag"] = was["tag"]
        if vif.get("preserve_on_delete") is None and was.get("preserve_on_delete") is not None:
            vif["preserve_on_delete"] = was["preserve_on_delete"]
