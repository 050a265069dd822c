"""The Compute API's image proxy (``/images``), up to microversion 2.35.

The reference deprecated these at 2.36 (404 from there on: the image
service's own API replaces them); older clients, and the images a
``createImage`` makes being watched through them, still use them. Each is
the embedded image service's image (``req.api.image_api``) in the
reference's compute view: status ``SAVING`` / ``ACTIVE`` / ``DELETED``,
``progress``, ``minRam``, ``minDisk``, ``metadata`` (the image's
properties) and, for a server's snapshot, ``server``.
"""
from novella.api.compute import errors
from novella.api.compute import validation as v

MAX_VERSION = (2, 35)
_STATUS = {"queued": "SAVING", "saving": "SAVING", "active": "ACTIVE", "killed": "ERROR",
           "deleted": "DELETED", "pending_delete": "DELETED"}
_PROGRESS = {"queued": 25, "saving": 50, "active": 100}


def _api(req):
    if req.version > MAX_VERSION or req.api.image_api is None:
        raise errors.NotFound("The resource could not be found.")
    return req.api.image_api


def _get(req, image_id):
    try:
        return _api(req).get(req.context, image_id)
    except errors.APIError:
        raise
    except Exception:  # noqa: BLE001 - the image service's not-found (or not visible)
        raise errors.NotFound("Image not found.")


def _owned(req, image):
    """403 unless the caller's project owns the image (or the caller is an admin)."""
    if image.get("owner") != req.context.project_id and not req.is_admin():
        raise errors.Forbidden("You are not allowed to modify the image.")


def _basic(req, image):
    return {"id": image["id"], "name": image.get("name"),
            "links": req.links("images", image["id"])}


def _detail(req, image):
    out = _basic(req, image)
    out.update({
        "minRam": image.get("min_ram") or 0, "minDisk": image.get("min_disk") or 0,
        "metadata": dict(image.get("properties") or {}),
        "created": image.get("created_at"),
        "updated": image.get("updated_at") or image.get("created_at"),
        "status": _STATUS.get(image["status"], "UNKNOWN"),
        "progress": _PROGRESS.get(image["status"], 0),
        "OS-EXT-IMG-SIZE:size": image.get("size"),
    })
    server = (image.get("properties") or {}).get("instance_uuid")
    if server:
        out["server"] = {"id": server, "links": req.links("servers", server)}
    return out


_FILTERS = {"name": "name", "status": "status", "server": "instance_uuid",
            "type": "image_type", "minRam": "min_ram", "minDisk": "min_disk"}


def _list(req, view):
    images = _api(req).list(req.context)
    for param, field in _FILTERS.items():
        wanted = req.GET.get(param)
        if wanted is None:
            continue
        if param == "server":
            wanted = wanted.rstrip("/").rsplit("/", 1)[-1]
        if param in ("minRam", "minDisk"):
            try:
                floor = int(wanted)
            except ValueError:
                raise errors.BadRequest(f"Invalid {param} filter [{wanted}]")
            images = [i for i in images if (i.get(field) or 0) >= floor]
        elif param == "status":
            images = [i for i in images if _STATUS.get(i["status"]) == wanted.upper()]
        elif field in ("name",):
            images = [i for i in images if i.get(field) == wanted]
        else:
            images = [i for i in images if (i.get("properties") or {}).get(field) == wanted]
    images.sort(key=lambda i: i.get("created_at") or "", reverse=True)  # newest first
    marker = req.GET.get("marker")
    if marker:
        ids = [i["id"] for i in images]
        if marker not in ids:
            raise errors.BadRequest(f"marker [{marker}] not found")
        images = images[ids.index(marker) + 1:]
    limit = req.GET.get("limit")
    if limit is not None:
        if not limit.isdigit():
            raise errors.BadRequest("limit param must be an integer")
        images = images[:int(limit)]
    return 200, {"images": [view(req, i) for i in images]}


def index(req):
    return _list(req, _basic)


def detail(req):
    return _list(req, _detail)


def show(req, image_id):
    return 200, {"image": _detail(req, _get(req, image_id))}


def delete(req, image_id):
    image = _get(req, image_id)
    _owned(req, image)
    if image.get("protected"):
        raise errors.Forbidden("You are not allowed to delete the image.")
    _api(req).delete(req.context, image_id)
    return 204, None


# --- image metadata ----------------------------------------------------------------------
_metadata_schema = v.obj({"metadata": v.metadata}, ["metadata"])
_meta_schema = v.obj({"meta": dict(v.metadata, minProperties=1, maxProperties=1)}, ["meta"])


def metadata_index(req, image_id):
    return 200, {"metadata": dict(_get(req, image_id).get("properties") or {})}


def _set_metadata(req, image_id, replace):
    image = _get(req, image_id)
    body = req.body_json()
    v.validate(_metadata_schema, body)
    _owned(req, image)
    new = body["metadata"]
    remove = [k for k in image.get("properties") or {} if k not in new] if replace else []
    updated = _api(req).update(req.context, image_id, properties=new,
                               remove_properties=remove)
    return 200, {"metadata": dict(updated.get("properties") or {})}


def metadata_update(req, image_id):
    return _set_metadata(req, image_id, replace=False)


def metadata_replace(req, image_id):
    return _set_metadata(req, image_id, replace=True)


def metadata_show(req, image_id, key):
    properties = _get(req, image_id).get("properties") or {}
    if key not in properties:
        raise errors.NotFound("Image metadata key not found")
    return 200, {"meta": {key: properties[key]}}


def metadata_set(req, image_id, key):
    image = _get(req, image_id)
    body = req.body_json()
    v.validate(_meta_schema, body)
    if key not in body["meta"]:
        raise errors.BadRequest("Request body and URI mismatch")
    _owned(req, image)
    _api(req).update(req.context, image_id, properties={key: body["meta"][key]})
    return 200, {"meta": {key: body["meta"][key]}}


def metadata_delete(req, image_id, key):
    image = _get(req, image_id)
    if key not in (image.get("properties") or {}):
        raise errors.NotFound("Image metadata key not found")
    _owned(req, image)
    _api(req).update(req.context, image_id, remove_properties=[key])
    return 204, None


ROUTES = [
    ("GET", "/images", index),
    ("GET", "/images/detail", detail),
    ("GET", "/images/{image_id}", show),
    ("DELETE", "/images/{image_id}", delete),
    ("GET", "/images/{image_id}/metadata", metadata_index),
    ("POST", "/images/{image_id}/metadata", metadata_update),
    ("PUT", "/images/{image_id}/metadata", metadata_replace),
    ("GET", "/images/{image_id}/metadata/{key}", metadata_show),
    ("PUT", "/images/{image_id}/metadata/{key}", metadata_set),
    ("DELETE", "/images/{image_id}/metadata/{key}", metadata_delete),
]
