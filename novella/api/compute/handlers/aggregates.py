"""/os-aggregates: host aggregates, their hosts and metadata.

The ``availability_zone`` metadata key makes an aggregate an availability
zone; a host may only be in one zone. When the API was built with an
``aggregate_hook`` the host membership is mirrored through it (placement
aggregates). ``POST /os-aggregates/{id}/images`` (2.81) asks its hosts to
pre-cache images.
"""
import uuid as uuid_mod

from novella.api.compute import common, errors, hosts, rpcclients, validation as v
from novella.db import aggregates as aggregates_db

P = "os_compute_api:os-aggregates:"
_az = {"type": ["string", "null"], "minLength": 1, "maxLength": 255,
       "pattern": r"^[^:]*$"}
_name = v.name_with_spaces
CREATE = v.obj({"aggregate": v.obj({"name": _name, "availability_zone": _az}, ["name"])}, ["aggregate"])
UPDATE = v.obj({"aggregate": {**v.obj({"name": _name, "availability_zone": _az}), "minProperties": 1}},
               ["aggregate"])
_host = v.obj({"host": {"type": "string", "minLength": 1, "maxLength": 255}}, ["host"])
ACTIONS = {
    "add_host": v.obj({"add_host": _host}, ["add_host"]),
    "remove_host": v.obj({"remove_host": _host}, ["remove_host"]),
    "set_metadata": v.obj({"set_metadata": v.obj({"metadata": {
        "type": "object", "patternProperties": {
            r"^[a-zA-Z0-9-_:. /]{1,255}$": {"type": ["string", "null"], "maxLength": 255}},
        "additionalProperties": False}}, ["metadata"])}, ["set_metadata"]),
}


def view(req, agg, full=True):
    out = {"availability_zone": aggregates_db.zone(agg),
           "created_at": common.iso_usec(agg.created_at),
           "deleted": False, "deleted_at": None, "id": agg.id, "name": agg.name,
           "updated_at": common.iso_usec(agg.updated_at)}
    if req.at_least("2.41"):
        out["uuid"] = agg.uuid
    if full:
        out["hosts"] = [h.host for h in agg.hosts]
        out["metadata"] = {m.key: m.value for m in agg.metadata_items}
    return out


def _id(aggregate_id):
    """The aggregate id a path gives, None when it is not a number."""
    try:
        return int(aggregate_id)
    except ValueError:
        return None


def _not_found(aggregate_id):
    return errors.NotFound(f"Aggregate {aggregate_id} could not be found.")


_INTERNAL_ZONE = "Aggregates cannot be put in the internal availability zone."


def _zones_taken(action, aggregate_id, refused):
    return (f"Cannot {action} aggregate {aggregate_id}. Reason: One or more hosts already in "
            f"availability zone(s) {refused.zones}.")


def index(req):
    req.authorize(P + "index")
    return 200, {"aggregates": [view(req, a) for a in aggregates_db.every(req.api.api_db)]}


def create(req):
    req.authorize(P + "create")
    body = req.body_json(CREATE)["aggregate"]
    name, zone = body["name"].strip(), body.get("availability_zone")
    try:
        agg = aggregates_db.add(req.api.api_db, str(uuid_mod.uuid4()), name, zone,
                                req.api.conf.internal_service_availability_zone)
    except aggregates_db.Refused as exc:
        if exc.reason == "internal zone":
            raise errors.BadRequest(_INTERNAL_ZONE)
        raise errors.Conflict(f"Aggregate {name} already exists.")
    return 200, {"aggregate": view(req, agg, full=False)}


def show(req, aggregate_id):
    req.authorize(P + "show")
    agg = aggregates_db.get(req.api.api_db, _id(aggregate_id))
    if agg is None:
        raise _not_found(aggregate_id)
    return 200, {"aggregate": view(req, agg)}


def update(req, aggregate_id):
    req.authorize(P + "update")
    body = req.body_json(UPDATE)["aggregate"]
    name = body["name"].strip() if "name" in body else None
    changes = {"zone_": body["availability_zone"]} if "availability_zone" in body else {}
    try:
        agg = aggregates_db.update(req.api.api_db, _id(aggregate_id),
                                   req.api.conf.internal_service_availability_zone,
                                   name=name, **changes)
    except aggregates_db.Refused as exc:
        if exc.reason == "not found":
            raise _not_found(aggregate_id)
        if exc.reason == "name taken":
            raise errors.Conflict(f"Aggregate {name} already exists.")
        if exc.reason == "internal zone":
            raise errors.BadRequest(_INTERNAL_ZONE)
        raise errors.BadRequest(_zones_taken("update", _id(aggregate_id), exc))
    return 200, {"aggregate": view(req, agg)}


def delete(req, aggregate_id):
    req.authorize(P + "delete")
    try:
        aggregates_db.delete(req.api.api_db, _id(aggregate_id))
    except aggregates_db.Refused as exc:
        if exc.reason == "not found":
            raise _not_found(aggregate_id)
        raise errors.BadRequest(f"Cannot remove aggregate {_id(aggregate_id)}. "
                                "Reason: Host list is not empty.")
    return 200, None


def _is_compute_host(req, host):
    return bool(hosts.services(req.api, host=host, binary=hosts.COMPUTE))


def action(req, aggregate_id):
    body = req.body_json()
    name = next(iter(body), None) if isinstance(body, dict) and len(body) == 1 else None
    if name not in ACTIONS:
        raise errors.BadRequest(f"There is no such action: {name}")
    req.authorize(P + name)
    v.validate(ACTIONS[name], body)
    api_db, agg_id = req.api.api_db, _id(aggregate_id)
    try:
        if name == "add_host":
            host = body["add_host"]["host"]
            agg = aggregates_db.add_host(api_db, agg_id, host, lambda h: _is_compute_host(req, h))
        elif name == "remove_host":
            host = body["remove_host"]["host"]
            agg = aggregates_db.remove_host(api_db, agg_id, host)
        else:
            agg = aggregates_db.set_metadata(api_db, agg_id, body["set_metadata"]["metadata"],
                                             req.api.conf.internal_service_availability_zone)
    except aggregates_db.Refused as exc:
        raise _refused(name, aggregate_id, agg_id, body[name], exc)
    hook = req.api.aggregate_hook
    if hook is not None and name in ("add_host", "remove_host"):
        hook(name, agg.uuid, body[name]["host"])
    return 200, {"aggregate": view(req, agg)}


def _refused(name, aggregate_id, agg_id, args, exc):
    """The error of an action its aggregate (``agg_id``; ``aggregate_id`` as the
    path gives it) refused."""
    if exc.reason == "not found":
        return _not_found(aggregate_id)
    if exc.reason == "internal zone":
        return errors.BadRequest(_INTERNAL_ZONE)
    if name == "add_host":
        host = args["host"]
        if exc.reason == "no such host":
            return errors.NotFound(f"Compute host {host} could not be found.")
        if exc.reason == "has host":
            return errors.Conflict(f"Aggregate {agg_id} already has host {host}.")
        return errors.Conflict(_zones_taken("add host to", agg_id, exc))
    if name == "remove_host":
        return errors.NotFound(f"Cannot remove host {args['host']} in aggregate {agg_id}")
    return errors.BadRequest(_zones_taken("update metadata of", agg_id, exc))


CACHE_IMAGES = v.obj({"cache": {"type": "array", "minItems": 1,
                             "items": v.obj({"id": v.uuid}, ["id"])}}, ["cache"])


def cache_images(req, aggregate_id):
    """2.81: the aggregate's hosts asked to fetch images into their caches (by the
    conductor, after the answer)."""
    if not req.at_least("2.81"):
        raise errors.NotFound("The resource could not be found.")
    body = req.body_json(CACHE_IMAGES)
    req.authorize("compute:aggregates:images", {})
    if _id(aggregate_id) is None:
        raise errors.BadRequest("Invalid input received: id must be an integer")
    image_ids = [image["id"] for image in body["cache"]]
    if len(set(image_ids)) != len(image_ids):
        raise errors.BadRequest("Duplicate images in request")
    agg = aggregates_db.get(req.api.api_db, _id(aggregate_id))
    if agg is None:
        raise _not_found(aggregate_id)
    rpcclients.cache_images(req.api.transport, req.context, agg.id,
                            [h.host for h in agg.hosts], image_ids)
    return 202, None


ROUTES = [
    ("GET", "/os-aggregates", index),
    ("POST", "/os-aggregates", create),
    ("GET", "/os-aggregates/{aggregate_id}", show),
    ("PUT", "/os-aggregates/{aggregate_id}", update),
    ("DELETE", "/os-aggregates/{aggregate_id}", delete),
    ("POST", "/os-aggregates/{aggregate_id}/action", action),
    ("POST", "/os-aggregates/{aggregate_id}/images", cache_images),
]
