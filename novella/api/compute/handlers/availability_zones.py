"""/os-availability-zone and /os-availability-zone/detail."""
from novella.api.compute import common, hosts

P = "os_compute_api:os-availability-zone:"


def _zones(api):
    """{zone: {host: {binary: service}}} and the set of zones with an enabled compute service."""
    zones_of_hosts = hosts.host_zones(api)
    tree, available = {}, set()
    for _cell, svc in hosts.services(api):
        zone = hosts.zone_of(api, svc, zones_of_hosts)
        tree.setdefault(zone, {}).setdefault(svc.host, {})[svc.binary] = svc
        if svc.binary == hosts.COMPUTE and not svc.disabled:
            available.add(zone)
    return tree, available


def index(req):
    req.authorize(P + "list")
    tree, available = _zones(req.api)
    internal = req.api.conf.internal_service_availability_zone
    info = [{"zoneName": z, "zoneState": {"available": z in available}, "hosts": None}
            for z in sorted(tree) if z != internal and any(hosts.COMPUTE in b for b in tree[z].values())]
    return 200, {"availabilityZoneInfo": sorted(info, key=lambda i: not i["zoneState"]["available"])}


def detail(req):
    req.authorize(P + "detail")
    tree, available = _zones(req.api)
    internal = req.api.conf.internal_service_availability_zone
    info = []
    for zone in sorted(tree):
        host_info = {}
        for host, binaries in sorted(tree[zone].items()):
            host_info[host] = {b: {"available": not s.disabled and hosts.is_up(req.api.conf, s),
                                   "active": not s.disabled,
                                   "updated_at": common.iso_usec(s.updated_at or s.created_at)}
                               for b, s in binaries.items()}
        info.append({"zoneName": zone,
                     "zoneState": {"available": zone == internal or zone in available},
                     "hosts": host_info})
    return 200, {"availabilityZoneInfo": info}


ROUTES = [
    ("GET", "/os-availability-zone", index),
    ("GET", "/os-availability-zone/detail", detail),
]
