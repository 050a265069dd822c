"""/os-services: list, enable/disable/force-down, delete.

From 2.53 a service is named by its uuid and updated with
``PUT /os-services/{uuid}``; before, by host and binary through
``PUT /os-services/{enable,disable,disable-log-reason,force-down}``.
"""
from novella.api.compute import common, errors, hosts, validation as v
from novella.db import cells as cells_mod, services as services_db

P = "os_compute_api:os-services:"

_host_binary = {"host": {"type": "string", "minLength": 1, "maxLength": 255},
                "binary": {"type": "string", "minLength": 1, "maxLength": 255}}
_reason = {"type": "string", "minLength": 1, "maxLength": 255,
           "pattern": r"^[^\x00-\x1f\x7f]*$"}
LEGACY = {
    "enable": v.obj(_host_binary, ["host", "binary"]),
    "disable": v.obj(_host_binary, ["host", "binary"]),
    "disable-log-reason": v.obj({**_host_binary, "disabled_reason": _reason}, ["host", "binary"]),
    "force-down": v.obj({**_host_binary, "forced_down": v.boolean}, ["host", "binary", "forced_down"]),
}
UPDATE_253 = {"type": "object", "properties": {
    "status": {"type": "string", "enum": ["enabled", "disabled"]},
    "disabled_reason": _reason, "forced_down": v.boolean},
    "additionalProperties": False, "minProperties": 1}


def view(req, svc, zones):
    out = {"id": svc.uuid if req.at_least("2.53") else svc.id,
           "binary": svc.binary, "host": svc.host,
           "zone": hosts.zone_of(req.api, svc, zones),
           "status": "disabled" if svc.disabled else "enabled",
           "state": "up" if hosts.is_up(req.api.conf, svc) else "down",
           "updated_at": common.iso_usec(svc.updated_at),
           "disabled_reason": svc.disabled_reason}
    if req.at_least("2.11"):
        out["forced_down"] = bool(svc.forced_down)
    return out


def index(req):
    req.authorize(P + "list")
    where = {}
    if req.GET.get("host"):
        where["host"] = req.GET["host"]
    if req.GET.get("binary"):
        where["binary"] = req.GET["binary"]
    zones = hosts.host_zones(req.api)
    return 200, {"services": [view(req, svc, zones) for _c, svc in hosts.services(req.api, **where)]}


def _find(req, service_id):
    """(cell, service) by uuid (2.53+) or integer id (ambiguous across cells: 404)."""
    if req.at_least("2.53"):
        try:
            import uuid
            uuid.UUID(service_id)
        except ValueError:
            raise errors.BadRequest(f"Invalid uuid {service_id}")
        found = hosts.services(req.api, uuid=service_id)
    else:
        try:
            found = hosts.services(req.api, id=int(service_id))
        except ValueError:
            raise errors.BadRequest(f"Invalid service id {service_id}")
        if len(found) > 1:
            raise errors.BadRequest(f"Service id {service_id} refers to multiple services.")
    if not found:
        raise errors.NotFound(f"Service {service_id} could not be found.")
    return found[0]


def update(req, service_id):
    req.authorize(P + "update")
    if not req.at_least("2.53"):
        return _legacy(req, service_id)
    body = req.body_json(UPDATE_253)
    cell, svc = _find(req, service_id)
    if svc.binary != hosts.COMPUTE:
        raise errors.BadRequest(f"Updating a {svc.binary} service is not supported. "
                                "Only nova-compute services can be updated.")
    if "disabled_reason" in body and body.get("status") != "disabled":
        raise errors.BadRequest("Specifying 'disabled_reason' with status other than "
                                "'disabled' is invalid.")
    values = {}
    if "status" in body:
        values["disabled"] = body["status"] == "disabled"
        values["disabled_reason"] = body.get("disabled_reason") if values["disabled"] else None
    if "forced_down" in body:
        values["forced_down"] = v.to_bool(body["forced_down"])
        if not values["forced_down"]:
            _check_can_force_up(cell, svc)
    svc = services_db.save(cells_mod.cell_database(cell), svc.id, **values)
    if "disabled" in values:
        common.tell_host(req, cell, svc)
    return 200, {"service": view(req, svc, hosts.host_zones(req.api))}


def _check_can_force_up(cell, svc):
    """A host servers were evacuated from stays down until its compute service has
    started again and cleaned up after them (their migrations 'completed')."""
    if services_db.evacuations_to_clean(cells_mod.cell_database(cell), svc.host):
        raise errors.BadRequest(
            f"Unable to force up host {svc.host} as `done` evacuation migration records "
            "remain associated with the host. Ensure the compute service has been "
            "restarted, allowing these records to move to `completed` before retrying "
            "this request.")


def _legacy(req, action):
    schema = LEGACY.get(action)
    if schema is None or (action == "force-down" and not req.at_least("2.11")):
        raise errors.NotFound("Unknown action")
    body = req.body_json(schema)
    found = hosts.services(req.api, host=body["host"], binary=body["binary"])
    if not found:
        raise errors.NotFound("Host %s could not be found." % body["host"] if not
                              hosts.services(req.api, host=body["host"])
                              else f"Service {body['binary']} on host {body['host']} could not be found.")
    cell, svc = found[0]
    out = {"host": svc.host, "binary": svc.binary}
    if action == "force-down":
        forced = v.to_bool(body["forced_down"])
        if not forced:
            _check_can_force_up(cell, svc)
        services_db.save(cells_mod.cell_database(cell), svc.id, forced_down=forced)
        out["forced_down"] = forced
    else:
        disabled = action != "enable"
        reason = body.get("disabled_reason") if action == "disable-log-reason" else None
        svc = services_db.save(cells_mod.cell_database(cell), svc.id, disabled=disabled,
                               disabled_reason=reason)
        common.tell_host(req, cell, svc)
        out["status"] = "disabled" if disabled else "enabled"
        if reason:
            out["disabled_reason"] = reason
    return 200, {"service": out}


def delete(req, service_id):
    req.authorize(P + "delete")
    cell, svc = _find(req, service_id)
    cell_db = cells_mod.cell_database(cell)
    if svc.binary == hosts.COMPUTE:
        busy, moving = services_db.host_in_use(cell_db, svc.host)
        if busy:
            raise errors.Conflict("Unable to delete compute service that is hosting instances. "
                                  "Migrate or delete the instances first.")
        if moving:
            raise errors.Conflict("Unable to delete compute service that has in-progress "
                                  "migrations. Complete the migrations or delete the instances first.")
    sync = req.api.placement_sync
    node_uuids = sync.node_uuids(svc.host) if sync and svc.binary == hosts.COMPUTE else []
    services_db.delete(cell_db, svc.id, svc.host if svc.binary == hosts.COMPUTE else None)
    if svc.binary == hosts.COMPUTE:
        aggs = services_db.forget_host(req.api.api_db, svc.host)
        if req.api.aggregate_hook is not None and req.api.aggregate_hook is not sync:
            for agg_uuid in aggs:
                req.api.aggregate_hook("remove_host", agg_uuid, svc.host)
        if sync is not None:
            sync.delete_providers(node_uuids)
    return 204, None


ROUTES = [
    ("GET", "/os-services", index),
    ("PUT", "/os-services/{service_id}", update),
    ("DELETE", "/os-services/{service_id}", delete),
]
