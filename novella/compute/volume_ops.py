"""Attaching a volume to, detaching it from, and swapping it on a running server.

Bound into ``ComputeManager``: the API has reserved the volume (an
attachment in ``reserved``) and recorded the instance action; the host
connects the attachment, plugs the volume into the guest, completes the
attachment and writes the block device mapping. Detach undoes the same in
reverse. Each is one action event (``compute_attach_volume`` /
``compute_detach_volume``) with ``instance.volume_attach``/``_detach``
notifications.

Swap (``swap_volume``): the API has marked the old volume ``detaching``,
reserved the new one (an attachment of its own) and begun the swap in the
server's record of in-flight work (novella/db/host_operations.py, kind
``SWAP``: old, new, attachment, whether the volume service is migrating the
old volume, the size to grow to) before it casts. The host connects the new attachment, has the hypervisor copy the
guest's volume to the new one, completes the new attachment, deletes the
old one, ends the volume service's migration (``migrate_volume_completion``,
which names the volume id the mapping keeps) and points the block device
mapping at it; then the record ends. A host whose service stopped in between
finds it as it starts and runs the swap again from its beginning:
each effect is one the swap may repeat. A swap that fails gives the old
volume back (``in-use``), deletes the new attachment and leaves the mapping
as it was.

Rebuild of a volume-backed server with another image (2.93,
``reimage_root_volume``, a part of the rebuild): the root volume gets a new
attachment of the server's (reserved), its old one goes, the volume service
writes the image onto it (``reimage``, which needs it reserved) and the new
attachment is connected here; the block device mapping names it. Each part
may run again: a live attachment of the server's on that volume other than
the mapping's is one a stopped service left, and goes first. The API begins
it (kind ``REIMAGE_ROOT``: the image) before it casts the rebuild; a service
that stops in the middle runs the rebuild again as it starts (its task
state), and with it this.

Assisted volume snapshots (``volume_snapshot_create`` / ``_delete``): the
hypervisor snapshots an attached volume for the volume service.

An image of a volume-backed server (the API snapshots its volumes): the
guest is quiesced first where the driver can (``quiesce_instance``, begun
as kind ``QUIESCE`` before the guest freezes) and thawed once the volume
snapshots are made (``unquiesce_instance``, which waits for them); a
service that stops in between thaws the guest as it starts, and a guest
whose thaw never came (the API process died between its two calls) is
thawed by ``thaw_forgotten_guests`` once it has been frozen longer than
``FROZEN_AT_MOST`` (a periodic task while the service has a guest frozen).

A build whose mappings ask for a volume made from a snapshot (an image of a
volume-backed server names them), from an image (boot from volume) or blank
has the volume service make it
(``create_volumes``); the volume's id is written on the mapping before the
volume service is asked, so a build that dies between leaves a mapping whose
volume goes with the server.
"""
import datetime
import json
import logging
import time
import uuid as uuid_mod

from novella import service
from novella.compute import cleanup
from novella.compute import steps
from novella.compute import guest
from novella.context import get_admin_context
from novella.rpc import notifications
from novella.db import cell_models as m
from novella.db import host_operations
from novella.db import records
from novella.db.timestamps import utcnow

LOG = logging.getLogger(__name__)
# Kinds of the host's operations (novella/db/host_operations.py), named as the
# system-metadata notes they replaced.
SWAP = "swap_volume"  # the swap in progress
QUIESCE = "quiesced_for_snapshot"  # the guest may be frozen (since when)
REIMAGE_ROOT = "rebuild_reimage_root"  # the image a rebuild writes on the root volume (2.93)
# Longer than an image's volume snapshots plus the thaw's own wait for them take:
# a guest frozen longer was forgotten by the API that froze it.
FROZEN_AT_MOST = datetime.timedelta(seconds=300)
# Mappings whose volume the host has made, by source: the field that must be set.
_MADE_FROM = {"snapshot": "snapshot_id", "image": "image_id", "blank": "volume_size"}


def next_device_name(used, prefix="/dev/vd"):
    """The first free ``/dev/vdX`` after the root disk (``vda``)."""
    taken = {(d or "").rsplit("/", 1)[-1] for d in used}
    for letter in "bcdefghijklmnopqrstuvwxyz":
        if f"vd{letter}" not in taken:
            return prefix + letter
    raise ValueError("no free device name")


def attach_volume(compute, ctxt, instance_uuid, volume_id, attachment_id, device=None,
                  tag=None, delete_on_termination=False):
    """Connect and plug ``volume_id``; returns the block device mapping as a dict."""
    with steps.step(compute, ctxt, instance_uuid, "compute_attach_volume",
                         notifications.VOLUME_ATTACH, standalone=True,
                         volume_id=volume_id) as st:
        inst = st.instance
        bdms = guest.bdms_of(compute, instance_uuid)
        device = device or next_device_name([b.device_name for b in bdms] + ["/dev/vda"])
        try:
            connector = compute.driver.get_volume_connector(guest.instance_dict(inst))
            info = {}
            if compute.volume_api is not None:
                att = compute.volume_api.attachment_update(ctxt, attachment_id, connector,
                                                        mountpoint=device)
                info = att.get("connection_info") or {}
            info = dict(info, volume_id=volume_id)
            info.setdefault("driver_volume_type", "simulated")
            compute.driver.attach_volume(ctxt, info, guest.instance_dict(inst), device)
            if compute.volume_api is not None:
                compute.volume_api.attachment_complete(ctxt, attachment_id)
        except Exception:
            if compute.volume_api is not None:
                try:
                    compute.volume_api.attachment_delete(ctxt, attachment_id)
                except Exception:  # noqa: BLE001 - keep the original error
                    LOG.exception("could not delete attachment %s", attachment_id)
            raise
        row = m.BlockDeviceMapping(
            uuid=str(uuid_mod.uuid4()), instance_uuid=instance_uuid, source_type="volume",
            destination_type="volume", device_name=device, volume_id=volume_id,
            attachment_id=attachment_id, connection_info=json.dumps(info), tag=tag,
            delete_on_termination=bool(delete_on_termination), boot_index=None)
        with compute.cell_db.session(write=True) as s:
            s.add(row)
            s.flush()
            result = {"uuid": row.uuid, "volume_id": volume_id, "device_name": device,
                      "attachment_id": attachment_id, "tag": tag,
                      "delete_on_termination": bool(delete_on_termination)}
    return result


def detach_volume(compute, ctxt, instance_uuid, volume_id, attachment_id=None):
    """Unplug ``volume_id``, delete its attachment and block device mapping."""
    with steps.step(compute, ctxt, instance_uuid, "compute_detach_volume",
                         notifications.VOLUME_DETACH, standalone=True,
                         volume_id=volume_id) as st:
        inst = st.instance
        bdm = next((b for b in guest.bdms_of(compute, instance_uuid) if b.volume_id == volume_id), None)
        if bdm is None:
            return
        info = json.loads(bdm.connection_info) if bdm.connection_info else {}
        try:
            compute.driver.detach_volume(ctxt, info, guest.instance_dict(inst), bdm.device_name)
        except Exception:
            if compute.volume_api is not None:
                compute.volume_api.roll_detaching(ctxt, volume_id)
            raise
        if compute.volume_api is not None and (bdm.attachment_id or attachment_id):
            compute.volume_api.attachment_delete(ctxt, bdm.attachment_id or attachment_id)
        with compute.cell_db.session(write=True) as s:
            row = s.get(m.BlockDeviceMapping, bdm.id)
            row.deleted, row.deleted_at = row.id, records.utcnow()
            row.attachment_id = None


def swap_volume(compute, ctxt, instance_uuid, old_volume_id, new_volume_id, new_attachment_id):
    """The guest's ``old_volume_id`` replaced by ``new_volume_id`` (see above)."""
    begun = host_operations.of_server(compute.cell_db, instance_uuid).get(SWAP)
    note = begun.state if begun else {
        "old": old_volume_id, "new": new_volume_id, "attachment": new_attachment_id,
        "migration": False, "resize_to": 0}
    with steps.step(compute, ctxt, instance_uuid, "compute_swap_volume",
                    notifications.VOLUME_SWAP, standalone=True,
                    old_volume_id=old_volume_id, new_volume_id=new_volume_id) as st:
        _swap(compute, ctxt, st.instance, note)


def _swap(compute, ctxt, inst, note):
    uuid, att_id = inst.uuid, note["attachment"]
    bdms = [b for b in guest.bdms_of(compute, uuid) if guest.is_volume(b)]
    if any(b.attachment_id == att_id for b in bdms):  # it was done
        host_operations.end(compute.cell_db, uuid, SWAP)
        return
    bdm = next((b for b in bdms if b.volume_id == note["old"]), None)
    if bdm is None:
        raise ValueError(f"volume {note['old']} is not attached to {uuid}")
    old_info = json.loads(bdm.connection_info) if bdm.connection_info else {}
    old_info.setdefault("volume_id", note["old"])
    swapped = False
    try:
        connector = compute.driver.get_volume_connector(guest.instance_dict(inst))
        att = compute.volume_api.attachment_update(ctxt, att_id, connector,
                                                mountpoint=bdm.device_name)
        new_info = dict(att.get("connection_info") or {}, volume_id=note["new"])
        compute.driver.swap_volume(ctxt, old_info, new_info, guest.instance_dict(inst),
                                bdm.device_name, note["resize_to"])
        swapped = True
        compute.volume_api.attachment_complete(ctxt, att_id)
    except Exception:
        _swap_failed(compute, ctxt, inst, note, bdm, old_info, swapped)
        raise
    if bdm.attachment_id:
        try:
            compute.volume_api.attachment_delete(ctxt, bdm.attachment_id)
        except Exception as exc:
            if getattr(exc, "code", None) != 404:
                raise  # else: deleted before this service stopped
    save_id = note["new"]
    if note["migration"]:
        save_id = compute.volume_api.migrate_volume_completion(
            ctxt, note["old"], note["new"], error=False)["save_volume_id"]
    new_info["volume_id"] = save_id
    if isinstance(new_info.get("data"), dict):
        new_info["data"] = dict(new_info["data"], volume_id=save_id)
    with compute.cell_db.session(write=True) as s:
        row = s.get(m.BlockDeviceMapping, bdm.id)
        row.volume_id, row.attachment_id = save_id, att_id
        row.connection_info = json.dumps(new_info)
        if note["resize_to"]:
            row.volume_size = note["resize_to"]
    host_operations.end(compute.cell_db, uuid, SWAP)


def _swap_failed(compute, ctxt, inst, note, bdm, old_info, swapped):
    """The guest keeps the old volume, in-use again; the new attachment goes."""
    if swapped:
        with cleanup.step("swap the old volume back"):
            compute.driver.swap_volume(ctxt, dict(old_info, volume_id=note["new"]), old_info,
                                    guest.instance_dict(inst), bdm.device_name, 0)
    with cleanup.step("give the old volume back"):
        compute.volume_api.roll_detaching(ctxt, note["old"])
    with cleanup.step("delete the new attachment"):
        compute.volume_api.attachment_delete(ctxt, note["attachment"])
    if note["migration"]:
        with cleanup.step("end the volume's migration in error"):
            compute.volume_api.migrate_volume_completion(ctxt, note["old"], note["new"],
                                                      error=True)
    host_operations.end(compute.cell_db, inst.uuid, SWAP)


def resume_swap(compute, ctxt, instance_uuid, note):
    """A swap this host's service stopped in the middle of, run again from its
    beginning (its action event ended in error first)."""
    records.finish_open_events(compute.cell_db, None, instance_uuid, "Error")
    swap_volume(compute, ctxt, instance_uuid, note["old"], note["new"], note["attachment"])


def volume_snapshot_create(compute, ctxt, instance_uuid, volume_id, create_info):
    """The hypervisor snapshots the attached volume for the volume service."""
    inst = guest.get(compute, instance_uuid)
    compute.driver.volume_snapshot_create(ctxt, guest.instance_dict(inst), volume_id,
                                       create_info)


def volume_snapshot_delete(compute, ctxt, instance_uuid, volume_id, snapshot_id,
                           delete_info):
    inst = guest.get(compute, instance_uuid)
    compute.driver.volume_snapshot_delete(ctxt, guest.instance_dict(inst), volume_id,
                                       snapshot_id, delete_info)


def quiesce_instance(compute, ctxt, instance_uuid):
    """Freeze the guest's filesystems (recorded first); a driver that cannot raises."""
    inst = guest.get(compute, instance_uuid)
    since = utcnow()
    host_operations.begin(compute.cell_db, inst.uuid, QUIESCE, {"since": since.isoformat()})
    try:
        compute.driver.quiesce(ctxt, guest.instance_dict(inst),
                            {"id": inst.image_ref, "properties": {}})
    except BaseException:
        host_operations.end(compute.cell_db, inst.uuid, QUIESCE)
        raise
    _note_frozen(compute, inst.uuid, since)


def unquiesce_instance(compute, ctxt, instance_uuid, mapping=None, wait_seconds=60):
    """Thaw the guest once the snapshots ``mapping`` names (image mappings with
    ``source_type`` snapshot) are no longer ``creating``."""
    deadline = time.monotonic() + wait_seconds
    for snap_id in [b.get("snapshot_id") for b in mapping or []
                    if b.get("source_type") == "snapshot"]:
        while time.monotonic() < deadline:
            try:
                if compute.volume_api.get_snapshot(ctxt, snap_id)["status"] != "creating":
                    break
            except Exception:  # noqa: BLE001 - a snapshot gone does not keep the guest frozen
                LOG.exception("waiting for volume snapshot %s", snap_id)
                break
            time.sleep(0.5)
    inst = guest.get(compute, instance_uuid)
    compute.driver.unquiesce(ctxt, guest.instance_dict(inst),
                          {"id": inst.image_ref, "properties": {}})
    host_operations.end(compute.cell_db, inst.uuid, QUIESCE)
    _note_frozen(compute, inst.uuid, None)


def resume_quiesce(compute, ctxt, instance_uuid, note):
    """A guest left frozen by a service that stopped, thawed."""
    unquiesce_instance(compute, ctxt, instance_uuid)


def thaw_forgotten_guests(compute, ctxt=None):
    """Thaw the guests this service froze longer than ``FROZEN_AT_MOST`` ago,
    whose thaw the API that froze them never sent (one that stopped thaws them
    as it starts). Run periodically while this service has a guest frozen."""
    cutoff = utcnow() - FROZEN_AT_MOST
    forgotten = [uuid for uuid, since in list(compute._frozen_since.items()) if since < cutoff]
    for uuid in forgotten:
        with cleanup.step(f"thaw {uuid}"):
            unquiesce_instance(compute, ctxt or get_admin_context(), uuid)
    return forgotten


def _note_frozen(compute, uuid, since):
    """Remember (``since`` a time) or forget (None) a guest this service froze;
    the periodic check runs while any is remembered, not on every host always."""
    with compute._locks_lock:
        if since is None:
            compute._frozen_since.pop(uuid, None)
        else:
            compute._frozen_since[uuid] = since
        if compute._frozen_since and compute._thaw_watch is None:
            compute._thaw_watch = service.default_scheduler().add(
                compute.thaw_forgotten_guests, FROZEN_AT_MOST.total_seconds(),
                f"thaw_forgotten_guests {compute.host}")
        elif not compute._frozen_since and compute._thaw_watch is not None:
            compute._thaw_watch.cancel()
            compute._thaw_watch = None


def create_volumes(compute, ctxt, inst, bdms):
    """The volumes ``bdms`` ask to be made (from a snapshot, from an image, or
    blank), each id written on its mapping before the volume service makes it;
    returns the mappings as they are."""
    wanted = [b for b in bdms if b.destination_type == "volume"
              and b.source_type in _MADE_FROM and getattr(b, _MADE_FROM[b.source_type])]
    if not wanted or compute.volume_api is None:
        return bdms
    # A volume service that gives the volume its own id (Cinder's API): the id is
    # written once it is made.
    chosen = getattr(compute.volume_api, "chooses_ids", False)
    for bdm in wanted:
        if bdm.volume_id and volume_exists(compute, ctxt, bdm.volume_id):
            continue  # made before this build stopped or was rescheduled
        volume_id = (bdm.volume_id or str(uuid_mod.uuid4())) if chosen else None
        if chosen:
            _set_volume_id(compute, bdm, volume_id)
        made = compute.volume_api.create(
            ctxt, bdm.volume_size or None, id=volume_id,
            # The reference's names: none from an image or a snapshot.
            name=f"{inst.uuid}-blank-vol" if bdm.source_type == "blank" else "",
            snapshot_id=bdm.snapshot_id if bdm.source_type == "snapshot" else None,
            image_id=bdm.image_id if bdm.source_type == "image" else None,
            volume_type=bdm.volume_type, availability_zone=inst.availability_zone)
        if not chosen:
            _set_volume_id(compute, bdm, made["id"])
    return guest.bdms_of(compute, inst.uuid)


def _set_volume_id(compute, bdm, volume_id):
    with compute.cell_db.session(write=True) as s:
        s.get(m.BlockDeviceMapping, bdm.id).volume_id = volume_id


def volume_exists(compute, ctxt, volume_id):
    try:
        compute.volume_api.get(ctxt, volume_id)
    except Exception as exc:  # noqa: BLE001 - the volume service's not-found error
        if getattr(exc, "code", None) == 404:
            return False
        raise
    return True


def reimage_root_volume(compute, ctxt, inst, image_id):
    """The image ``image_id`` written onto the server's root volume (see above)."""
    root = next((b for b in guest.bdms_of(compute, inst.uuid)
                 if guest.is_volume(b) and b.boot_index == 0), None)
    if root is None:
        raise ValueError(f"{inst.uuid} has no root volume")
    mine = [a for a in compute.volume_api.attachment_list(ctxt, volume_id=root.volume_id,
                                                       instance_uuid=inst.uuid)]
    current = next((a for a in mine if a["id"] == root.attachment_id), None)
    if current is None or current["status"] != "reserved":
        fresh = compute.volume_api.attachment_create(ctxt, root.volume_id, inst.uuid)
        with compute.cell_db.session(write=True) as s:
            s.get(m.BlockDeviceMapping, root.id).attachment_id = fresh["id"]
        current = fresh
    for a in mine:
        if a["id"] != current["id"]:
            compute.volume_api.attachment_delete(ctxt, a["id"])
    compute.volume_api.reimage(ctxt, root.volume_id, image_id, reimage_reserved=True)
    connector = compute.driver.get_volume_connector(guest.instance_dict(inst))
    att = compute.volume_api.attachment_update(ctxt, current["id"], connector,
                                            mountpoint=root.device_name)
    compute.volume_api.attachment_complete(ctxt, current["id"])
    with compute.cell_db.session(write=True) as s:
        s.get(m.BlockDeviceMapping, root.id).connection_info = json.dumps(
            dict(att.get("connection_info") or {}, volume_id=root.volume_id))
    host_operations.end(compute.cell_db, inst.uuid, REIMAGE_ROOT)


def resume_reimage_root(compute, ctxt, instance_uuid, note):
    """Run again with the rebuild it is a part of, which the server's task state
    resumes (novella/compute/recovery.py) before this: one still unfinished is
    of a rebuild that ended without it, and is over."""
    host_operations.end(compute.cell_db, instance_uuid, REIMAGE_ROOT)
