"""/os-aggregates: host aggregates, their hosts and metadata.

The ``availability_zone`` metadata key makes an aggregate an availability
zone; a host may only be in one zone. When the API was built with an
``aggregate_hook`` the host membership is mirrored through it (placement
aggregates).
"""
import uuid as uuid_mod

from novella.api.compute import common, errors, hosts, validation as v
from novella.db import aggregates as aggregates_db
from novella.db.timestamps import utcnow

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


def _zone(agg):
    return next((m.value for m in agg.metadata_items if m.key == "availability_zone"), None)


def view(req, agg, full=True):
    out = {"availability_zone": _zone(agg), "created_at": common.iso_usec(agg.created_at),
           "deleted": False, "deleted_at": None, "id": agg.id, "name": agg.name,
           "updated_at": common.iso_usec(agg.updated_at)}
    if req.at_least("2.41"):
        out["uuid"] = agg.uuid
    if full:
        out["hosts"] = [h.host for h in agg.hosts]
        out["metadata"] = {m.key: m.value for m in agg.metadata_items}
    return out


def _get(s, aggregate_id):
    try:
        agg = aggregates_db.get(s, int(aggregate_id))
    except ValueError:
        agg = None
    if agg is None:
        raise errors.NotFound(f"Aggregate {aggregate_id} could not be found.")
    return agg


def _check_zone_name(req, zone):
    if zone == req.api.conf.internal_service_availability_zone:
        raise errors.BadRequest("Aggregates cannot be put in the internal availability zone.")


def _zone_conflicts(s, agg, hosts_, zone):
    """Zones other aggregates give ``hosts_`` that differ from ``zone``."""
    if zone is None or not hosts_:
        return set()
    return {z for z in aggregates_db.zones_of_hosts(s, hosts_, agg.id) if z != zone}


def index(req):
    req.authorize(P + "index")
    with req.api.api_db.session() as s:
        rows = aggregates_db.every(s)
        return 200, {"aggregates": [view(req, a) for a in rows]}


def create(req):
    req.authorize(P + "create")
    body = req.body_json(CREATE)["aggregate"]
    name, zone = body["name"].strip(), body.get("availability_zone")
    _check_zone_name(req, zone)
    with req.api.api_db.session(write=True) as s:
        if aggregates_db.named(s, name):
            raise errors.Conflict(f"Aggregate {name} already exists.")
        agg = aggregates_db.add(s, str(uuid_mod.uuid4()), name, zone)
        return 200, {"aggregate": view(req, agg, full=False)}


def show(req, aggregate_id):
    req.authorize(P + "show")
    with req.api.api_db.session() as s:
        return 200, {"aggregate": view(req, _get(s, aggregate_id))}


def update(req, aggregate_id):
    req.authorize(P + "update")
    body = req.body_json(UPDATE)["aggregate"]
    with req.api.api_db.session(write=True) as s:
        agg = _get(s, aggregate_id)
        if "name" in body:
            name = body["name"].strip()
            if aggregates_db.named(s, name, other_than=agg.id) is not None:
                raise errors.Conflict(f"Aggregate {name} already exists.")
            agg.name = name
        if "availability_zone" in body:
            zone = body["availability_zone"]
            _check_zone_name(req, zone)
            conflicts = _zone_conflicts(s, agg, [h.host for h in agg.hosts], zone)
            if conflicts:
                raise errors.BadRequest(f"Cannot update aggregate {agg.id}. Reason: One or more "
                                        f"hosts already in availability zone(s) {sorted(conflicts)}.")
            aggregates_db.set_metadata(agg, {"availability_zone": zone})
        agg.updated_at = utcnow()
        s.flush()
        return 200, {"aggregate": view(req, agg)}


def delete(req, aggregate_id):
    req.authorize(P + "delete")
    with req.api.api_db.session(write=True) as s:
        agg = _get(s, aggregate_id)
        if agg.hosts:
            raise errors.BadRequest(f"Cannot remove aggregate {agg.id}. Reason: Host list is not empty.")
        aggregates_db.delete(s, agg)
    return 200, None


def action(req, aggregate_id):
    body = req.body_json()
    name = next(iter(body), None) if isinstance(body, dict) and len(body) == 1 else None
    if name not in ACTIONS:
        raise errors.BadRequest(f"There is no such action: {name}")
    req.authorize(P + name)
    v.validate(ACTIONS[name], body)
    hook = req.api.aggregate_hook
    with req.api.api_db.session(write=True) as s:
        agg = _get(s, aggregate_id)
        members = [h.host for h in agg.hosts]
        if name == "add_host":
            host = body["add_host"]["host"]
            if not hosts.services(req.api, host=host, binary=hosts.COMPUTE):
                raise errors.NotFound(f"Compute host {host} could not be found.")
            if host in members:
                raise errors.Conflict(f"Aggregate {agg.id} already has host {host}.")
            conflicts = _zone_conflicts(s, agg, [host], _zone(agg))
            if conflicts:
                raise errors.Conflict(f"Cannot add host to aggregate {agg.id}. Reason: One or more "
                                      f"hosts already in availability zone(s) {sorted(conflicts)}.")
            aggregates_db.add_host(agg, host)
        elif name == "remove_host":
            host = body["remove_host"]["host"]
            entry = next((h for h in agg.hosts if h.host == host), None)
            if entry is None:
                raise errors.NotFound(f"Cannot remove host {host} in aggregate {agg.id}")
            agg.hosts.remove(entry)
        else:
            metadata = body["set_metadata"]["metadata"]
            if "availability_zone" in metadata:
                _check_zone_name(req, metadata["availability_zone"])
                conflicts = _zone_conflicts(s, agg, members, metadata["availability_zone"])
                if conflicts:
                    raise errors.BadRequest(f"Cannot update metadata of aggregate {agg.id}. Reason: "
                                            f"One or more hosts already in availability zone(s) "
                                            f"{sorted(conflicts)}.")
            aggregates_db.set_metadata(agg, metadata)
            # A host joining or leaving changes the membership, not the
            # aggregate: its updated_at stays (as the reference's).
            agg.updated_at = utcnow()
        s.flush()
        out = view(req, agg)
        agg_uuid = agg.uuid
    if hook is not None and name in ("add_host", "remove_host"):
        hook(name, agg_uuid, body[name]["host"])
    return 200, {"aggregate": out}


ROUTES = [
    ("GET", "/os-aggregates", index),
    ("POST", "/os-aggregates", create),
    ("GET", "/os-aggregates/{aggregate_id}", show),
    ("PUT", "/os-aggregates/{aggregate_id}", update),
    ("DELETE", "/os-aggregates/{aggregate_id}", delete),
    ("POST", "/os-aggregates/{aggregate_id}/action", action),
]
