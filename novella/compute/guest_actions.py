"""The server actions a host runs on its own guest (bound into ComputeManager).

Each is one step (novella/compute/steps.py) that a user action asked for;
the API set the server's task state and recorded the action before it cast.

    pause_instance / unpause_instance      pausing / unpausing     paused / active
    suspend_instance / resume_instance     suspending / resuming   suspended / active
    rescue_instance                        rescuing                rescued (booted from
                                                                   the rescue image)
    unrescue_instance                      unrescuing              active
    rebuild_in_place                       rebuilding, then        active or stopped, the
                                           rebuild_spawning        local disks made anew
                                                                   from the server's image
    snapshot_instance / backup_instance    image_snapshot_pending  the root disk uploaded
                                           (image_backup), then    as the image the API made
                                           image_uploading         (a backup rotates older
                                                                   backups away)
    set_admin_password                     updating_password       (call) the guest's
                                                                   password set
    soft_delete_instance                   soft-deleting           soft-delete: powered off,
                                                                   everything else kept
    restore_instance                       restoring               active again
    trigger_crash_dump                     (none)                  an NMI to the guest
    inject_network_info                    (none)                  the info cache's network
                                                                   configuration written
                                                                   into the guest
    get_console_output                     (none)                  (call) the console log

A step that fails records a fault and clears the task state; the server
keeps its vm_state (a failed rebuild goes to error, as in the reference).
Every driver call here is safe to repeat, so a host whose service died in
the middle runs the step again from its beginning when it starts
(novella/compute/recovery.py); what a step needs beyond the task state
(the image to upload, the rebuild's options) the API noted in the
server's system metadata before it cast.

``reclaim_queued_deletes`` (periodic, ``[DEFAULT] reclaim_instance_interval``)
deletes the servers soft-deleted here longer ago than that.
"""
import base64
import datetime

import sqlalchemy as sa

from novella.compute import cleanup
from novella.compute import evacuate
from novella.compute import states as vm_states
from novella.compute import steps
from novella.compute import teardown
from novella.compute import volume_ops
from novella.compute.states import power_state, task_states
from novella.compute import guest
from novella.compute import shelve
from novella.context import get_admin_context
from novella.db import cell_models as m
from novella.db import host_operations
from novella.db import records
from novella.rpc import notifications

# System metadata the API notes for a step that a restarted host runs again.
_SOFT_DELETE = sa.update(m.Instance).where(
    m.Instance.uuid == sa.bindparam("b_uuid"), m.Instance.deleted == 0).values(
    {c: sa.bindparam(f"b_{c}") for c in ("vm_state", "task_state", "power_state",
                                          "terminated_at", "deleted_at", "deleted")})
_SOFT_DELETE_BDMS = sa.update(m.BlockDeviceMapping).where(
    m.BlockDeviceMapping.instance_uuid == sa.bindparam("b_uuid"),
    m.BlockDeviceMapping.deleted == 0).values(
    deleted=m.BlockDeviceMapping.id, deleted_at=sa.bindparam("b_deleted_at"))

SNAPSHOT_IMAGE = "snapshot_image_id"
BACKUP_ARGS = ("backup_type", "backup_rotation")
REBUILD_PRESERVE_EPHEMERAL = "rebuild_preserve_ephemeral"
RESCUE_IMAGE = "rescue_image_ref"
# The rescue image's properties that ask for a stable device rescue (noted as they are).
STABLE_RESCUE = ("hw_rescue_bus", "hw_rescue_device")
RESCUE_VALUES = {"hw_rescue_bus": ("fdc", "ide", "sata", "scsi", "usb", "virtio", "xen", "lxc",
                                   "uml"),
                 "hw_rescue_device": ("cdrom", "disk", "floppy", "fs", "lun")}
OLD_VM_STATE = "old_vm_state"


def injected(files):
    """The driver's ``injected_files`` argument for the API's personality files:
    ``[(path, bytes)]``, given only when there are some."""
    if not files:
        return {}
    return {"injected_files": [(f.get("path", ""), base64.b64decode(f.get("contents") or ""))
                               for f in files]}


def _guest_step(compute, ctxt, instance_uuid, event, notification, task, vm_state, act,
                **values):
    """One standalone step: ``act(instance dict, row)`` on the guest, then the
    server in ``vm_state`` with no task and the guest's power state."""
    with steps.step(compute, ctxt, instance_uuid, event, notification,
                    standalone=True) as st:
        act(guest.instance_dict(st.instance), st.instance)
        st.instance = guest.update(compute, instance_uuid, expected_task_state=task,
                                   vm_state=vm_state, task_state=None,
                                   power_state=guest.power(compute, instance_uuid), **values)


def pause_instance(compute, ctxt, instance_uuid):
    _guest_step(compute, ctxt, instance_uuid, "compute_pause_instance", notifications.PAUSE,
                     task_states.PAUSING, vm_states.PAUSED,
                     lambda told, row: compute.driver.pause(told))


def unpause_instance(compute, ctxt, instance_uuid):
    _guest_step(compute, ctxt, instance_uuid, "compute_unpause_instance",
                     notifications.UNPAUSE, task_states.UNPAUSING, vm_states.ACTIVE,
                     lambda told, row: compute.driver.unpause(told))


def suspend_instance(compute, ctxt, instance_uuid):
    _guest_step(compute, ctxt, instance_uuid, "compute_suspend_instance",
                     notifications.SUSPEND, task_states.SUSPENDING, vm_states.SUSPENDED,
                     lambda told, row: compute.driver.suspend(ctxt, told))


def resume_instance(compute, ctxt, instance_uuid):
    _guest_step(compute, ctxt, instance_uuid, "compute_resume_instance", notifications.RESUME,
                     task_states.RESUMING, vm_states.ACTIVE,
                     lambda told, row: compute.driver.resume(
                         ctxt, told, guest.network_info_of(row),
                         guest.block_device_info(compute, instance_uuid)))


def rescue_instance(compute, ctxt, instance_uuid, rescue_password=None):
    """Boot the guest from the rescue image the API noted (default: its own image);
    with the image's ``hw_rescue_bus`` / ``hw_rescue_device`` (noted too) a stable
    device rescue: the guest's own disks stay where they are, the rescue disk is
    added on that bus and device and booted from."""
    noted = records.system_metadata(compute.cell_db, instance_uuid)
    image_ref = noted.get(RESCUE_IMAGE)
    props = {key: noted[key] for key in STABLE_RESCUE if noted.get(key)}
    with steps.step(compute, ctxt, instance_uuid, "compute_rescue_instance",
                    notifications.RESCUE, standalone=True,
                    rescue_image_ref=image_ref) as st:
        inst = st.instance
        compute.driver.rescue(ctxt, guest.instance_dict(inst), guest.network_info_of(inst),
                           {"id": image_ref or inst.image_ref or None, "properties": props},
                           rescue_password,
                           block_device_info=guest.block_device_info(compute, instance_uuid))
        st.instance = guest.update(compute, instance_uuid, expected_task_state=task_states.RESCUING,
                                   vm_state=vm_states.RESCUED, task_state=None,
                                   power_state=guest.power(compute, instance_uuid),
                                   launched_at=records.utcnow())


def unrescue_instance(compute, ctxt, instance_uuid):
    with steps.step(compute, ctxt, instance_uuid, "compute_unrescue_instance",
                    notifications.UNRESCUE, standalone=True) as st:
        compute.driver.unrescue(ctxt, guest.instance_dict(st.instance))
        st.instance = guest.update(compute, instance_uuid,
                                   expected_task_state=task_states.UNRESCUING,
                                   vm_state=vm_states.ACTIVE, task_state=None,
                                   power_state=guest.power(compute, instance_uuid))
    records.set_system_metadata(compute.cell_db, instance_uuid, **{
        RESCUE_IMAGE: None, OLD_VM_STATE: None, **dict.fromkeys(STABLE_RESCUE)})


def rebuild_in_place(compute, ctxt, instance_uuid, admin_password=None, injected_files=None):
    """The guest's local disks made anew from the server's image (the API set it),
    on this host: its allocation, ports and volumes stay as they are."""
    noted = records.system_metadata(compute.cell_db, instance_uuid)
    preserve = noted.get(REBUILD_PRESERVE_EPHEMERAL) == "True"
    with steps.step(compute, ctxt, instance_uuid, "compute_rebuild_instance",
                    notifications.REBUILD, error_vm_state=vm_states.ERROR,
                    standalone=True) as st:
        inst = guest.update(compute, instance_uuid, expected_task_state=(
            task_states.REBUILDING, task_states.REBUILD_SPAWNING),
            task_state=task_states.REBUILD_SPAWNING)
        stopped = inst.vm_state == vm_states.STOPPED
        reimage = host_operations.of_server(compute.cell_db, instance_uuid).get(
            volume_ops.REIMAGE_ROOT)
        reimage = reimage and reimage.state["image_id"]
        if reimage:  # a volume-backed server's root volume gets the image (2.93)
            volume_ops.reimage_root_volume(compute, ctxt, inst, reimage)
        told = guest.instance_dict(inst)
        image = {"id": reimage or inst.image_ref, "properties": {}}
        if compute.driver.instance_exists(told):
            compute.driver.rebuild(ctxt, told, image, network_info=guest.network_info_of(inst),
                                block_device_info=guest.block_device_info(compute, instance_uuid),
                                preserve_ephemeral=preserve, power_on=not stopped,
                                **injected(injected_files))
        else:  # a server in error whose guest is gone: made anew
            compute.driver.spawn(ctxt, told, image, network_info=guest.network_info_of(inst),
                              block_device_info=guest.block_device_info(compute, instance_uuid),
                              power_on=not stopped, **injected(injected_files))
        if admin_password and not stopped:
            _set_password_if_supported(compute, inst, admin_password)
        st.instance = guest.update(compute, 
            instance_uuid, expected_task_state=task_states.REBUILD_SPAWNING,
            vm_state=vm_states.STOPPED if stopped else vm_states.ACTIVE, task_state=None,
            power_state=guest.power(compute, instance_uuid), launched_at=records.utcnow())
    records.set_system_metadata(compute.cell_db, instance_uuid,
                                **{REBUILD_PRESERVE_EPHEMERAL: None})


def _set_password_if_supported(compute, inst, password):
    try:
        compute.driver.set_admin_password(guest.instance_dict(inst), password)
    except NotImplementedError:
        pass  # a hypervisor without an agent boots the image as it is


def snapshot_instance(compute, ctxt, instance_uuid, image_id):
    """Upload the root disk as image ``image_id`` (made by the API, queued)."""
    _upload_root_disk(compute, ctxt, instance_uuid, image_id, "compute_snapshot_instance",
                           task_states.IMAGE_SNAPSHOT_PENDING)


def backup_instance(compute, ctxt, instance_uuid, image_id, backup_type, rotation):
    """A snapshot, then only the ``rotation`` newest backups of that type kept."""
    _upload_root_disk(compute, ctxt, instance_uuid, image_id, "compute_backup_instance",
                           task_states.IMAGE_BACKUP)
    _rotate_backups(compute, ctxt, instance_uuid, backup_type, int(rotation))


def _upload_root_disk(compute, ctxt, instance_uuid, image_id, event, first_task):
    try:
        with steps.step(compute, ctxt, instance_uuid, event, notifications.SNAPSHOT,
                        standalone=True, snapshot_image_id=image_id) as st:
            inst = guest.update(compute, instance_uuid, expected_task_state=(
                first_task, task_states.IMAGE_UPLOADING),
                task_state=task_states.IMAGE_UPLOADING)
            if not shelve.uploaded(compute, ctxt, image_id):
                compute.driver.snapshot(ctxt, guest.instance_dict(inst), image_id)
            st.instance = guest.update(compute, instance_uuid,
                                       expected_task_state=task_states.IMAGE_UPLOADING,
                                       task_state=None)
    except Exception:
        if compute.image_api is not None and not shelve.uploaded(compute, ctxt, image_id):
            with cleanup.step("delete the unfinished image"):
                compute.image_api.delete(ctxt, image_id)
        raise
    finally:
        if _get_or_none(compute, instance_uuid) is not None:
            records.set_system_metadata(compute.cell_db, instance_uuid, **{
                SNAPSHOT_IMAGE: None, **{k: None for k in BACKUP_ARGS}})


def _rotate_backups(compute, ctxt, instance_uuid, backup_type, rotation):
    if compute.image_api is None:
        return
    backups = [i for i in compute.image_api.list(None, {
        "instance_uuid": instance_uuid, "image_type": "backup",
        "backup_type": backup_type}) if i["status"] == "active"]
    backups.reverse()  # newest first (the list is in the order they were made)
    for image in backups[rotation:]:
        with cleanup.step(f"rotate backup {image['id']} away"):
            compute.image_api.delete(ctxt, image["id"])


def _get_or_none(compute, instance_uuid):
    try:
        return guest.get(compute, instance_uuid)
    except records.InstanceNotFound:
        return None


def set_admin_password(compute, ctxt, instance_uuid, new_pass):
    """(call) The guest's administrator password; NotImplementedError when the
    hypervisor cannot set one (the API answers 501)."""
    _guest_step(compute, ctxt, instance_uuid, "compute_set_admin_password", None,
                     task_states.UPDATING_PASSWORD, vm_states.ACTIVE,
                     lambda told, row: compute.driver.set_admin_password(told, new_pass))


def trigger_crash_dump(compute, ctxt, instance_uuid):
    with steps.step(compute, ctxt, instance_uuid, "compute_trigger_crash_dump",
                    notifications.TRIGGER_CRASH_DUMP, standalone=True) as st:
        compute.driver.inject_nmi(guest.instance_dict(st.instance))


def inject_network_info(compute, ctxt, instance_uuid):
    """The guest's network configuration, as its info cache has it, written into it
    again. Nothing is recorded before: writing it twice is writing it once, and a
    cast lost with this service is lost as in the reference. A failure is a fault."""
    with guest.locked(compute, instance_uuid):
        inst = guest.get(compute, instance_uuid)
        try:
            compute.driver.inject_network_info(guest.instance_dict(inst), guest.network_info_of(inst))
        except Exception as exc:
            records.add_fault(compute.cell_db, instance_uuid, exc, host=compute.host)
            raise


def get_console_output(compute, ctxt, instance_uuid, tail_length=None):
    """(call) The guest's console log, its last ``tail_length`` lines if given."""
    output = compute.driver.get_console_output(ctxt, guest.instance_dict(guest.get(compute, 
        instance_uuid)))
    if tail_length is not None:
        lines = output.split("\n")
        output = "\n".join(lines[-int(tail_length):]) if int(tail_length) else ""
    return output


def soft_delete_instance(compute, ctxt, instance_uuid):
    _guest_step(compute, ctxt, instance_uuid, "compute_soft_delete_instance",
                     notifications.SOFT_DELETE, task_states.SOFT_DELETING,
                     vm_states.SOFT_DELETED,
                     lambda told, row: compute.driver.power_off(told))


def restore_instance(compute, ctxt, instance_uuid):
    _guest_step(compute, ctxt, instance_uuid, "compute_restore_instance",
                     notifications.RESTORE, task_states.RESTORING, vm_states.ACTIVE,
                     lambda told, row: compute.driver.power_on(
                         ctxt, told, guest.network_info_of(row),
                         guest.block_device_info(compute, instance_uuid)))


def reclaim_queued_deletes(compute, ctxt=None):
    """Delete the servers soft-deleted here more than ``reclaim_instance_interval``
    seconds ago. Returns their uuids."""
    interval = compute.conf.reclaim_instance_interval
    if interval <= 0:
        return []
    due = records.utcnow() - datetime.timedelta(seconds=interval)
    with compute.cell_db.read_session() as s:
        expired = s.scalars(sa.select(m.Instance.uuid).where(
            m.Instance.host == compute.host, m.Instance.deleted == 0,
            m.Instance.vm_state == vm_states.SOFT_DELETED,
            m.Instance.task_state.is_(None), m.Instance.deleted_at < due)).all()
    ctxt = ctxt or get_admin_context()
    reclaimed = []
    for uuid in expired:
        with cleanup.step(f"reclaim soft-deleted server {uuid}"):
            guest.update(compute, uuid, expected_task_state=None,
                         expected_vm_state=vm_states.SOFT_DELETED,
                         task_state=task_states.DELETING, reload=False)
            compute.terminate_instance(ctxt, uuid)
            reclaimed.append(uuid)
    return reclaimed


# -- power -----------------------------------------------------------------------

def stop_instance(compute, ctxt, instance_uuid, clean_shutdown=True):
    with steps.step(compute, ctxt, instance_uuid, "compute_stop_instance",
                         notifications.POWER_OFF, standalone=True) as st:
        inst = st.instance
        timeout = 60 if clean_shutdown else 0
        compute.driver.power_off(guest.instance_dict(inst), timeout=timeout)
        st.instance = guest.update(compute, instance_uuid,
                              expected_task_state=(task_states.POWERING_OFF, None),
                              vm_state=vm_states.STOPPED, task_state=None,
                              power_state=compute.driver.get_info({"uuid": instance_uuid})["state"])


def start_instance(compute, ctxt, instance_uuid):
    with steps.step(compute, ctxt, instance_uuid, "compute_start_instance",
                         notifications.POWER_ON, standalone=True) as st:
        inst = st.instance
        compute.driver.power_on(ctxt, guest.instance_dict(inst), guest.network_info_of(inst),
                             guest.block_device_info(compute, instance_uuid))
        st.instance = guest.update(compute, instance_uuid,
                              expected_task_state=(task_states.POWERING_ON, None),
                              vm_state=vm_states.ACTIVE, task_state=None,
                              power_state=compute.driver.get_info({"uuid": instance_uuid})["state"])


def reboot_instance(compute, ctxt, instance_uuid, reboot_type="SOFT"):
    soft = reboot_type.upper() == "SOFT"
    pending = ((task_states.REBOOTING, task_states.REBOOT_PENDING, None) if soft else
               (task_states.REBOOTING_HARD, task_states.REBOOT_PENDING_HARD, None))
    started = task_states.REBOOT_STARTED if soft else task_states.REBOOT_STARTED_HARD
    with steps.step(compute, ctxt, instance_uuid, "compute_reboot_instance", notifications.REBOOT,
                         error_vm_state=vm_states.ERROR, standalone=True) as st:
        inst = guest.update(compute, instance_uuid, expected_task_state=pending, task_state=started)
        compute.driver.reboot(ctxt, guest.instance_dict(inst), guest.network_info_of(inst),
                           reboot_type="SOFT" if soft else "HARD",
                           block_device_info=guest.block_device_info(compute, instance_uuid))
        st.instance = guest.update(compute, instance_uuid, expected_task_state=started,
                              vm_state=vm_states.ACTIVE, task_state=None,
                              power_state=compute.driver.get_info({"uuid": instance_uuid})["state"])


def terminate_instance(compute, ctxt, instance_uuid, bdms=None, **kwargs):
    """Destroy the guest, free network, volumes and placement, soft-delete the row."""
    started = False
    try:
        with steps.step(compute, ctxt, instance_uuid, "compute_terminate_instance",
                             notifications.DELETE, error_vm_state=vm_states.ERROR, standalone=True) as st:
            started = True
            inst = st.instance
            bdms = guest.bdms_of(compute, instance_uuid)
            guest.notify(compute, ctxt, inst, notifications.event_type(notifications.SHUTDOWN, "start"))
            teardown.give_back(compute, ctxt, inst, guest=(teardown.GUEST,), bdms=bdms,
                               ports=teardown.DEALLOCATE, strict=True)
            guest.notify(compute, ctxt, inst, notifications.event_type(notifications.SHUTDOWN, "end"))
            teardown.give_back(compute, ctxt, inst, volumes=teardown.DELETE, bdms=bdms,
                               allocation=instance_uuid, strict=True)
            evacuate.free_down_sources(compute, ctxt, instance_uuid)
            st.instance = _soft_delete(compute, inst)
            compute.rt.instance_removed(inst)
    except records.InstanceNotFound:
        if started:
            raise
        return  # already gone: deleting twice is not an error
    guest.forget_lock(compute, instance_uuid)


def _soft_delete(compute, inst):
    """Mark the instance and its BDMs deleted; return ``inst`` showing it."""
    now = records.utcnow()
    deleted = {"vm_state": vm_states.DELETED, "task_state": None,
               "power_state": power_state.NOSTATE, "terminated_at": now,
               "deleted_at": now, "deleted": inst.id}
    with compute.cell_db.connection(write=True) as conn:
        if not conn.execute(_SOFT_DELETE, {"b_uuid": inst.uuid, **{
                f"b_{k}": v for k, v in deleted.items()}}).rowcount:
            raise records.InstanceNotFound(f"Instance {inst.uuid} could not be found.")
        conn.execute(_SOFT_DELETE_BDMS, {"b_uuid": inst.uuid, "b_deleted_at": now})
    for column, value in deleted.items():  # for the notification, as the row now is
        setattr(inst, column, value)
    return inst


# task state -> how a restarted host finishes the step (recovery.py)
def resume_interrupted(compute, ctxt, uuid, task_state):
    """Run again the guest action ``task_state`` says was interrupted; False if it is
    not one of these."""
    noted = None
    simple = {task_states.PAUSING: compute.pause_instance,
              task_states.UNPAUSING: compute.unpause_instance,
              task_states.SUSPENDING: compute.suspend_instance,
              task_states.RESUMING: compute.resume_instance,
              task_states.RESCUING: compute.rescue_instance,
              task_states.UNRESCUING: compute.unrescue_instance,
              task_states.SOFT_DELETING: compute.soft_delete_instance,
              task_states.RESTORING: compute.restore_instance,
              task_states.REBUILDING: compute.rebuild_in_place,
              task_states.REBUILD_SPAWNING: compute.rebuild_in_place}
    if task_state in simple:
        simple[task_state](ctxt, uuid)
        return True
    if task_state == task_states.UPDATING_PASSWORD:
        # The password was never kept: the caller had no answer; nothing more to do.
        guest.update(compute, uuid, task_state=None, reload=False)
        return True
    if task_state in (task_states.IMAGE_SNAPSHOT_PENDING, task_states.IMAGE_BACKUP,
                      task_states.IMAGE_UPLOADING):
        noted = records.system_metadata(compute.cell_db, uuid)
        image_id = noted.get(SNAPSHOT_IMAGE)
        if not image_id:
            guest.update(compute, uuid, task_state=None, reload=False)
        elif noted.get("backup_type"):
            backup_instance(compute, ctxt, uuid, image_id, noted["backup_type"],
                                    noted.get("backup_rotation") or 0)
        else:
            snapshot_instance(compute, ctxt, uuid, image_id)
        return True
    return False


INTERRUPTIBLE = (task_states.PAUSING, task_states.UNPAUSING, task_states.SUSPENDING,
                 task_states.RESUMING, task_states.RESCUING, task_states.UNRESCUING,
                 task_states.SOFT_DELETING, task_states.RESTORING, task_states.REBUILDING,
                 task_states.REBUILD_SPAWNING, task_states.UPDATING_PASSWORD,
                 task_states.IMAGE_SNAPSHOT_PENDING, task_states.IMAGE_BACKUP,
                 task_states.IMAGE_UPLOADING)
