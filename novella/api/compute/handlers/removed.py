"""APIs the reference has removed but still routes: each answers 410 Gone,
as the reference's do, instead of a 404 that would say they never existed.

(nova-network, cells v1, the agents, certificates, cloudpipe, consoles and
fping APIs, and the server action resetNetwork.)
"""
from novella.api.compute import actions, errors

# Top-level collections (for the router's project-id-in-URL detection).
COLLECTIONS = {"os-agents", "os-cells", "os-certificates", "os-cloudpipe", "os-fixed-ips",
               "os-floating-ip-dns", "os-floating-ips-bulk", "os-fping", "os-networks",
               "os-security-group-default-rules"}


@actions.action("resetNetwork")
def _reset_network(req, rec, body):
    errors.gone(req)


_PATHS = {
    "/os-agents": ("GET", "POST"),
    "/os-agents/{id}": ("PUT", "DELETE"),
    "/os-cells": ("GET", "POST"),
    "/os-cells/capacities": ("GET",),
    "/os-cells/detail": ("GET",),
    "/os-cells/info": ("GET",),
    "/os-cells/sync_instances": ("POST",),
    "/os-cells/{id}": ("GET", "PUT", "DELETE"),
    "/os-cells/{id}/capacities": ("GET",),
    "/os-certificates": ("POST",),
    "/os-certificates/{id}": ("GET",),
    "/os-cloudpipe": ("GET", "POST"),
    "/os-cloudpipe/{id}": ("PUT",),
    "/os-fixed-ips/{id}": ("GET",),
    "/os-fixed-ips/{id}/action": ("POST",),
    "/os-floating-ip-dns": ("GET",),
    "/os-floating-ip-dns/{id}": ("PUT", "DELETE"),
    "/os-floating-ip-dns/{domain_id}/entries/{id}": ("GET", "PUT", "DELETE"),
    "/os-floating-ips-bulk": ("GET", "POST"),
    "/os-floating-ips-bulk/{id}": ("GET", "PUT"),
    "/os-fping": ("GET",),
    "/os-fping/{id}": ("GET",),
    # The network associate actions (the network proxy itself: networks.py).
    "/os-networks/{id}/action": ("POST",),
    "/os-security-group-default-rules": ("GET", "POST"),
    "/os-security-group-default-rules/{id}": ("GET", "DELETE"),
    "/servers/{server_id}/consoles": ("GET", "POST"),
    "/servers/{server_id}/consoles/{id}": ("GET", "DELETE"),
    "/servers/{server_id}/os-virtual-interfaces": ("GET",),
}

ROUTES = [(method, path, errors.gone) for path, methods in _PATHS.items() for method in methods]
