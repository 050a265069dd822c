"""Image API v2 (Glance's wire format) over ``novella.image.api.ImageAPI``.

    GET  /                       versions (300)
    GET  /v2/images              list; filters name, visibility, status, owner,
                                 disk_format, container_format, id, and any other
                                 name an image property; sort_key/sort_dir;
                                 limit/marker
    GET  /v2/images/{id}/tasks   the image's import tasks (none: images are uploaded)
    POST /v2/images              a record (queued); unknown fields become properties
    GET|PATCH|DELETE /v2/images/{id}
    PUT|GET /v2/images/{id}/file upload (-> active) / download
    GET  /v2/schemas/image(s)    minimal schemas

Images are flat documents: the service's ``properties`` are top-level keys.
Publicizing an image and changing another project's image need the admin
role; another project's private image is not found.
"""
from novella.api import rest
from novella.image.api import CORE_FIELDS, VISIBILITIES, ImageNotFound

VERSIONS = ("2.16", "2.15", "2.9", "2.7", "2.6", "2.5", "2.4", "2.3", "2.2", "2.1", "2.0")
READ_ONLY = {"id", "status", "size", "virtual_size", "checksum", "os_hash_algo", "os_hash_value",
             "created_at", "updated_at", "self", "file", "schema", "direct_url", "locations"}
LIST_FILTERS = {"name", "visibility", "status", "owner", "disk_format", "container_format", "id"}
# Query parameters that are not filters; any other names an image property (as in Glance).
LIST_PARAMS = {"limit", "marker", "sort_key", "sort_dir", "sort", "member_status", "tag",
               "os_hidden", "size_min", "size_max", "created_at", "updated_at", "protected"}
SORT_KEYS = {"created_at", "updated_at", "name", "id", "size", "status", "disk_format",
             "container_format", "visibility", "owner", "min_disk", "min_ram"}


def error_body(code, title, message, kind):
    """Glance answers errors as webob renders them for a client that does not ask
    for HTML: plain text, the status line then the explanation (python-glanceclient
    reads any JSON error as a dict of dicts)."""
    return f"{code} {title}\n\n{message}\n\n   "


def _view(req, image):
    doc = dict(image.get("properties") or {})
    doc.update({k: image.get(k) for k in CORE_FIELDS})
    doc.update(id=image["id"], status=image["status"], size=image["size"],
               virtual_size=None, checksum=image["checksum"],
               os_hash_algo=image["os_hash_algo"], os_hash_value=image["os_hash_value"],
               created_at=image["created_at"], updated_at=image["updated_at"] or image["created_at"],
               tags=doc.pop("tags", None) or [], os_hidden=bool(doc.pop("os_hidden", False)),
               min_disk=image.get("min_disk") or 0, min_ram=image.get("min_ram") or 0,
               protected=bool(image.get("protected")),
               self=f"/v2/images/{image['id']}", file=f"/v2/images/{image['id']}/file",
               schema="/v2/schemas/image")
    return doc


def _api(req):
    return req.state["image_api"]


def _get(req, image_id):
    return _api(req).get(req.context, image_id)


def _check_owner(req, image):
    if not req.is_admin() and image["owner"] != req.context.project_id:
        raise rest.HTTPError(403, f"You are not permitted to modify image {image['id']}.")


def versions(req):
    base = req.host_url + req.script_name
    docs = [{"id": f"v{v}", "status": "CURRENT" if i == 0 else "SUPPORTED",
             "links": [{"rel": "self", "href": f"{base}/v2/"}]} for i, v in enumerate(VERSIONS)]
    return 300, {"versions": docs}


def list_images(req):
    filters = req.filters(LIST_FILTERS)
    visibility = filters.pop("visibility", None)
    properties = {k: v for k, v in req.filters().items()
                  if k not in LIST_FILTERS | LIST_PARAMS and not isinstance(v, list)}
    images = _api(req).list(req.context, dict(properties, **{
        k: v for k, v in filters.items() if not isinstance(v, list)}))
    sort_key, sort_dir = req.GET.get("sort_key"), req.GET.get("sort_dir", "desc")
    if sort_key is not None:
        if sort_key not in SORT_KEYS:
            raise rest.bad_request(f"Invalid sort key: {sort_key}")
        if sort_dir not in ("asc", "desc"):
            raise rest.bad_request(f"Invalid sort direction: {sort_dir}")
        # The service lists in the order images were made: a stable sort keeps it for ties.
        images.sort(key=lambda i: (i.get(sort_key) is not None, i.get(sort_key) or ""),
                    reverse=sort_dir == "desc")
    if visibility not in (None, "all"):
        images = [i for i in images if i["visibility"] == visibility]
    elif visibility is None:
        # Like Glance, another project's community image is listed only on request.
        project = req.context.project_id
        images = [i for i in images if i["visibility"] != "community" or i["owner"] == project]
    marker = req.GET.get("marker")
    if marker:
        ids = [i["id"] for i in images]
        if marker not in ids:
            raise rest.bad_request(f"Invalid marker {marker}: image not found.")
        images = images[ids.index(marker) + 1:]
    body = {"first": "/v2/images", "schema": "/v2/schemas/images"}
    limit = req.GET.get("limit")
    if limit is not None:
        try:
            limit = int(limit)
        except ValueError:
            raise rest.bad_request("limit param must be an integer")
        if limit < 0:
            raise rest.bad_request("limit param must be positive")
        if len(images) > limit:
            images = images[:limit]
            if images:
                body["next"] = f"/v2/images?marker={images[-1]['id']}&limit={limit}"
    body["images"] = [_view(req, i) for i in images]
    return 200, body


def create_image(req):
    body = req.json()
    if not isinstance(body, dict):
        raise rest.bad_request("The request body must be a JSON object.")
    bad = READ_ONLY & set(body) - {"id"}
    if bad:
        raise rest.HTTPError(403, f"Attribute '{sorted(bad)[0]}' is read-only.")
    fields = dict(body)
    visibility = fields.pop("visibility", "shared")
    if visibility not in VISIBILITIES:
        raise rest.bad_request(f"Invalid visibility value: {visibility}")
    if visibility == "public" and not req.is_admin():
        raise rest.HTTPError(403, "You are not authorized to complete publicize_image action.")
    if "owner" in fields and fields["owner"] != req.context.project_id and not req.is_admin():
        raise rest.HTTPError(403, "You are not permitted to create images owned by another project.")
    name = fields.pop("name", None)
    image_id = fields.pop("id", None)
    if image_id:
        try:
            _api(req).get(None, image_id, include_deleted=True)
            raise rest.HTTPError(409, f"Image with identifier {image_id} already exists!")
        except ImageNotFound:
            pass
    image = _api(req).create(req.context, name=name, id=image_id, visibility=visibility, **fields)
    return 201, _view(req, image), {"Location": f"{req.host_url}/v2/images/{image['id']}"}


def show_image(req, image_id):
    return 200, _view(req, _get(req, image_id))


def _patch_ops(req):
    """The operations of a JSON patch; also the older form Glance takes
    (``application/openstack-images-v2.0-json-patch``): ``{"add": "/key", "value": v}``."""
    ops = req.json()
    if not isinstance(ops, list):
        raise rest.bad_request("Expected a JSON patch: a list of operations.")
    out = []
    for op in ops:
        if isinstance(op, dict) and "op" not in op:
            named = [name for name in ("add", "replace", "remove") if name in op]
            if len(named) == 1:
                op = dict(op, op=named[0], path=op[named[0]])
        out.append(op)
    return out


def update_image(req, image_id):
    image = _get(req, image_id)
    _check_owner(req, image)
    core, props, remove = {}, {}, []
    for op in _patch_ops(req):
        if not isinstance(op, dict) or op.get("op") not in ("add", "replace", "remove"):
            raise rest.bad_request("Each operation needs an op of add, replace or remove.")
        path = op.get("path")
        key = path.lstrip("/") if isinstance(path, str) else None
        if not key or "/" in key:
            raise rest.bad_request(f"Invalid path {path!r}: only top-level attributes.")
        if key in READ_ONLY:
            raise rest.HTTPError(403, f"Attribute '{key}' is read-only.")
        if op["op"] == "remove":
            if key in CORE_FIELDS:
                raise rest.HTTPError(403, f"Attribute '{key}' is reserved.")
            if key not in image["properties"] and key not in props:
                raise rest.HTTPError(409, f"Property {key} does not exist.")
            remove.append(key)
            props.pop(key, None)
            continue
        if "value" not in op:
            raise rest.bad_request("add and replace need a value.")
        value = op["value"]
        if key == "visibility":
            if value not in VISIBILITIES:
                raise rest.bad_request(f"Invalid visibility value: {value}")
            if value == "public" and not req.is_admin():
                raise rest.HTTPError(403, "You are not authorized to complete publicize_image action.")
        if key in CORE_FIELDS:
            core[key] = value
        else:
            props[key] = value
            if key in remove:
                remove.remove(key)
    updated = _api(req).update(req.context, image_id, properties=props,
                               remove_properties=remove, **core)
    return 200, _view(req, updated)


def delete_image(req, image_id):
    image = _get(req, image_id)
    _check_owner(req, image)
    _api(req).delete(req.context, image_id)
    return 204, None


def upload(req, image_id):
    image = _get(req, image_id)
    _check_owner(req, image)
    if image["status"] != "queued":
        raise rest.HTTPError(409, f"Image {image_id} is {image['status']}: data can only be "
                                  "uploaded to a queued image.")
    _api(req).upload(req.context, image_id, req.body_file if req.content_length is None
                     else req.body)
    return 204, None


def download(req, image_id):
    image = _get(req, image_id)
    if image["status"] != "active":
        return 204, None
    data = _api(req).download(req.context, image_id)
    headers = {"Content-Type": "application/octet-stream"}
    if image["checksum"]:
        headers["Content-MD5"] = image["checksum"]
    return 200, data, headers


def image_tasks(req, image_id):
    """Glance 2.12: the tasks that import an image's data. Data is only ever uploaded
    here (never imported), so an image the caller may see has none."""
    try:
        _api(req).get(req.context, image_id)
    except ImageNotFound:
        raise rest.HTTPError(404, f"Image {image_id} not found.")
    return 200, {"tasks": []}


def _schema(plural):
    props = {k: {"type": ["null", "string"]} for k in ("name", "id", "status", "owner",
                                                       "disk_format", "container_format",
                                                       "visibility", "checksum", "os_hash_algo",
                                                       "os_hash_value", "created_at", "updated_at")}
    props.update({k: {"type": ["null", "integer"]} for k in ("size", "virtual_size", "min_disk",
                                                              "min_ram")})
    props.update(protected={"type": "boolean"}, os_hidden={"type": "boolean"},
                 tags={"type": "array", "items": {"type": "string"}})
    image = {"name": "image", "properties": props, "additionalProperties": {"type": "string"}}
    if plural:
        return {"name": "images", "properties": {"images": {"type": "array", "items": image}}}
    return image


def schema_image(req):
    return 200, _schema(False)


def schema_images(req):
    return 200, _schema(True)


ROUTES = [
    ("GET", "/", versions),
    ("GET", "/versions", versions),
    ("GET", "/v2/images", list_images),
    ("POST", "/v2/images", create_image),
    ("GET", "/v2/images/{image_id}", show_image),
    ("PATCH", "/v2/images/{image_id}", update_image),
    ("DELETE", "/v2/images/{image_id}", delete_image),
    ("PUT", "/v2/images/{image_id}/file", upload),
    ("GET", "/v2/images/{image_id}/file", download),
    ("GET", "/v2/images/{image_id}/tasks", image_tasks),
    ("GET", "/v2/schemas/image", schema_image),
    ("GET", "/v2/schemas/images", schema_images),
]


def make_app(conf, image_api):
    return rest.make_app(conf, ROUTES, error_body, public_paths=("/", "", "/versions"),
                         state={"image_api": image_api})
