"""Server action rebuild: the server's local disks made anew from an image (the
same one or another), on its host.

The API checks the image (it exists, is active, fits the flavor), the key
pair and the fields each microversion allows, then writes in one guarded
update everything the rebuild changes on the server (image, name,
description, metadata, access addresses, key pair, user data, hostname) with
task state ``rebuilding``, and casts ``rebuild_in_place`` to the host
(novella/compute/guest_actions.py). The server keeps its host and flavor:
its Placement allocation is not touched.

A volume-backed server keeps its root volume: rebuilt with the image that
volume was made from, or from 2.93 with another one, which its host has the
volume service write onto the root volume (noted before the host acts,
novella/compute/volume_ops.py); its image stays empty.
"""
from novella.api.compute import actions, common, errors, instances, quotas, views
from novella.api.compute import validation as v
from novella.api.compute.schemas import servers as server_schemas
from novella.compute import guest_actions
from novella.compute import volume_ops
from novella.compute import states
from novella.compute.states import task_states
from novella.db import cells as cells_mod
from novella.db import host_operations
from novella.db import records
from novella.db import request_specs
from novella.db import servers as servers_db


def _schema(version):
    args = {
        "name": v.name,
        "imageRef": v.uuid,
        "adminPass": {"type": "string"},
        "metadata": v.metadata,
        "preserve_ephemeral": v.boolean,
        "OS-DCF:diskConfig": {"type": "string", "enum": ["AUTO", "MANUAL"]},
        "accessIPv4": {"type": "string", "format": "ipv4"},
        "accessIPv6": {"type": "string", "format": "ipv6"},
    }
    if version < (2, 57):
        args["personality"] = v.personality
    if version >= (2, 19):
        args["description"] = v.description
    if version >= (2, 54):
        args["key_name"] = {"type": ["string", "null"], "minLength": 1, "maxLength": 255}
    if version >= (2, 57):
        args["user_data"] = {"type": ["string", "null"], "maxLength": 65535}
    if version >= (2, 63):
        args["trusted_image_certificates"] = {"type": ["array", "null"]}
    if version >= (2, 90):
        args["hostname"] = server_schemas.hostname(version)
    return v.obj({"rebuild": v.obj(args, ["imageRef"])}, ["rebuild"])


@actions.action("rebuild", _schema)
def rebuild(req, rec, body):
    args = body["rebuild"]
    target = actions.target(rec)
    req.authorize("os_compute_api:servers:rebuild", target)
    if req.at_least("2.63") and "trusted_image_certificates" in args:
        req.authorize("os_compute_api:servers:rebuild:trusted_certs", target)
    actions.check_unlocked(req, rec)
    actions.check_state(rec, "rebuild", vm_states=(states.ACTIVE, states.STOPPED, states.ERROR))
    if rec["cell"] is None or not rec.get("host"):
        raise errors.Conflict(f"Instance {rec['uuid']} is not ready")
    image_id = common.last_segment(args["imageRef"])
    reimage = _root_volume_to_reimage(req, rec, image_id)
    image = _image(req, image_id, rec.get("flavor") or {}, is_bfv=not rec.get("image_ref"))
    values = _changes(req, rec, args)
    values["auto_disk_config"] = common.disk_config(
        args.get("OS-DCF:diskConfig"), image_id, image.get("properties"))
    files = args.get("personality")  # before 2.57 only (the schema says)
    if files:
        quotas.check_injected_files(quotas.Quota(req.api, req.context.project_id,
                                                 req.context.user_id), files)
        files = [{"path": f.get("path", ""), "contents": f.get("contents", "")} for f in files]
    password = args.get("adminPass") or common.generate_password()
    cell_db = cells_mod.cell_database(rec["cell"])
    # Noted before the host acts: a host that dies rebuilding runs it again alike.
    records.set_system_metadata(cell_db, rec["uuid"], **{
        guest_actions.REBUILD_PRESERVE_EPHEMERAL:
            v.to_bool(args["preserve_ephemeral"]) if args.get("preserve_ephemeral") else None})
    if reimage:
        host_operations.begin(cell_db, rec["uuid"], volume_ops.REIMAGE_ROOT,
                              {"image_id": image_id})
    else:  # one an earlier rebuild left is not this one's
        host_operations.end(cell_db, rec["uuid"], volume_ops.REIMAGE_ROOT)
    metadata = args.get("metadata")
    try:
        servers_db.start_rebuild(cell_db, rec["uuid"], metadata,  # metadata: replaced
                                 image_ref=image_id if rec.get("image_ref") else "",
                                 task_state=task_states.REBUILDING, **values)
    except records.UnexpectedTaskStateError:
        raise errors.invalid_state("rebuild", rec["uuid"], "task_state", "rebuilding")
    except records.InstanceNotFound:
        raise errors.instance_not_found(rec["uuid"])
    records.start_action(cell_db, req.context, rec["uuid"], "rebuild")
    request_specs.update(req.api.api_db, rec["uuid"], image={
        "id": image_id, "properties": dict(image.get("properties") or {})})
    actions.compute_client(rec).rebuild_in_place(req.context, rec["host"], rec["uuid"],
                                                  admin_password=password,
                                                  injected_files=files or None)
    return 202, _view(req, rec, password)


def _root_volume_to_reimage(req, rec, image_id):
    """A volume-backed server keeps its root volume: rebuilt with the image its volume
    was made from, or (2.93) with another one written onto it. True: reimage it."""
    if rec.get("image_ref"):
        return False
    root = servers_db.root_volume(cells_mod.cell_database(rec["cell"]), rec["uuid"])
    volume = {}
    if root and req.api.volume_api is not None:
        volume = req.api.volume_api.get(req.context, root)
    if (volume.get("volume_image_metadata") or {}).get("image_id") == image_id:
        return False
    if not req.at_least("2.93"):
        raise errors.BadRequest(f"Image {image_id} is unacceptable: Unable to rebuild with a "
                                "different image for a volume-backed server.")
    if not root:
        raise errors.BadRequest("Instance has no root volume to rebuild.")
    return True


def _image(req, image_id, flavor, is_bfv=False):
    """The image to rebuild from; 400 unless it exists, is active and fits the flavor."""
    api = req.api.image_api
    if api is None:
        return {"id": image_id, "properties": {}}
    try:
        api.get(req.context, image_id)
    except Exception as exc:  # noqa: BLE001 - the image service's not-found error
        if common.not_found(exc):
            raise errors.BadRequest("Cannot find image for rebuild")
        raise
    return common.image(req, image_id, flavor, is_bfv=is_bfv)


def _changes(req, rec, args):
    """The server's columns the rebuild changes, as the request and its version say."""
    values = {}
    if "name" in args:
        values["display_name"] = args["name"].strip()
    if req.at_least("2.19") and "description" in args:
        values["display_description"] = args["description"]
    for field, column in (("accessIPv4", "access_ip_v4"), ("accessIPv6", "access_ip_v6")):
        if field in args:
            values[column] = common.access_ip(args[field])
    if req.at_least("2.54") and "key_name" in args:
        kp = common.key_pair(req, args["key_name"])
        values.update(key_name=kp.name if kp else None, key_data=kp.public_key if kp else None)
    if req.at_least("2.57") and "user_data" in args:
        common.check_user_data(args["user_data"])
        values["user_data"] = args["user_data"]
    if req.at_least("2.90") and "hostname" in args:
        values["hostname"] = args["hostname"]
    return values


def _view(req, rec, password):
    """The answer: the server as show has it (as an update answers before 2.75), with
    its key pair from 2.54, user data from 2.57 and the admin password."""
    shown = instances.get(req, rec["uuid"], rule="os_compute_api:servers:show")
    server = views.show(req, shown, update=True)["server"]
    server.pop("OS-EXT-SRV-ATTR:user_data", None)  # user_data from 2.57 instead
    if req.at_least("2.54"):
        fresh = instances.get(req, rec["uuid"], view=False)
        server["key_name"] = fresh.get("key_name")
        if req.at_least("2.57"):
            server["user_data"] = fresh.get("user_data")
    if not req.at_least("2.71"):
        server.pop("server_groups", None)
    if req.api.conf.api.enable_instance_password:
        server["adminPass"] = password
    return {"server": server}


ROUTES = []
