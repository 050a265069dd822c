"""/servers/{server_id}/os-volume_attachments: attach, list, show, detach.

Attach reserves the volume (an attachment in the volume service), records
the ``attach_volume`` instance action and calls the server's compute host,
which connects, plugs and completes the attachment and writes the block
device mapping. Detach marks the volume ``detaching`` and casts to the host.
"""
import sqlalchemy as sa

from novella.api.compute import errors, instances
from novella.api.compute import validation as v
from novella.compute import rpcapi as compute_rpcapi
from novella.compute import states
from novella.db import cell_models as cm
from novella.db import cells as cells_mod
from novella.db import records

_RULE = "os_compute_api:os-volumes-attachments:"
_ATTACHABLE = (states.ACTIVE, states.STOPPED, states.PAUSED, states.SUSPENDED)

_attach_schema = [
    ((2, 1), (2, 48), v.obj({"volumeAttachment": v.obj({
        "volumeId": {"type": "string", "format": "uuid"},
        "device": {"type": ["string", "null"]}}, ["volumeId"])}, ["volumeAttachment"])),
    ((2, 49), (2, 78), v.obj({"volumeAttachment": v.obj({
        "volumeId": {"type": "string", "format": "uuid"},
        "device": {"type": ["string", "null"]},
        "tag": v.string(1, 60)}, ["volumeId"])}, ["volumeAttachment"])),
    ((2, 79), None, v.obj({"volumeAttachment": v.obj({
        "volumeId": {"type": "string", "format": "uuid"},
        "device": {"type": ["string", "null"]},
        "tag": v.string(1, 60),
        "delete_on_termination": {"type": "boolean"}}, ["volumeId"])}, ["volumeAttachment"])),
]


def _target(rec):
    return {"project_id": rec["project_id"], "user_id": rec["user_id"]}


def _server(req, server_id, action):
    rec = instances.get(req, server_id)
    req.authorize(_RULE + action, _target(rec))
    return rec


def _bdms(rec):
    if rec["cell"] is None:
        return []
    with cells_mod.cell_database(rec["cell"]).session() as s:
        rows = s.scalars(sa.select(cm.BlockDeviceMapping).where(
            cm.BlockDeviceMapping.instance_uuid == rec["uuid"],
            cm.BlockDeviceMapping.deleted == 0,
            cm.BlockDeviceMapping.destination_type == "volume").order_by(cm.BlockDeviceMapping.id))
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


def _check_state(rec, action, allowed=_ATTACHABLE):
    if rec["vm_state"] not in allowed:
        raise errors.invalid_state(action, rec["uuid"], "vm_state", rec["vm_state"])
    if rec["task_state"] is not None:
        raise errors.invalid_state(action, rec["uuid"], "task_state", rec["task_state"])
    if rec["cell"] is None or not rec.get("host"):
        raise errors.Conflict(f"Instance {rec['uuid']} is not ready")


def create(req, server_id):
    body = req.body_json(_attach_schema)["volumeAttachment"]
    rec = _server(req, server_id, "create")
    _check_state(rec, "attach_volume")
    volume_id = body["volumeId"]
    volume_api = _volume_api(req)
    from novella.volume.api import VolumeError, VolumeNotFound
    try:
        volume = volume_api.get(req.context, volume_id)
    except VolumeNotFound:
        raise errors.NotFound(f"Volume {volume_id} could not be found.")
    if any(b["volume_id"] == volume_id for b in _bdms(rec)):
        raise errors.BadRequest(f"Invalid volume: volume {volume_id} is already attached to "
                                f"instance {rec['uuid']}")
    if volume["status"] != "available" and not volume["multiattach"]:
        raise errors.BadRequest(f"Invalid volume: volume {volume_id} status must be "
                                f"'available', not '{volume['status']}'")
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
                                   delete_on_termination=body.get("delete_on_termination", False))
    except Exception as exc:
        # The host deleted the attachment when it failed after connecting it.
        try:
            volume_api.attachment_delete(req.context, attachment["id"])
        except VolumeError:
            pass
        raise errors.BadRequest(f"Failed to attach volume {volume_id}: {exc}")
    return 200, {"volumeAttachment": _view(req, rec["uuid"], bdm, created=True)}


def delete(req, server_id, volume_id):
    rec = _server(req, server_id, "delete")
    _check_state(rec, "detach_volume", allowed=_ATTACHABLE + (states.RESIZED,))  # as the reference
    bdm = _find(req, rec, volume_id)
    if bdm["boot_index"] == 0:
        raise errors.Forbidden("Cannot detach a root device volume")
    volume_api = _volume_api(req)
    from novella.volume.api import VolumeError
    try:
        volume_api.begin_detaching(req.context, volume_id)
    except VolumeError as exc:
        raise errors.BadRequest(f"Invalid volume: {exc}")
    records.start_action(cells_mod.cell_database(rec["cell"]), req.context, rec["uuid"],
                         "detach_volume")
    compute_rpcapi.ComputeAPI(rec["cell"].transport_url).detach_volume(
        req.context, rec["host"], rec["uuid"], volume_id, attachment_id=bdm["attachment_id"])
    return 202, None


ROUTES = [
    ("GET", "/servers/{server_id}/os-volume_attachments", index),
    ("POST", "/servers/{server_id}/os-volume_attachments", create),
    ("GET", "/servers/{server_id}/os-volume_attachments/{volume_id}", show),
    ("DELETE", "/servers/{server_id}/os-volume_attachments/{volume_id}", delete),
]
