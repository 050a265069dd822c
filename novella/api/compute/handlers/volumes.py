"""/os-volumes and /os-snapshots: the proxies to the volume service's volumes and
snapshots (up to 2.35), in the reference's shape (camelCase keys; one attachment,
the first server's, or ``[{}]``).

The volume service's refusals become the reference's: 404 for a volume the caller
cannot see, 400 for what it refuses (deleting an attached volume, a bad size).
"""
import datetime

from novella.api.compute import common, errors, validation as v
from novella.volume import api as volume_mod

P = "os_compute_api:os-volumes:"

_create_body = v.obj({"volume": v.obj({
    "volume_type": {"type": "string"},
    "metadata": {"type": "object"},
    "snapshot_id": {"type": "string"},
    "size": {"type": ["integer", "string"], "pattern": "^[0-9]+$", "minimum": 1},
    "availability_zone": {"type": "string"},
    "display_name": {"type": "string"},
    "display_description": {"type": "string"},
}, ["size"])}, ["volume"])


_snapshot_body = v.obj({"snapshot": v.obj({
    "volume_id": {"type": "string"}, "force": v.boolean,
    "display_name": {"type": "string"}, "display_description": {"type": "string"}},
    ["volume_id"])}, ["snapshot"])


def _volumes(req, rule):
    if req.at_least("2.36"):
        raise errors.NotFound("The resource could not be found.")
    req.authorize(P + rule)
    return req.api.volume_api


def _usec(iso_z):
    return datetime.datetime.strptime(iso_z, "%Y-%m-%dT%H:%M:%SZ").strftime(
        "%Y-%m-%dT%H:%M:%S.%f")


def _error(exc, volume_id=None):
    if exc.code == 404:
        return errors.NotFound(f"Volume {volume_id} could not be found.")
    return errors.BadRequest(f"Invalid input received: {exc}")


def view(vol):
    attached = [a for a in vol.get("attachments") or [] if a.get("server_id")]
    if attached:
        first = attached[0]
        attachment = {"id": vol["id"], "volumeId": vol["id"], "serverId": first["server_id"]}
        if first.get("device"):
            attachment["device"] = first["device"]
        attachments = [attachment]
    else:
        attachments = [{}]
    return {"id": vol["id"], "status": vol["status"], "size": vol["size"],
            "availabilityZone": vol["availability_zone"], "createdAt": _usec(vol["created_at"]),
            "attachments": attachments, "displayName": vol["name"],
            "displayDescription": vol["description"], "volumeType": vol["volume_type"],
            "snapshotId": None, "metadata": vol.get("metadata") or {}}


def _list(req, rule):
    api = _volumes(req, rule)
    limit, _marker = common.limit_and_marker(req)
    offset = common.db_int(req.GET.get("offset", 0))
    vols = api.list(req.context)[offset:offset + limit]
    return 200, {"volumes": [view(vol) for vol in vols]}


def index(req):
    return _list(req, "list")


def detail(req):
    return _list(req, "detail")


def show(req, volume_id):
    api = _volumes(req, "show")
    try:
        return 200, {"volume": view(api.get(req.context, volume_id))}
    except volume_mod.VolumeError as exc:
        raise _error(exc, volume_id)


def create(req):
    api = _volumes(req, "create")
    body = req.body_json(_create_body)["volume"]
    if body.get("snapshot_id"):
        raise errors.NotFound(f"Snapshot {body['snapshot_id']} could not be found.")
    try:
        vol = api.create(req.context, int(body["size"]), name=body.get("display_name"),
                         description=body.get("display_description"),
                         availability_zone=body.get("availability_zone"),
                         volume_type=body.get("volume_type"), metadata=body.get("metadata"))
    except volume_mod.VolumeError as exc:
        raise _error(exc)
    return 200, {"volume": view(vol)}, {"Location": req.self_link("os-volumes", vol["id"])}


def delete(req, volume_id):
    api = _volumes(req, "delete")
    try:
        api.get(req.context, volume_id)  # another project's volume is not found
        api.delete(req.context, volume_id)
    except volume_mod.VolumeError as exc:
        raise _error(exc, volume_id)
    return 202, None


# --- /os-snapshots ----------------------------------------------------------------------
def snapshot_view(sn):
    return {"id": sn["id"], "volumeId": sn["volume_id"], "status": sn["status"],
            "size": sn["size"], "createdAt": _usec(sn["created_at"]),
            "displayName": sn["name"], "displayDescription": sn["description"]}


def _snapshots(req, rule):
    api = _volumes(req, "snapshots:" + rule)
    limit, _marker = common.limit_and_marker(req)
    offset = common.db_int(req.GET.get("offset", 0))
    return 200, {"snapshots": [snapshot_view(sn) for sn in
                               api.list_snapshots(req.context)[offset:offset + limit]]}


def snapshot_index(req):
    return _snapshots(req, "list")


def snapshot_detail(req):
    return _snapshots(req, "detail")


def snapshot_show(req, snapshot_id):
    api = _volumes(req, "snapshots:show")
    try:
        return 200, {"snapshot": snapshot_view(api.get_snapshot(req.context, snapshot_id))}
    except volume_mod.VolumeError as exc:
        raise errors.NotFound(str(exc)) if exc.code == 404 else _error(exc)


def snapshot_create(req):
    api = _volumes(req, "snapshots:create")
    body = req.body_json(_snapshot_body)["snapshot"]
    try:
        sn = api.create_snapshot(req.context, body["volume_id"], name=body.get("display_name"),
                                 description=body.get("display_description"),
                                 force=v.to_bool(body.get("force", False)))
    except volume_mod.VolumeError as exc:
        raise _error(exc, body["volume_id"])
    return 200, {"snapshot": snapshot_view(sn)}


def snapshot_delete(req, snapshot_id):
    api = _volumes(req, "snapshots:delete")
    try:
        api.delete_snapshot(req.context, snapshot_id)
    except volume_mod.VolumeError as exc:
        raise errors.NotFound(str(exc)) if exc.code == 404 else _error(exc)
    return 202, None


ROUTES = [
    ("GET", "/os-snapshots", snapshot_index),
    ("POST", "/os-snapshots", snapshot_create),
    ("GET", "/os-snapshots/detail", snapshot_detail),
    ("GET", "/os-snapshots/{snapshot_id}", snapshot_show),
    ("DELETE", "/os-snapshots/{snapshot_id}", snapshot_delete),
    ("GET", "/os-volumes", index),
    ("POST", "/os-volumes", create),
    ("GET", "/os-volumes/detail", detail),
    ("GET", "/os-volumes/{volume_id}", show),
    ("DELETE", "/os-volumes/{volume_id}", delete),
]
