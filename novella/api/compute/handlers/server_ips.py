"""/servers/{id}/ips: a server's addresses by network label (from its network info cache)."""
from novella.api.compute import errors, instances, views

P = "os_compute_api:ips:"


def _addresses(req, server_id, rule):
    rec = instances.get(req, server_id)
    req.authorize(P + rule, {"project_id": rec["project_id"]})
    return views.addresses(rec, extended=False)


def index(req, server_id):
    return 200, {"addresses": _addresses(req, server_id, "index")}


def show(req, server_id, network_label):
    networks = _addresses(req, server_id, "show")
    if network_label not in networks:
        raise errors.NotFound("Instance is not a member of specified network")
    return 200, {network_label: networks[network_label]}


ROUTES = [
    ("GET", "/servers/{server_id}/ips", index),
    ("GET", "/servers/{server_id}/ips/{network_label}", show),
]
