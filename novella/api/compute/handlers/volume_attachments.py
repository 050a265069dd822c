"""/servers/{server_id}/os-volume_attachments: attach, list, show, update, detach.

Attach reserves the volume (an attachment in the volume service), records
the ``attach_volume`` instance action and calls the server's compute host,
which connects, plugs and completes the attachment and writes the block
device mapping. Detach marks the volume ``detaching`` and casts to the host.

A shelved-offloaded server has no host (from 2.20): the API itself writes
the block device mapping (no device unless one is asked for) and completes
a volume attachment that names no host, so the volume is ``in-use``; the
unshelve connects it on whichever host the server lands on. Detach from
such a server deletes the attachment and the mapping (and the volume with
``delete_on_termination``).

Update (PUT) changes ``delete_on_termination`` from 2.85; a different
``volumeId`` (any PUT before 2.85) is a swap, which the volume service asks
for while it migrates the old volume (``os_compute_api:os-volumes-attachments:swap``,
the service role): the old volume is marked ``detaching``, the new one gets
an attachment, the swap is recorded for the host (novella/compute/volume_ops.py)
and cast to its host.
"""
import uuid as uuid_mod

from novella.api.compute import actions, errors, instances
from novella.api.compute import validation as v
from novella.compute import rpcapi as compute_rpcapi
from novella.compute import states
from novella.compute import volume_ops
from novella.db import cells as cells_mod
from novella.db import host_operations
from novella.db import records
from novella.db import servers as servers_db

_RULE = "os_compute_api:os-volumes-attachments:"
# As the reference allows attach and detach; offloaded servers from 2.20.
_ATTACHABLE = (states.ACTIVE, states.PAUSED, states.STOPPED, states.RESIZED,
               states.SOFT_DELETED, states.SHELVED, states.SHELVED_OFFLOADED)
_SWAPPABLE = (states.ACTIVE, states.PAUSED, states.RESIZED)
_DEVICE = {"type": ["string", "null"], "pattern": "(^/dev/x{0,1}[a-z]{0,1}d{0,1})([a-z]+)[0-9]*$"}

_attach_schema = [
    ((2, 1), (2, 48), v.obj({"volumeAttachment": v.obj({
        "volumeId": {"type": "string", "format": "uuid"},
        "device": _DEVICE}, ["volumeId"])}, ["volumeAttachment"])),
    ((2, 49), (2, 78), v.obj({"volumeAttachment": v.obj({
        "volumeId": {"type": "string", "format": "uuid"},
        "device": _DEVICE,
        "tag": v.string(1, 60)}, ["volumeId"])}, ["volumeAttachment"])),
    ((2, 79), None, v.obj({"volumeAttachment": v.obj({
        "volumeId": {"type": "string", "format": "uuid"},
        "device": _DEVICE,
        "tag": v.string(1, 60),
        "delete_on_termination": v.boolean}, ["volumeId"])}, ["volumeAttachment"])),
]

_update_schema = [
    ((2, 1), (2, 84), v.obj({"volumeAttachment": v.obj({
        "volumeId": {"type": "string", "format": "uuid"}}, ["volumeId"])},
        ["volumeAttachment"])),
    ((2, 85), None, v.obj({"volumeAttachment": v.obj({
        "volumeId": {"type": "string", "format": "uuid"},
        "device": _DEVICE,
        "tag": v.string(1, 60),
        "delete_on_termination": v.boolean,
        "serverId": {"type": "string", "format": "uuid"},
        "id": {"type": "string", "format": "uuid"}}, ["volumeId"])}, ["volumeAttachment"])),
]


def _server(req, server_id, action):
    rec = instances.get(req, server_id)
    req.authorize(_RULE + action, actions.target(rec))
    return rec


def _bdms(rec):
    if rec["cell"] is None:
        return []
    rows = servers_db.volume_mappings(cells_mod.cell_database(rec["cell"]), rec["uuid"])
    return [{"uuid": b.uuid, "volume_id": b.volume_id, "device_name": b.device_name,
             "tag": b.tag, "delete_on_termination": bool(b.delete_on_termination),
             "attachment_id": b.attachment_id, "boot_index": b.boot_index}
            for b in rows if b.volume_id]


def _view(req, server_id, bdm, created=False):
    """An attachment as show and list give it; ``created``: as an attach
    answers, which keeps ``id`` and has no attachment or BDM ids at 2.89."""
    doc = {"serverId": server_id, "volumeId": bdm["volume_id"], "device": bdm["device_name"]}
    if created or not req.at_least("2.89"):
        doc["id"] = bdm["volume_id"]
    if req.at_least("2.70"):
        doc["tag"] = bdm.get("tag")
    if req.at_least("2.79"):
        doc["delete_on_termination"] = bdm["delete_on_termination"]
    if req.at_least("2.89") and not created:
        doc["attachment_id"] = bdm.get("attachment_id")
        doc["bdm_uuid"] = bdm["uuid"]
    return doc


def _find(req, rec, volume_id):
    for bdm in _bdms(rec):
        if bdm["volume_id"] == volume_id:
            return bdm
    raise errors.NotFound(f"Volume {volume_id} is not attached to the instance {rec['uuid']}.")


def index(req, server_id):
    rec = _server(req, server_id, "index")
    return 200, {"volumeAttachments": [_view(req, rec["uuid"], b) for b in _bdms(rec)]}


def show(req, server_id, volume_id):
    rec = _server(req, server_id, "show")
    return 200, {"volumeAttachment": _view(req, rec["uuid"], _find(req, rec, volume_id))}


def _volume_api(req):
    if req.api.volume_api is None:
        raise errors.APIError("The volume service is not configured.")
    return req.api.volume_api


def _check_state(req, rec, action, allowed=_ATTACHABLE):
    if rec["vm_state"] not in allowed:
        raise errors.invalid_state(action, rec["uuid"], "vm_state", rec["vm_state"])
    if rec["vm_state"] in (states.SHELVED, states.SHELVED_OFFLOADED) and \
            not req.at_least("2.20"):
        raise errors.invalid_state(action, rec["uuid"], "vm_state", rec["vm_state"])
    if rec["task_state"] is not None:
        raise errors.invalid_state(action, rec["uuid"], "task_state", rec["task_state"])
    if rec["cell"] is None or (not rec.get("host")
                               and rec["vm_state"] != states.SHELVED_OFFLOADED):
        raise errors.Conflict(f"Instance {rec['uuid']} is not ready")


def _get_volume(req, volume_api, volume_id, missing=errors.NotFound):
    from novella.volume.api import VolumeNotFound
    try:
        return volume_api.get(req.context, volume_id)
    except VolumeNotFound:
        raise missing(f"Volume {volume_id} could not be found.")


def create(req, server_id):
    body = req.body_json(_attach_schema)["volumeAttachment"]
    rec = _server(req, server_id, "create")
    actions.check_unlocked(req, rec)
    _check_state(req, rec, "attach_volume")
    volume_id = body["volumeId"]
    delete_on_termination = v.to_bool(body.get("delete_on_termination", False))
    volume_api = _volume_api(req)
    from novella.volume.api import VolumeError
    volume = _get_volume(req, volume_api, volume_id)
    if any(b["volume_id"] == volume_id for b in _bdms(rec)):
        raise errors.BadRequest(f"Invalid volume: volume {volume_id} already attached")
    if volume["status"] != "available" and not volume["multiattach"]:
        raise errors.BadRequest(f"Invalid volume: volume {volume_id} status must be "
                                f"'available', not '{volume['status']}'")
    if rec["vm_state"] == states.SHELVED_OFFLOADED:
        bdm = _attach_offloaded(req, rec, volume, body, delete_on_termination)
        return _attached(req, rec, bdm)
    try:
        attachment = volume_api.attachment_create(req.context, volume_id, rec["uuid"])
    except VolumeError as exc:
        raise errors.BadRequest(f"Invalid volume: {exc}")
    cell_db = cells_mod.cell_database(rec["cell"])
    records.start_action(cell_db, req.context, rec["uuid"], "attach_volume")
    client = compute_rpcapi.ComputeAPI(rec["cell"].transport_url)
    try:
        bdm = client.attach_volume(req.context, rec["host"], rec["uuid"], volume_id,
                                   attachment["id"], device=body.get("device"),
                                   tag=body.get("tag"),
                                   delete_on_termination=delete_on_termination)
    except Exception as exc:
        # The host deleted the attachment when it failed after connecting it.
        try:
            volume_api.attachment_delete(req.context, attachment["id"])
        except VolumeError:
            pass
        raise errors.BadRequest(f"Failed to attach volume {volume_id}: {exc}")
    return _attached(req, rec, bdm)


def _attached(req, rec, bdm):
    """The attach answer: the attachment, or from 2.101 only 202 Accepted."""
    if req.at_least("2.101"):
        return 202, None
    return 200, {"volumeAttachment": _view(req, rec["uuid"], bdm, created=True)}


def _attach_offloaded(req, rec, volume, body, delete_on_termination):
    """The mapping first, then a completed attachment naming no host (``in-use``);
    the unshelve connects it. A failure leaves neither."""
    if body.get("tag"):
        raise errors.BadRequest("Tagged volume attachment is not supported for "
                                "shelved-offloaded instances.")
    if volume["multiattach"]:
        raise errors.BadRequest("Attaching multiattach volumes is not supported for "
                                "shelved-offloaded instances.")
    from novella.volume.api import VolumeError
    volume_api = _volume_api(req)
    cell_db = cells_mod.cell_database(rec["cell"])
    bdm_uuid = str(uuid_mod.uuid4())
    bdm_id = servers_db.add_volume_mapping(
        cell_db, uuid=bdm_uuid, instance_uuid=rec["uuid"], source_type="volume",
        destination_type="volume", device_name=body.get("device"), volume_id=volume["id"],
        delete_on_termination=delete_on_termination, boot_index=None)
    records.start_action(cell_db, req.context, rec["uuid"], "attach_volume")
    attachment = None
    try:
        with records.action_event(cell_db, req.context, rec["uuid"], "api_attach_volume",
                                  finish_action=True):
            attachment = volume_api.attachment_create(req.context, volume["id"], rec["uuid"])
            servers_db.update_mapping(cell_db, bdm_id, attachment_id=attachment["id"])
            volume_api.attachment_complete(req.context, attachment["id"])
    except VolumeError as exc:
        servers_db.delete_mapping(cell_db, bdm_id)
        if attachment is not None:
            volume_api.attachment_delete(req.context, attachment["id"])
        raise errors.BadRequest(f"Invalid volume: {exc}")
    except Exception:
        servers_db.delete_mapping(cell_db, bdm_id)
        raise
    return {"uuid": bdm_uuid, "volume_id": volume["id"], "device_name": body.get("device"),
            "attachment_id": attachment["id"], "tag": None,
            "delete_on_termination": delete_on_termination}


def delete(req, server_id, volume_id):
    rec = _server(req, server_id, "delete")
    actions.check_unlocked(req, rec)
    if rec["vm_state"] in (states.SHELVED, states.SHELVED_OFFLOADED) and \
            not req.at_least("2.20"):
        raise errors.invalid_state("detach_volume", rec["uuid"], "vm_state", rec["vm_state"])
    volume_api = _volume_api(req)
    _get_volume(req, volume_api, volume_id)
    bdm = _find(req, rec, volume_id)
    if bdm["boot_index"] == 0:
        raise errors.BadRequest("Cannot detach a root device volume")
    _check_state(req, rec, "detach_volume")
    from novella.volume.api import VolumeError
    cell_db = cells_mod.cell_database(rec["cell"])
    if rec["vm_state"] == states.SHELVED_OFFLOADED:
        records.start_action(cell_db, req.context, rec["uuid"], "detach_volume")
        with records.action_event(cell_db, req.context, rec["uuid"], "api_detach_volume",
                                  finish_action=True):
            if bdm["attachment_id"]:
                try:
                    volume_api.attachment_delete(req.context, bdm["attachment_id"])
                except VolumeError as exc:
                    if exc.code != 404:
                        raise
            servers_db.delete_mapping(cell_db, uuid=bdm["uuid"])
            if bdm["delete_on_termination"]:
                try:
                    volume_api.delete(req.context, volume_id)
                except VolumeError:
                    pass  # as the reference: the detach stands
        return 202, None
    try:
        volume_api.begin_detaching(req.context, volume_id)
    except VolumeError as exc:
        raise errors.BadRequest(f"Invalid volume: {exc}")
    records.start_action(cell_db, req.context, rec["uuid"], "detach_volume")
    compute_rpcapi.ComputeAPI(rec["cell"].transport_url).detach_volume(
        req.context, rec["host"], rec["uuid"], volume_id, attachment_id=bdm["attachment_id"])
    return 202, None


def update(req, server_id, volume_id):
    """Change ``delete_on_termination`` (2.85) and/or swap the volume for another."""
    body = req.body_json(_update_schema)["volumeAttachment"]
    rec = instances.get(req, server_id)
    new_id = body["volumeId"]
    only_swap = not req.at_least("2.85")
    if only_swap or new_id != volume_id:
        req.authorize(_RULE + "swap", {})
    else:
        req.authorize(_RULE + "update", actions.target(rec))
    if not only_swap:
        _update_fields(req, rec, volume_id, body)
    if only_swap or new_id != volume_id:
        _swap(req, rec, volume_id, new_id)
    return 202, None


def _update_fields(req, rec, volume_id, body):
    bdm = _find(req, rec, volume_id)
    for field, have in (("id", volume_id), ("serverId", rec["uuid"]),
                        ("device", bdm["device_name"]), ("tag", bdm["tag"])):
        if field in body and body[field] != have:
            raise errors.BadRequest(f"The {field} property is not mutable")
    if "delete_on_termination" in body:
        servers_db.update_mapping(cells_mod.cell_database(rec["cell"]), uuid=bdm["uuid"],
                                  delete_on_termination=v.to_bool(body["delete_on_termination"]))


def _swap(req, rec, old_id, new_id):
    """The checks and reservations of a swap, noted on the server, then cast to its host."""
    volume_api = _volume_api(req)
    from novella.volume.api import VolumeError
    old = _get_volume(req, volume_api, old_id)
    if not old.get("migration_status"):
        raise errors.Conflict(f"volume {old_id} is not migrating; this API should only be "
                              "called by Cinder")
    new = _get_volume(req, volume_api, new_id, missing=errors.BadRequest)
    actions.check_unlocked(req, rec)
    _check_state(req, rec, "swap_volume", allowed=_SWAPPABLE)
    if not any(a["server_id"] == rec["uuid"] for a in old["attachments"]):
        raise errors.BadRequest("Invalid volume: Old volume is attached to a different "
                                "instance.")
    if new["attach_status"] == "attached":
        raise errors.BadRequest("Invalid volume: New volume must be detached in order to "
                                "swap.")
    if int(new["size"]) < int(old["size"]):
        raise errors.BadRequest("Invalid volume: New volume must be the same size or larger.")
    try:
        volume_api.begin_detaching(req.context, old_id)
    except VolumeError as exc:
        raise errors.BadRequest(f"Invalid volume: {exc}")
    try:
        read_write = [a for a in volume_api.attachment_list(req.context, volume_id=old_id)
                      if a["status"] == "attached" and (a["attach_mode"] or "rw") == "rw"]
        if len(read_write) > 1:
            raise errors.BadRequest("Swapping multi-attach volumes with more than one "
                                    "read/write attachment is not supported.")
        _find(req, rec, old_id)
        if any(b["volume_id"] == new_id for b in _bdms(rec)):
            raise errors.BadRequest(f"Invalid volume: volume {new_id} already attached")
        attachment = volume_api.attachment_create(req.context, new_id, rec["uuid"])
    except Exception as exc:
        volume_api.roll_detaching(req.context, old_id)
        if isinstance(exc, VolumeError):
            raise errors.BadRequest(f"Invalid volume: {exc}")
        raise
    cell_db = cells_mod.cell_database(rec["cell"])
    # Recorded before the host acts: a host that stops in the middle runs it again.
    host_operations.begin(cell_db, rec["uuid"], volume_ops.SWAP, {
        "old": old_id, "new": new_id, "attachment": attachment["id"],
        "migration": old["migration_status"] == "migrating",
        "resize_to": new["size"] if int(new["size"]) > int(old["size"]) else 0})
    records.start_action(cell_db, req.context, rec["uuid"], "swap_volume")
    try:
        compute_rpcapi.ComputeAPI(rec["cell"].transport_url).swap_volume(
            req.context, rec["host"], rec["uuid"], old_id, new_id, attachment["id"])
    except Exception:
        volume_api.roll_detaching(req.context, old_id)
        volume_api.attachment_delete(req.context, attachment["id"])
        host_operations.end(cell_db, rec["uuid"], volume_ops.SWAP)
        raise


ROUTES = [
    ("GET", "/servers/{server_id}/os-volume_attachments", index),
    ("POST", "/servers/{server_id}/os-volume_attachments", create),
    ("GET", "/servers/{server_id}/os-volume_attachments/{volume_id}", show),
    ("PUT", "/servers/{server_id}/os-volume_attachments/{volume_id}", update),
    ("DELETE", "/servers/{server_id}/os-volume_attachments/{volume_id}", delete),
]
