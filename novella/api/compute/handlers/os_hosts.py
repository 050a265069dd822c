"""/os-hosts (up to 2.42; deprecated for /os-services and /os-hypervisors).

A host's ``status`` enable/disable is its compute service's (as ``PUT
/os-services`` sets it); ``maintenance_mode`` and the power actions (reboot,
shutdown, startup) are not supported by the simulated driver: 501 on a host
that exists, as the reference's libvirt driver answers.
"""
from novella.api.compute import common, errors, hosts
from novella.db import cells as cells_mod, services as services_db

P = "os_compute_api:os-hosts:"
_API_SERVICES = ("nova-osapi_compute", "nova-metadata")
_on_off = {"type": "string", "enum": ["enable", "disable", "Enable", "Disable",
                                      "ENABLE", "DISABLE"]}
_update_body = {"type": "object", "properties": {"status": _on_off, "maintenance_mode": _on_off},
                "anyOf": [{"required": ["status"]}, {"required": ["maintenance_mode"]}],
                "additionalProperties": False}


def _authorize(req, rule):
    if req.at_least("2.43"):
        raise errors.NotFound("The resource could not be found.")
    req.authorize(P + rule, {})


def _compute(req, host):
    """(cell, compute service) of a host, or 404 as the reference words it."""
    found = hosts.services(req.api, host=host, binary=hosts.COMPUTE)
    if not found:
        raise errors.NotFound(f"Compute host {host} could not be found.")
    return found[0]


def index(req):
    _authorize(req, "list")
    zone = req.GET.get("zone")
    zones = hosts.host_zones(req.api)
    out = []
    for _cell, svc in hosts.services(req.api, disabled=False):
        svc_zone = hosts.zone_of(req.api, svc, zones)
        if svc.binary in _API_SERVICES or (zone and svc_zone != zone):
            continue
        out.append({"host_name": svc.host, "service": svc.topic or svc.binary.split("-")[-1],
                    "zone": svc_zone})
    return 200, {"hosts": out}


def _resource(host, project, cpu, memory_mb, disk_gb):
    return {"resource": {"host": host, "project": project, "cpu": cpu,
                         "memory_mb": memory_mb, "disk_gb": disk_gb}}


def show(req, host_name):
    _authorize(req, "show")
    cell, _svc = _compute(req, host_name)
    node, servers = services_db.host_usage(cells_mod.cell_database(cell), host_name)
    if node is None:
        raise errors.NotFound(f"Compute host {host_name} could not be found.")
    used = {}
    for project, vcpus, ram, root, eph in servers:
        cpu0, ram0, disk0 = used.get(project, (0, 0, 0))
        used[project] = (cpu0 + (vcpus or 0), ram0 + (ram or 0), disk0 + (root or 0) + (eph or 0))
    resources = [
        _resource(host_name, "(total)", node.vcpus, node.memory_mb, node.local_gb),
        _resource(host_name, "(used_now)", node.vcpus_used, node.memory_mb_used,
                  node.local_gb_used),
        _resource(host_name, "(used_max)", *[sum(u[i] for u in used.values()) for i in range(3)])]
    resources += [_resource(host_name, project, *totals) for project, totals in used.items()]
    return 200, {"host": resources}


def update(req, host_name):
    _authorize(req, "update")
    body = req.body_json(_update_body)
    cell, svc = _compute(req, host_name)
    if "maintenance_mode" in body:
        raise errors.APIError("The requested functionality is not supported.", 501)
    disabled = body["status"].lower() == "disable"
    svc = services_db.save(cells_mod.cell_database(cell), svc.id, disabled=disabled,
                           disabled_reason=svc.disabled_reason if disabled else None)
    common.tell_host(req, cell, svc)
    return 200, {"host": host_name, "status": "disabled" if disabled else "enabled"}


def _power(rule):
    def action(req, host_name):
        _authorize(req, rule)
        _compute(req, host_name)
        raise errors.APIError("The requested functionality is not supported.", 501)
    return action


ROUTES = [
    ("GET", "/os-hosts", index),
    ("GET", "/os-hosts/{host_name}", show),
    ("PUT", "/os-hosts/{host_name}", update),
    ("GET", "/os-hosts/{host_name}/reboot", _power("reboot")),
    ("GET", "/os-hosts/{host_name}/shutdown", _power("shutdown")),
    ("GET", "/os-hosts/{host_name}/startup", _power("start")),
]
