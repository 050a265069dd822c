"""Server actions createImage and createBackup: an image of the server's root disk.

The API makes the image record in the image service (``queued``, a
snapshot or a backup of the server, inheriting its image's formats), notes
its id in the server's system metadata, sets the task state
(``image_snapshot_pending`` / ``image_backup``) and casts to the host, which
uploads the root disk's bytes (novella/compute/guest_actions.py) and, for a
backup, deletes the oldest backups of that type beyond ``rotation``.

The image of a volume-backed server (``createImage`` only; a backup of one
is refused) is made here: the guest quiesced where its driver can, a
snapshot of each of its volumes made by the volume service, the guest
thawed once they are, and an image with no data (``active``, size 0) whose
properties map the snapshots (``block_device_mapping``, ``bdm_v2``,
``root_device_name``). A server booted from that image gets volumes made
of the snapshots (``servers.merge_image_bdms`` at create, then its host).
"""
from novella.api.compute import actions, errors
from novella.api.compute import validation as v
from novella.compute import guest_actions
from novella.compute import states
from novella.compute.states import task_states
from novella.db import cells as cells_mod
from novella.db import records
from novella.db import servers as servers_db

_IMAGEABLE = (states.ACTIVE, states.STOPPED, states.PAUSED, states.SUSPENDED)

_create_image_schema = v.obj({"createImage": v.obj(
    {"name": v.name, "metadata": v.metadata}, ["name"])}, ["createImage"])
_create_backup_schema = v.obj({"createBackup": v.obj(
    {"name": v.name, "backup_type": {"type": "string"},
     "rotation": v.non_negative_int, "metadata": v.metadata},
    ["name", "backup_type", "rotation"])}, ["createBackup"])


@actions.action("createImage", _create_image_schema)
def create_image(req, rec, body):
    args = body["createImage"]
    req.authorize("os_compute_api:servers:create_image", actions.target(rec))
    bdms = _bdms_of(rec)
    if _volume_backed(rec, bdms):
        req.authorize("os_compute_api:servers:create_image:allow_volume_backed",
                      actions.target(rec))
        image = _snapshot_volume_backed(req, rec, args, bdms)
        return _answer(req, image["id"], located=True)
    image = _start(req, rec, "createImage", task_states.IMAGE_SNAPSHOT_PENDING, args,
                   {"image_type": "snapshot"})
    actions.compute_client(rec).snapshot_instance(req.context, rec["host"], rec["uuid"], image["id"])
    return _answer(req, image["id"], located=True)


@actions.action("createBackup", _create_backup_schema)
def create_backup(req, rec, body):
    args = body["createBackup"]
    req.authorize("os_compute_api:os-create-backup", actions.target(rec))
    if _volume_backed(rec, _bdms_of(rec)):
        raise errors.BadRequest("Backup is not supported for volume-backed instances.")
    rotation = int(args["rotation"])
    image = _start(req, rec, "createBackup", task_states.IMAGE_BACKUP, args, {
        "image_type": "backup", "backup_type": args["backup_type"]},
        backup={"backup_type": args["backup_type"], "backup_rotation": rotation})
    actions.compute_client(rec).backup_instance(req.context, rec["host"], rec["uuid"], image["id"],
                                   args["backup_type"], rotation)
    return _answer(req, image["id"], located=rotation > 0)


def _start(req, rec, action, task_state, args, kind, backup=None):
    """Checks, the queued image, the noted image id, the task state and the action."""
    actions.check_state(rec, action, vm_states=_IMAGEABLE)
    if rec["cell"] is None or not rec.get("host"):
        raise errors.Conflict(f"Instance {rec['uuid']} is not ready")
    api = req.api.image_api
    if api is None:
        raise errors.APIError("No image service is configured.", code=503)
    base = {}
    try:
        base = api.get(req.context, rec["image_ref"])
    except Exception:  # noqa: BLE001 - the server's image may be gone since; formats default
        pass
    # The request's metadata wins over the kind of image, as in the reference; a
    # backup's type does not (its rotation finds the backups by it).
    properties = dict({"image_type": kind["image_type"]}, **(args.get("metadata") or {}))
    properties.update({k: v for k, v in kind.items() if k != "image_type"},
                      instance_uuid=rec["uuid"], base_image_ref=rec["image_ref"],
                      user_id=req.context.user_id)
    image = api.create(req.context, name=args["name"], visibility="private",
                       properties=properties,
                       disk_format=base.get("disk_format") or "raw",
                       container_format=base.get("container_format") or "bare",
                       min_disk=(rec.get("flavor") or {}).get("root_gb") or 0,
                       min_ram=base.get("min_ram") or 0)
    cell_db = cells_mod.cell_database(rec["cell"])
    # Noted before the host acts: a host that dies uploading finishes with it.
    records.set_system_metadata(cell_db, rec["uuid"], **{
        guest_actions.SNAPSHOT_IMAGE: image["id"], **(backup or {})})
    try:
        actions.start_task(req, rec, action, task_state, expected_task_state=(None,))
    except errors.APIError:
        api.delete(req.context, image["id"])
        raise
    return image


def _bdms_of(rec):
    if rec["cell"] is None:
        return []
    return servers_db.block_device_mappings(cells_mod.cell_database(rec["cell"]), rec["uuid"])


def _volume_backed(rec, bdms):
    return not rec.get("image_ref") or any(
        b.boot_index == 0 and b.destination_type == "volume" for b in bdms)


# Image properties a snapshot does not inherit from the server's image.
_NOT_INHERITED = ("image_id", "image_name", "min_disk", "min_ram", "size", "checksum",
                  "disk_format", "container_format", "block_device_mapping", "bdm_v2",
                  "root_device_name", "cinder_encryption_key_id",
                  "cinder_encryption_key_deletion_policy", "img_signature",
                  "img_signature_hash_method", "img_signature_key_type",
                  "img_signature_certificate_uuid", "cache_in_nova", "bittorrent")
_MAPPING_KEYS = ("guest_format", "image_id", "volume_id", "no_device", "tag", "volume_type",
                 "encrypted", "encryption_secret_uuid", "encryption_format",
                 "encryption_options")


def _image_mapping(bdm, **values):
    """A block device mapping as an image keeps it (``bdm_v2``)."""
    out = dict.fromkeys(_MAPPING_KEYS)
    out.update({k: getattr(bdm, k) for k in (
        "source_type", "destination_type", "image_id", "volume_id", "snapshot_id", "tag",
        "disk_bus", "device_type", "boot_index", "delete_on_termination", "volume_size",
        "device_name")})
    out["delete_on_termination"] = bool(out["delete_on_termination"])
    if not out["device_name"] and bdm.boot_index == 0:
        out["device_name"] = "/dev/vda"
    out.update(values)
    return out


def _snapshot_volume_backed(req, rec, args, bdms):
    """A snapshot of each volume of the server, and the image that maps them."""
    actions.check_state(rec, "createImage", vm_states=_IMAGEABLE)
    if rec["cell"] is None or not rec.get("host"):
        raise errors.Conflict(f"Instance {rec['uuid']} is not ready")
    image_api, volume_api = req.api.image_api, req.api.volume_api
    if image_api is None or volume_api is None:
        raise errors.APIError("No image or volume service is configured.", code=503)
    ctxt, name = req.context, args["name"]
    volume_bdms = [b for b in bdms if b.destination_type == "volume" and b.volume_id]
    mapping = [_image_mapping(b) for b in bdms if b not in volume_bdms]
    volumes = {b.volume_id: volume_api.get(ctxt, b.volume_id) for b in volume_bdms}
    root = next((b for b in bdms if b.boot_index == 0), None)
    base = dict(volumes[root.volume_id].get("volume_image_metadata") or {}) if (
        root is not None and root.volume_id in volumes) else {}
    client = actions.compute_client(rec)
    quiesced = False
    if rec["vm_state"] == states.ACTIVE:
        try:
            client.quiesce_instance(ctxt, rec["host"], rec["uuid"])
            quiesced = True
        except Exception:  # noqa: BLE001 - a driver that cannot quiesce: snapshots as they are
            if str(base.get("os_require_quiesce", "")).lower() in ("true", "1", "yes", "on"):
                raise errors.BadRequest(f"Quiescing is not supported in instance "
                                        f"{rec['uuid']}.")
    cell_db = cells_mod.cell_database(rec["cell"])
    records.start_action(cell_db, ctxt, rec["uuid"], "createImage")
    try:
        with records.action_event(cell_db, ctxt, rec["uuid"], "api_snapshot_instance"):
            for bdm in volume_bdms:
                volume = volumes[bdm.volume_id]
                snap = volume_api.create_snapshot(ctxt, bdm.volume_id, f"snapshot for {name}",
                                                  volume.get("description"), force=True)
                mapping.append(_image_mapping(
                    bdm, source_type="snapshot", destination_type="volume",
                    snapshot_id=snap["id"], image_id=None, volume_id=None, tag=None,
                    volume_size=bdm.volume_size or volume["size"]))
    except Exception as exc:
        if quiesced:
            client.unquiesce_instance(ctxt, rec["host"], rec["uuid"], mapping)
        if getattr(exc, "code", None) in (400, 403, 409):
            raise errors.APIError(str(exc), code=exc.code)
        raise
    if quiesced:
        client.unquiesce_instance(ctxt, rec["host"], rec["uuid"], mapping)
    properties = {k: v for k, v in base.items()
                  if k not in _NOT_INHERITED and not k.startswith("os_glance")}
    properties.update(args.get("metadata") or {})
    visibility = "private"
    if ctxt.project_id != rec["project_id"]:
        visibility, properties["instance_owner"] = "shared", rec["project_id"]
    properties["root_device_name"] = (root.device_name if root is not None and root.device_name
                                      else "/dev/vda")
    if mapping:
        properties.update(block_device_mapping=mapping, bdm_v2=True)
    image = image_api.create(ctxt, name=name, visibility=visibility, properties=properties,
                             disk_format="raw", container_format="bare",
                             min_disk=int(base.get("min_disk") or 0),
                             min_ram=int(base.get("min_ram") or 0))
    return image_api.upload(ctxt, image["id"], b"")  # no data: active at once, size 0


def _answer(req, image_id, located):
    """From 2.45 the image's id in the body; before, its URL in a Location header."""
    if req.at_least("2.45"):
        return 202, {"image_id": image_id}
    if not located:
        return 202, None
    return 202, None, {"Location": req.self_link("images", image_id)}


ROUTES = []
