"""/os-networks and /os-tenant-networks: the network service's networks in the shapes
the reference kept from nova-network (up to 2.35; creating and deleting are gone, 410).

``/os-networks`` shows every nova-network field, null but the id and the label
(its name); an administrator sees the admin fields too. ``/os-tenant-networks``
shows id, label and the string ``"None"`` as cidr, as the reference does.
"""
from novella.api.compute import errors

_FIELDS = ("id", "cidr", "netmask", "gateway", "broadcast", "dns1", "dns2", "cidr_v6",
           "gateway_v6", "label", "netmask_v6")
_ADMIN_FIELDS = ("created_at", "updated_at", "deleted_at", "deleted", "injected", "bridge",
                 "vlan", "vpn_public_address", "vpn_public_port", "vpn_private_address",
                 "dhcp_start", "project_id", "host", "bridge_interface", "multi_host",
                 "priority", "rxtx_base", "mtu", "dhcp_server", "enable_dhcp", "share_address")


def _networks(req, rule):
    if req.at_least("2.36"):
        raise errors.NotFound("The resource could not be found.")
    req.authorize(rule)
    return req.api.network_api


def _find(req, api, network_id):
    try:
        return api.get_network(req.context, network_id)
    except Exception as exc:  # noqa: BLE001 - the network service's not-found error
        if getattr(exc, "code", None) == 404:
            raise errors.NotFound("Network not found")
        raise


def _nova_network(req, net):
    fields = _FIELDS + (_ADMIN_FIELDS if req.is_admin() else ())
    out = dict.fromkeys(fields)
    out.update(id=net["id"], label=net["name"])
    return out


def _tenant_network(net):
    return {"id": net["id"], "cidr": "None", "label": net["name"]}


def index(req):
    api = _networks(req, "os_compute_api:os-networks:list")
    return 200, {"networks": [_nova_network(req, n) for n in api.list_networks(req.context)]}


def show(req, network_id):
    api = _networks(req, "os_compute_api:os-networks:show")
    return 200, {"network": _nova_network(req, _find(req, api, network_id))}


def tenant_index(req):
    api = _networks(req, "os_compute_api:os-tenant-networks:list")
    return 200, {"networks": [_tenant_network(n) for n in api.list_networks(req.context)]}


def tenant_show(req, network_id):
    api = _networks(req, "os_compute_api:os-tenant-networks:show")
    return 200, {"network": _tenant_network(_find(req, api, network_id))}


ROUTES = [
    ("GET", "/os-networks", index),
    ("GET", "/os-networks/{network_id}", show),
    ("POST", "/os-networks", errors.gone),
    ("POST", "/os-networks/add", errors.gone),
    ("DELETE", "/os-networks/{network_id}", errors.gone),
    ("GET", "/os-tenant-networks", tenant_index),
    ("GET", "/os-tenant-networks/{network_id}", tenant_show),
    ("POST", "/os-tenant-networks", errors.gone),
    ("DELETE", "/os-tenant-networks/{network_id}", errors.gone),
]
