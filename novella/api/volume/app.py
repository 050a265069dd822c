"""Block Storage API v3 (Cinder's wire format) over ``novella.volume.api.VolumeAPI``.

Every path works with and without the project id after ``/v3``:

    GET  /, /v3                          versions (microversions 3.0 - MAX_VERSION)
    GET  /v3[/{project_id}]/volumes[/detail]   list (filters name, status)
    POST /v3[/{project_id}]/volumes      create (size, name, description, imageRef, ...)
    GET|DELETE /v3[/{project_id}]/volumes/{id}
    POST /v3[/{project_id}]/volumes/{id}/action   os-set_bootable, os-reset_status,
                                         os-migrate_volume_completion, os-reimage (3.68+),
                                         os-extend (in-use too from 3.42),
                                         os-begin_detaching, os-roll_detaching
    /v3[/{project_id}]/snapshots[/detail|/{id}]   create (volume_id, force, name,
                                         description), list, show, delete
    /v3[/{project_id}]/attachments[/{id}]      (3.27+) create, list, show, update
                                         (connector), delete; POST .../{id}/action
                                         {"os-complete": null} (3.44+)
    /v3[/{project_id}]/backups[/detail|/{id}[/restore]]   create (volume_id, name,
                                         description, force, container), list, show,
                                         delete, restore (to a volume, or a new one)
    /v3[/{project_id}]/os-volume-transfer[/detail|/{id}[/accept]]   (volume-transfers
                                         from 3.55) create (the auth key shown once),
                                         list, show, accept (by another project), delete
    GET  /v3[/{project_id}]/types[/{id}|/default]   the default type and ``multiattach``

Another project's volume is not found; the microversion is negotiated with
``OpenStack-API-Version: volume X.Y`` and echoed back.
"""
import re

from novella.api import rest

# 3.68: os-reimage. The fields 3.61-3.65 add to a volume (cluster_name, volume_type_id,
# encryption_key_id, consumes_quota) are optional; none is shown.
MIN_VERSION, MAX_VERSION = (3, 0), (3, 68)
DEFAULT_TYPE = {"id": "f8c5c1d5-2c7c-4f5a-9a63-7d0a4b5e0001", "name": "__DEFAULT__",
                "description": "Default Volume Type", "is_public": True,
                "extra_specs": {}, "os-volume-type-access:is_public": True, "qos_specs_id": None}
# A volume of this type may be attached to several servers (Cinder's extra spec).
MULTIATTACH_TYPE = dict(DEFAULT_TYPE, id="f8c5c1d5-2c7c-4f5a-9a63-7d0a4b5e0002",
                        name="multiattach", description="Multiattach volumes",
                        extra_specs={"multiattach": "<is> True"})
TYPES = (DEFAULT_TYPE, MULTIATTACH_TYPE)
_VERSION_RE = re.compile(r"^(\d+)\.(\d+)$")


def error_body(code, title, message, kind):
    key = {400: "badRequest", 403: "forbidden", 404: "itemNotFound", 409: "conflictingRequest",
           405: "badMethod", 406: "notAcceptable", 413: "overLimit",
           415: "badMediaType"}.get(code, "computeFault")
    return {key: {"code": code, "message": message}}


def _fmt(v):
    return f"{v[0]}.{v[1]}"


def _negotiate(req):
    header = req.headers.get("OpenStack-API-Version", "")
    wanted = None
    for part in header.split(","):
        service, _sep, value = part.strip().partition(" ")
        if service.lower() in ("volume", "block-storage") and value:
            wanted = value.strip()
    if wanted is None:
        return MIN_VERSION
    if wanted.lower() == "latest":
        return MAX_VERSION
    m = _VERSION_RE.match(wanted)
    if not m:
        raise rest.bad_request(f"Invalid API version {wanted}")
    version = (int(m.group(1)), int(m.group(2)))
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise rest.HTTPError(406, f"Version {wanted} is not supported by the API. Minimum is "
                                  f"{_fmt(MIN_VERSION)} and maximum is {_fmt(MAX_VERSION)}.")
    return version


def _require(req, version):
    if req.version < version:
        raise rest.not_found("The resource could not be found.")


def _api(req):
    return req.state["volume_api"]


def _links(req, rid, collection="volumes"):
    base = req.host_url + req.script_name
    return [{"rel": "self", "href": f"{base}/v3/{req.context.project_id}/{collection}/{rid}"},
            {"rel": "bookmark", "href": f"{base}/{req.context.project_id}/{collection}/{rid}"}]


def _volume(req, v, extended=True):
    """A volume's detail view; ``extended``: with the attributes the reference adds to
    show and list only (tenant, image metadata, host), not to the create response."""
    doc = {"id": v["id"], "name": v["name"], "description": v["description"], "size": v["size"],
           "status": v["status"], "availability_zone": v["availability_zone"],
           "volume_type": v["volume_type"] or DEFAULT_TYPE["name"],
           "bootable": "true" if v["bootable"] else "false", "multiattach": v["multiattach"],
           "encrypted": False, "metadata": v.get("metadata") or {}, "user_id": v["user_id"],
           "snapshot_id": None, "source_volid": None, "consistencygroup_id": None,
           "replication_status": None, "group_id": None,
           "migration_status": v.get("migration_status") if req.is_admin() else None,
           "created_at": v["created_at"], "updated_at": v["updated_at"],
           "attachments": v["attachments"], "links": _links(req, v["id"])}
    if not extended:
        return doc
    doc["os-vol-tenant-attr:tenant_id"] = v["project_id"]
    if v["bootable"]:
        doc["volume_image_metadata"] = {k: str(val) for k, val in
                                        (v["volume_image_metadata"] or {}).items()}
    if req.is_admin():
        doc["os-vol-host-attr:host"] = "novella@simulated#simulated"
    return doc


def _summary(req, v):
    return {"id": v["id"], "name": v["name"], "links": _links(req, v["id"])}


def _get_volume(req, volume_id):
    return _api(req).get(req.context, volume_id)


# --- discovery -----------------------------------------------------------------------
def _version_doc(req):
    base = req.host_url + req.script_name
    return {"id": "v3.0", "status": "CURRENT", "version": _fmt(MAX_VERSION),
            "min_version": _fmt(MIN_VERSION), "updated": "2023-01-01T00:00:00Z",
            "links": [{"rel": "self", "href": f"{base}/v3/"}],
            "media-types": [{"base": "application/json",
                             "type": "application/vnd.openstack.volume+json;version=3"}]}


def versions(req):
    return 300, {"versions": [_version_doc(req)]}


def show_v3(req):
    return 200, {"versions": [_version_doc(req)]}


# --- volumes -------------------------------------------------------------------------
def _list(req):
    filters = req.filters({"name", "status"})
    vols = _api(req).list(req.context, {k: v for k, v in filters.items()
                                        if not isinstance(v, list)})
    marker, limit = req.GET.get("marker"), req.GET.get("limit")
    if marker:
        ids = [v["id"] for v in vols]
        if marker not in ids:
            raise rest.bad_request(f"Invalid marker {marker}.")
        vols = vols[ids.index(marker) + 1:]
    if limit is not None:
        try:
            vols = vols[:max(int(limit), 0)]
        except ValueError:
            raise rest.bad_request("limit must be an integer")
    return vols


def list_volumes(req):
    return 200, {"volumes": [_summary(req, v) for v in _list(req)]}


def list_volumes_detail(req):
    return 200, {"volumes": [_volume(req, v) for v in _list(req)]}


def create_volume(req):
    body = req.field("volume")
    size = body.get("size")
    image_id = body.get("imageRef") or body.get("image_id")
    if size is None and not body.get("snapshot_id"):
        raise rest.bad_request("Volume size is required.")
    try:
        size = int(size) if size is not None else None
    except (TypeError, ValueError):
        raise rest.bad_request(f"Invalid volume size {size!r}.")
    for unsupported in ("source_volid", "backup_id"):
        if body.get(unsupported):
            raise rest.bad_request(f"Creating a volume from {unsupported} is not supported.")
    vtype = _type(body.get("volume_type") or "default")
    vol = _api(req).create(req.context, size, name=body.get("name"),
                           description=body.get("description"), image_id=image_id,
                           availability_zone=body.get("availability_zone"),
                           volume_type=vtype["name"],
                           multiattach=bool(body.get("multiattach", False))
                           or vtype is MULTIATTACH_TYPE,
                           metadata=_metadata(body.get("metadata")),
                           snapshot_id=body.get("snapshot_id"))
    return 202, {"volume": _volume(req, vol, extended=False)}


def _metadata(value):
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                              for k, v in value.items()):
        raise rest.bad_request("Invalid input received: metadata must be a dict of strings.")
    return value


def volume_action(req, volume_id):
    """``os-set_bootable`` ({"bootable": bool}); the administrator's ``os-reset_status``
    ({"status", "attach_status", "migration_status"}) and
    ``os-migrate_volume_completion`` ({"new_volume": id, "error": bool}, answers
    ``save_volume_id``); ``os-reimage`` ({"image_id", "reimage_reserved"}, 3.68);
    ``os-begin_detaching`` and ``os-roll_detaching`` (a detach starts, or is given up)."""
    body = req.json()
    if not isinstance(body, dict) or len(body) != 1 or next(iter(body)) not in _ACTIONS:
        raise rest.bad_request("Only the " + ", ".join(sorted(_ACTIONS))
                               + " volume actions are supported.")
    name, args = next(iter(body.items()))
    _get_volume(req, volume_id)
    return _ACTIONS[name](req, volume_id, args if isinstance(args, dict) else {})


def _set_bootable(req, volume_id, args):
    bootable = args.get("bootable")
    flag = str(bootable).lower()
    if flag not in ("true", "false", "1", "0", "yes", "no", "on", "off"):
        raise rest.bad_request(f"Invalid value '{bootable}' for bootable. Accepted values are "
                               "'true' or 'false'.")
    _api(req).set_bootable(req.context, volume_id, flag in ("true", "1", "yes", "on"))
    return 200, None


def _admin(req):
    if not req.is_admin():
        raise rest.HTTPError(403, "Policy doesn't allow this action to be performed.")


_STATUSES = ("creating", "available", "awaiting-transfer", "deleting", "error",
             "error_deleting", "error_managing", "managing", "attaching", "in-use", "detaching", "maintenance", "reserved",
             "restoring-backup", "error_restoring", "error_extending", "downloading",
             "uploading", "retyping", "extending")


def _reset_status(req, volume_id, args):
    _admin(req)
    fields = {k: args.get(k) for k in ("status", "attach_status", "migration_status")}
    if not any(fields.values()):
        raise rest.bad_request("Must specify 'status', 'attach_status' or 'migration_status' "
                               "for update.")
    if fields["status"] is not None and fields["status"] not in _STATUSES:
        raise rest.bad_request(f"Invalid input received: status {fields['status']} is not "
                               "valid.")
    if fields["attach_status"] not in (None, "attached", "detached"):
        raise rest.bad_request(f"Invalid input received: attach_status "
                               f"{fields['attach_status']} is not valid.")
    _api(req).reset_status(req.context, volume_id, **fields)
    return 202, None


def _migrate_volume_completion(req, volume_id, args):
    _admin(req)
    new_id = args.get("new_volume")
    if not new_id:
        raise rest.bad_request("Must specify 'new_volume'")
    _get_volume(req, new_id)
    error = str(args.get("error", False)).lower() in ("true", "1", "yes", "on")
    return 200, _api(req).migrate_volume_completion(req.context, volume_id, new_id, error)


def _reimage(req, volume_id, args):
    _require(req, (3, 68))
    image_id = args.get("image_id")
    if not image_id:
        raise rest.bad_request("Must specify 'image_id'")
    reserved = str(args.get("reimage_reserved", False)).lower() in ("true", "1", "yes", "on")
    _api(req).reimage(req.context, volume_id, image_id, reimage_reserved=reserved)
    return 202, None


def _extend(req, volume_id, args):
    new_size = args.get("new_size")
    try:
        new_size = int(new_size)
    except (TypeError, ValueError):
        raise rest.bad_request(f"New size for extend must be specified as an integer: "
                               f"{new_size!r}.")
    _api(req).extend(req.context, volume_id, new_size, in_use_ok=req.version >= (3, 42))
    return 202, None


def _begin_detaching(req, volume_id, args):
    _api(req).begin_detaching(req.context, volume_id)
    return 202, None


def _roll_detaching(req, volume_id, args):
    _api(req).roll_detaching(req.context, volume_id)
    return 202, None


_ACTIONS = {"os-set_bootable": _set_bootable, "os-reset_status": _reset_status,
            "os-migrate_volume_completion": _migrate_volume_completion,
            "os-reimage": _reimage, "os-extend": _extend,
            "os-begin_detaching": _begin_detaching,
            "os-roll_detaching": _roll_detaching}


def show_volume(req, volume_id):
    return 200, {"volume": _volume(req, _get_volume(req, volume_id))}


def delete_volume(req, volume_id):
    _get_volume(req, volume_id)
    _api(req).delete(req.context, volume_id,
                     cascade=str(req.GET.get("cascade", "")).lower() in ("true", "1", "yes"))
    return 202, None


# --- snapshots -------------------------------------------------------------------------
def _snapshot(sn):
    return {**sn, "metadata": {}, "os-extended-snapshot-attributes:project_id": sn["project_id"],
            "os-extended-snapshot-attributes:progress": "100%"}


def create_snapshot(req):
    body = req.field("snapshot")
    if not body.get("volume_id"):
        raise rest.bad_request("A snapshot needs a volume_id.")
    force = str(body.get("force", False)).lower() in ("true", "1", "yes", "on")
    _get_volume(req, body["volume_id"])
    sn = _api(req).create_snapshot(req.context, body["volume_id"], name=body.get("name"),
                                   description=body.get("description"), force=force)
    return 202, {"snapshot": _snapshot(sn)}


def list_snapshots(req):
    return 200, {"snapshots": [{"id": sn["id"], "name": sn["name"]}
                               for sn in _api(req).list_snapshots(req.context)]}


def list_snapshots_detail(req):
    return 200, {"snapshots": [_snapshot(sn) for sn in _api(req).list_snapshots(req.context)]}


def show_snapshot(req, snapshot_id):
    return 200, {"snapshot": _snapshot(_api(req).get_snapshot(req.context, snapshot_id))}


def delete_snapshot(req, snapshot_id):
    _api(req).delete_snapshot(req.context, snapshot_id)
    return 202, None


# --- backups ---------------------------------------------------------------------------------
def _backup(req, b, detail=True):
    doc = {"id": b["id"], "name": b["name"], "links": _links(req, b["id"], "backups")}
    if detail:
        doc.update({k: b[k] for k in ("volume_id", "description", "size", "status", "container",
                                      "created_at", "updated_at")},
                   availability_zone="nova", snapshot_id=None, fail_reason=None,
                   object_count=0, has_dependent_backups=False, is_incremental=False,
                   data_timestamp=b["created_at"])
    return doc


def create_backup(req):
    body = req.field("backup")
    if not body.get("volume_id"):
        raise rest.bad_request("Incorrect request body format: a backup needs a volume_id.")
    for unsupported in ("incremental", "snapshot_id"):
        if body.get(unsupported):
            raise rest.bad_request(f"Backups with {unsupported} are not supported.")
    force = str(body.get("force", False)).lower() in ("true", "1", "yes", "on")
    _get_volume(req, body["volume_id"])
    b = _api(req).create_backup(req.context, body["volume_id"], name=body.get("name"),
                                description=body.get("description"), force=force,
                                container=body.get("container"))
    return 202, {"backup": _backup(req, b, detail=False)}


def list_backups(req, detail=False):
    return 200, {"backups": [_backup(req, b, detail)
                             for b in _api(req).list_backups(req.context)]}


def list_backups_detail(req):
    return list_backups(req, detail=True)


def show_backup(req, backup_id):
    return 200, {"backup": _backup(req, _api(req).get_backup(req.context, backup_id))}


def delete_backup(req, backup_id):
    _api(req).delete_backup(req.context, backup_id)
    return 202, None


def restore_backup(req, backup_id):
    body = req.field("restore")
    _api(req).get_backup(req.context, backup_id)   # 404 before anything is made
    if body.get("volume_id"):
        _get_volume(req, body["volume_id"])
    v = _api(req).restore_backup(req.context, backup_id, volume_id=body.get("volume_id"),
                                 name=body.get("name"))
    return 202, {"restore": {"backup_id": backup_id, "volume_id": v["id"],
                             "volume_name": v["name"]}}


# --- transfers (os-volume-transfer; volume-transfers from 3.55) ---------------------------
def _transfer(req, t, detail=True):
    doc = {"id": t["id"], "name": t["name"], "volume_id": t["volume_id"],
           "links": _links(req, t["id"], "os-volume-transfer")}
    if detail:
        doc["created_at"] = t["created_at"]
    return doc


def create_transfer(req):
    body = req.field("transfer")
    if not body.get("volume_id"):
        raise rest.bad_request("Incorrect request body format: a transfer needs a volume_id.")
    _get_volume(req, body["volume_id"])
    t = _api(req).create_transfer(req.context, body["volume_id"], name=body.get("name"))
    return 202, {"transfer": dict(_transfer(req, t), auth_key=t["auth_key"])}


def list_transfers(req, detail=False):
    return 200, {"transfers": [_transfer(req, t, detail)
                               for t in _api(req).list_transfers(req.context)]}


def list_transfers_detail(req):
    return list_transfers(req, detail=True)


def show_transfer(req, transfer_id):
    return 200, {"transfer": _transfer(req, _api(req).get_transfer(req.context, transfer_id))}


def accept_transfer(req, transfer_id):
    body = req.field("accept")
    if "auth_key" not in body:
        raise rest.bad_request("Incorrect request body format: accept needs an auth_key.")
    t = _api(req).accept_transfer(req.context, transfer_id, body["auth_key"])
    return 202, {"transfer": _transfer(req, t, detail=False)}


def delete_transfer(req, transfer_id):
    _api(req).delete_transfer(req.context, transfer_id)
    return 202, None


# --- attachments (3.27+) -----------------------------------------------------------------
def _attachment(a, detail=True):
    doc = {"id": a["id"], "status": a["status"], "instance": a["instance"],
           "volume_id": a["volume_id"]}
    if detail:
        doc.update(attached_at=a["attached_at"], detached_at=a["detached_at"],
                   attach_mode=a["attach_mode"] or "rw", connection_info=a["connection_info"] or {})
    return doc


def _get_attachment(req, attachment_id):
    a = _api(req).attachment_get(req.context, attachment_id)
    _get_volume(req, a["volume_id"])  # another project's volume: not found
    return a


def create_attachment(req):
    _require(req, (3, 27))
    body = req.field("attachment")
    volume_id = body.get("volume_uuid")
    if not volume_id:
        raise rest.bad_request("An attachment needs a volume_uuid.")
    _get_volume(req, volume_id)
    a = _api(req).attachment_create(req.context, volume_id, body.get("instance_uuid"),
                                    connector=body.get("connector") or None)
    return 200, {"attachment": _attachment(a)}


def list_attachments(req, detail=False):
    _require(req, (3, 27))
    visible = {v["id"] for v in _api(req).list(req.context)}
    items = [a for a in _api(req).attachment_list(
                 req.context, volume_id=req.GET.get("volume_id"),
                 instance_uuid=req.GET.get("instance_id"))
             if a["volume_id"] in visible]
    return 200, {"attachments": [_attachment(a, detail) for a in items]}


def list_attachments_detail(req):
    return list_attachments(req, detail=True)


def show_attachment(req, attachment_id):
    _require(req, (3, 27))
    return 200, {"attachment": _attachment(_get_attachment(req, attachment_id))}


def update_attachment(req, attachment_id):
    _require(req, (3, 27))
    _get_attachment(req, attachment_id)
    body = req.field("attachment")
    if not isinstance(body.get("connector"), dict):
        raise rest.bad_request("An attachment update needs a connector.")
    a = _api(req).attachment_update(req.context, attachment_id, body["connector"],
                                    mountpoint=body["connector"].get("mountpoint"))
    return 200, {"attachment": _attachment(a)}


def delete_attachment(req, attachment_id):
    _require(req, (3, 27))
    _get_attachment(req, attachment_id)
    _api(req).attachment_delete(req.context, attachment_id)
    return 200, {"attachments": []}


def attachment_action(req, attachment_id):
    _require(req, (3, 44))
    body = req.json()
    if not isinstance(body, dict) or "os-complete" not in body:
        raise rest.bad_request("Only the os-complete action is supported.")
    _get_attachment(req, attachment_id)
    _api(req).attachment_complete(req.context, attachment_id)
    return 204, None


# --- volume types ----------------------------------------------------------------------
def _type(type_id):
    """A volume type by id or name ("default": the default one), else 404."""
    for vtype in TYPES:
        if type_id in (vtype["id"], vtype["name"]) or (
                type_id == "default" and vtype is DEFAULT_TYPE):
            return vtype
    raise rest.not_found(f"Volume type {type_id} could not be found.")


def list_types(req):
    return 200, {"volume_types": list(TYPES)}


def show_type(req, type_id):
    return 200, {"volume_type": _type(type_id)}


def show_limits(req):
    """Absolute limits: the embedded service enforces no volume quotas (-1)."""
    vols = _api(req).list(req.context, {})
    absolute = {"maxTotalVolumes": -1, "maxTotalSnapshots": -1, "maxTotalVolumeGigabytes": -1,
                "maxTotalBackups": -1, "maxTotalBackupGigabytes": -1,
                "totalVolumesUsed": len(vols),
                "totalGigabytesUsed": sum(int(v.get("size") or 0) for v in vols),
                "totalSnapshotsUsed": 0, "totalBackupsUsed": 0, "totalBackupGigabytesUsed": 0}
    return 200, {"limits": {"rate": [], "absolute": absolute}}


_RESOURCE_ROUTES = [
    ("GET", "/limits", show_limits),
    ("GET", "/volumes", list_volumes),
    ("GET", "/volumes/detail", list_volumes_detail),
    ("POST", "/volumes", create_volume),
    ("GET", "/volumes/{volume_id}", show_volume),
    ("DELETE", "/volumes/{volume_id}", delete_volume),
    ("POST", "/volumes/{volume_id}/action", volume_action),
    ("POST", "/snapshots", create_snapshot),
    ("GET", "/snapshots", list_snapshots),
    ("GET", "/snapshots/detail", list_snapshots_detail),
    ("GET", "/snapshots/{snapshot_id}", show_snapshot),
    ("DELETE", "/snapshots/{snapshot_id}", delete_snapshot),
    ("POST", "/attachments", create_attachment),
    ("GET", "/attachments", list_attachments),
    ("GET", "/attachments/detail", list_attachments_detail),
    ("GET", "/attachments/{attachment_id}", show_attachment),
    ("PUT", "/attachments/{attachment_id}", update_attachment),
    ("DELETE", "/attachments/{attachment_id}", delete_attachment),
    ("POST", "/attachments/{attachment_id}/action", attachment_action),
    ("POST", "/backups", create_backup),
    ("GET", "/backups", list_backups),
    ("GET", "/backups/detail", list_backups_detail),
    ("GET", "/backups/{backup_id}", show_backup),
    ("DELETE", "/backups/{backup_id}", delete_backup),
    ("POST", "/backups/{backup_id}/restore", restore_backup),
    *[(method, prefix + path, fn) for prefix in ("/os-volume-transfer", "/volume-transfers")
      for method, path, fn in (("POST", "", create_transfer), ("GET", "", list_transfers),
                               ("GET", "/detail", list_transfers_detail),
                               ("GET", "/{transfer_id}", show_transfer),
                               ("POST", "/{transfer_id}/accept", accept_transfer),
                               ("DELETE", "/{transfer_id}", delete_transfer))],
    ("GET", "/types", list_types),
    ("GET", "/types/{type_id}", show_type),
]


def _versioned(fn):
    def handler(req, project_id=None, **kwargs):
        if project_id is not None and project_id != req.context.project_id \
                and not req.is_admin():
            raise rest.bad_request(f"Malformed request url: project id {project_id} does not "
                                   "match the token's project.")
        req.version = _negotiate(req)
        status, body, *rest_ = fn(req, **kwargs)
        headers = dict(rest_[0]) if rest_ else {}
        headers.update({"OpenStack-API-Version": f"volume {_fmt(req.version)}",
                        "Vary": "OpenStack-API-Version"})
        return status, body, headers
    return handler


ROUTES = [("GET", "/", versions), ("GET", "/v3", show_v3)]
# Literal paths first, so "/v3/volumes/detail" is never read as project "volumes".
ROUTES += [(m, "/v3" + p, _versioned(fn)) for m, p, fn in _RESOURCE_ROUTES]
ROUTES += [(m, "/v3/{project_id}" + p, _versioned(fn)) for m, p, fn in _RESOURCE_ROUTES]


def make_app(conf, volume_api):
    return rest.make_app(conf, ROUTES, error_body, public_paths=("/", "", "/v3"),
                         state={"volume_api": volume_api})
