"""/os-hypervisors: the compute nodes of every cell."""
import json
import uuid as uuid_mod

from novella.api.compute import common, errors, hosts
from novella.db import cells as cells_mod, services as services_db

P = "os_compute_api:os-hypervisors:"


def _services(req):
    return {(c.uuid, s.host): s for c, s in hosts.services(req.api, binary=hosts.COMPUTE)}


def _servers(cell, node):
    rows = services_db.servers_on_node(cells_mod.cell_database(cell), node.host,
                                       node.hypervisor_hostname)
    return [{"name": n, "uuid": u} for n, u in rows]


def view(req, cell, node, svc, detail, with_servers=False, show=False):
    new = req.at_least("2.53")
    out = {"id": node.uuid if new else node.id, "hypervisor_hostname": node.hypervisor_hostname,
           "state": "up" if svc is not None and hosts.is_up(req.api.conf, svc) else "down",
           "status": "disabled" if svc is None or svc.disabled else "enabled"}
    if detail:
        out.update({"host_ip": node.host_ip, "hypervisor_type": node.hypervisor_type,
                    "hypervisor_version": node.hypervisor_version,
                    "service": {"host": node.host,
                                "id": (svc.uuid if new else svc.id) if svc is not None else None,
                                "disabled_reason": svc.disabled_reason if svc is not None else None}})
        if not req.at_least("2.88"):
            cpu_info = node.cpu_info or "{}"
            if req.at_least("2.28"):
                try:
                    cpu_info = json.loads(cpu_info)
                except ValueError:
                    cpu_info = {}
            out.update({"vcpus": node.vcpus, "memory_mb": node.memory_mb, "local_gb": node.local_gb,
                        "vcpus_used": node.vcpus_used, "memory_mb_used": node.memory_mb_used,
                        "local_gb_used": node.local_gb_used,
                        "free_ram_mb": node.memory_mb - node.memory_mb_used,
                        "free_disk_gb": node.local_gb - node.local_gb_used,
                        "current_workload": 0, "running_vms": node.running_vms,
                        "disk_available_least": node.local_gb - node.local_gb_used,
                        "cpu_info": cpu_info})
        else:  # 2.88 shows the uptime in every detailed view
            out["uptime"] = uptime_text(svc) if svc is not None and out["state"] == "up" \
                else None
    if with_servers:
        # As the reference: a host without servers has no "servers" before 2.75.
        servers = _servers(cell, node)
        if servers or req.at_least("2.75"):
            out["servers"] = servers
    return out


def _list(req, detail):
    req.authorize(P + ("list-detail" if detail else "list"))
    nodes = hosts.compute_nodes(req.api)
    with_servers = False
    limit, marker = None, None
    if req.at_least("2.53"):
        pattern = req.GET.get("hypervisor_hostname_pattern")
        with_servers = common.flag(req, "with_servers")
        if pattern:
            if "limit" in req.GET or "marker" in req.GET:
                raise errors.BadRequest("Paging over hypervisors with the "
                                        "hypervisor_hostname_pattern query parameter is not supported.")
            nodes = [(c, n) for c, n in nodes if pattern in n.hypervisor_hostname]
            if not nodes:
                raise errors.NotFound(f"No hypervisor matching '{pattern}' could be found.")
    if req.at_least("2.33"):
        limit, marker = common.limit_and_marker(req)
    nodes.sort(key=lambda cn: (cn[1].created_at, cn[1].uuid))
    if marker is not None:
        key = "uuid" if req.at_least("2.53") else "id"
        idx = next((i for i, (_c, n) in enumerate(nodes) if str(getattr(n, key)) == marker), None)
        if idx is None:
            raise errors.BadRequest(f"marker [{marker}] not found")
        nodes = nodes[idx + 1:]
    if limit is not None:
        nodes = nodes[:limit]
    services = _services(req)
    items = [view(req, c, n, services.get((c.uuid, n.host)), detail, with_servers) for c, n in nodes]
    body = {"hypervisors": items}
    if limit is not None:
        links = common.next_link(req, ["os-hypervisors"] + (["detail"] if detail else []), items, limit)
        if links:
            body["hypervisors_links"] = links
    return 200, body


def index(req):
    return _list(req, False)


def detail(req):
    return _list(req, True)


def _find(req, hypervisor_id):
    if req.at_least("2.53"):
        try:
            uuid_mod.UUID(hypervisor_id)
        except ValueError:
            raise errors.BadRequest(f"Invalid uuid {hypervisor_id}")
        found = hosts.compute_nodes(req.api, uuid=hypervisor_id)
    else:
        try:
            found = hosts.compute_nodes(req.api, id=int(hypervisor_id))
        except ValueError:
            found = []
    if not found:
        raise errors.NotFound(f"Hypervisor with ID '{hypervisor_id}' could not be found.")
    return found[0]


def show(req, hypervisor_id):
    req.authorize(P + "show")
    cell, node = _find(req, hypervisor_id)
    with_servers = req.at_least("2.53") and common.flag(req, "with_servers")
    svc = _services(req).get((cell.uuid, node.host))
    return 200, {"hypervisor": view(req, cell, node, svc, True, with_servers, show=True)}


def uptime_text(svc, now=None):
    """The host's ``uptime`` line; a simulated host is up since its service started."""
    import datetime
    now = now or datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    up = now - (svc.created_at or now)
    hours, rest = divmod(up.seconds, 3600)
    return (f" {now:%H:%M:%S} up {up.days} days, {hours:2d}:{rest // 60:02d},  1 user,  "
            "load average: 0.00, 0.00, 0.00")


def uptime(req, hypervisor_id):
    if req.at_least("2.88"):
        raise errors.NotFound("The resource could not be found.")
    req.authorize(P + "uptime")
    cell, node = _find(req, hypervisor_id)
    svc = _services(req).get((cell.uuid, node.host))
    out = view(req, cell, node, svc, False)
    if svc is None or out["state"] != "up":
        raise errors.BadRequest(f"Compute service of {node.host} is unavailable at this time.")
    out["uptime"] = uptime_text(svc)
    return 200, {"hypervisor": out}


def search(req, pattern):
    if req.at_least("2.53"):
        raise errors.NotFound("The resource could not be found.")
    req.authorize(P + "search")
    services = _services(req)
    found = [(c, n) for c, n in hosts.compute_nodes(req.api) if pattern in n.hypervisor_hostname]
    if not found:
        raise errors.NotFound(f"No hypervisor matching '{pattern}' could be found.")
    return 200, {"hypervisors": [view(req, c, n, services.get((c.uuid, n.host)), False) for c, n in found]}


def servers(req, pattern):
    if req.at_least("2.53"):
        raise errors.NotFound("The resource could not be found.")
    req.authorize(P + "servers")
    services = _services(req)
    found = [(c, n) for c, n in hosts.compute_nodes(req.api) if pattern in n.hypervisor_hostname]
    if not found:
        raise errors.NotFound(f"No hypervisor matching '{pattern}' could be found.")
    return 200, {"hypervisors": [view(req, c, n, services.get((c.uuid, n.host)), False, True)
                                 for c, n in found]}


def statistics(req):
    if req.at_least("2.88"):
        raise errors.NotFound("The resource could not be found.")
    req.authorize(P + "statistics")
    nodes = [n for _c, n in hosts.compute_nodes(req.api)]
    total = lambda f: sum(getattr(n, f) for n in nodes)  # noqa: E731
    return 200, {"hypervisor_statistics": {
        "count": len(nodes), "vcpus": total("vcpus"), "memory_mb": total("memory_mb"),
        "local_gb": total("local_gb"), "vcpus_used": total("vcpus_used"),
        "memory_mb_used": total("memory_mb_used"), "local_gb_used": total("local_gb_used"),
        "free_ram_mb": total("memory_mb") - total("memory_mb_used"),
        "free_disk_gb": total("local_gb") - total("local_gb_used"),
        "current_workload": 0, "running_vms": total("running_vms"),
        "disk_available_least": total("local_gb") - total("local_gb_used")}}


ROUTES = [
    ("GET", "/os-hypervisors", index),
    ("GET", "/os-hypervisors/detail", detail),
    ("GET", "/os-hypervisors/statistics", statistics),
    ("GET", "/os-hypervisors/{pattern}/search", search),
    ("GET", "/os-hypervisors/{pattern}/servers", servers),
    ("GET", "/os-hypervisors/{hypervisor_id}", show),
    ("GET", "/os-hypervisors/{hypervisor_id}/uptime", uptime),
]
