"""Floating IPs through the Compute API: the proxies to the network service's
floating IPs (``/os-floating-ips``, ``/os-floating-ip-pools``, up to 2.35) and the
``addFloatingIp`` / ``removeFloatingIp`` actions (up to 2.43).

A pool is an external network, named by its name (or id); without one, the
only external network there is. Associating uses the server's fixed address
(the first IPv4 one unless ``fixed_address`` names another) and its port; the
server's network info cache is refreshed after each change.
"""
import ipaddress

from novella.api.compute import actions, common, errors, instances, validation as v
from novella.network import floating_ips as fips

P = "os_compute_api:os-floating-ips:"

_create_body = {"type": ["object", "null"], "properties": {"pool": {"type": ["string", "null"]}}}
_add_body = v.obj({"addFloatingIp": v.obj({
    "address": {"type": "string", "oneOf": [{"format": "ipv4"}, {"format": "ipv6"}]},
    "fixed_address": {"type": "string", "oneOf": [{"format": "ipv4"}, {"format": "ipv6"}]}},
    ["address"])}, ["addFloatingIp"])
_remove_body = v.obj({"removeFloatingIp": v.obj({
    "address": {"type": "string", "oneOf": [{"format": "ipv4"}, {"format": "ipv6"}]}},
    ["address"])}, ["removeFloatingIp"])


def _network(req, rule):
    if req.at_least("2.36"):
        raise errors.NotFound("The resource could not be found.")
    req.authorize(P + rule)
    return req.api.network_api


def _pools(req):
    return req.api.network_api.list_networks(None, external=True)


def view(req, fip, pools=None):
    pools = {p["id"]: p for p in (pools if pools is not None else _pools(req))}
    instance_id = None
    if fip["port_id"]:
        port = req.api.network_api.get_port(None, fip["port_id"])
        instance_id = port["device_id"] or None
    pool = pools.get(fip["floating_network_id"]) or {}
    return {"id": fip["id"], "ip": fip["floating_ip_address"], "fixed_ip": fip["fixed_ip_address"],
            "instance_id": instance_id,
            "pool": pool.get("name") or fip["floating_network_id"]}


def _server_of(req, fip):
    """The server whose port the floating IP is associated with, or None."""
    return (req.api.network_api.get_port(None, fip["port_id"])["device_id"] or None) \
        if fip["port_id"] else None


def _refresh(req, server_id):
    """Refresh the info cache of a server the change concerns, if it is in a cell."""
    rec = instances.load(req.api.api_db, server_id, view=False) if server_id else None
    if rec is not None and rec["cell"] is not None:
        common.refresh_network_info(req, rec)


def _get(req, net, fip_id):
    try:
        return net.get_floatingip(req.context, fip_id)
    except fips.FloatingIPNotFound:
        raise errors.NotFound(f"Floating IP not found for ID {fip_id}")


def index(req):
    net = _network(req, "list")
    pools = _pools(req)
    return 200, {"floating_ips": [view(req, f, pools) for f in
                                  net.list_floatingips(req.context,
                                                       project_id=req.context.project_id)]}


def show(req, fip_id):
    net = _network(req, "show")
    return 200, {"floating_ip": view(req, _get(req, net, fip_id))}


def create(req):
    net = _network(req, "create")
    body = req.body_json() if req.body else {}  # no body: the default pool
    v.validate(_create_body, body)
    body = body or {}
    name = body.get("pool")
    pools = _pools(req)
    found = [p for p in pools if name in (p["name"], p["id"])] if name else pools[:1]
    if not found or (not name and len(pools) > 1):
        raise errors.NotFound("Floating IP pool not found.")
    try:
        fip = net.create_floatingip(req.context, found[0]["id"])
    except Exception as exc:  # noqa: BLE001 - the network service's "no more addresses"
        if type(exc).__name__ == "IpAddressGenerationFailure":
            raise errors.NotFound(f"No more floating IPs in pool {found[0]['name']}.")
        raise
    return 200, {"floating_ip": view(req, fip, pools)}


def delete(req, fip_id):
    net = _network(req, "delete")
    fip = _get(req, net, fip_id)
    server = _server_of(req, fip)
    net.delete_floatingip(req.context, fip_id)
    _refresh(req, server)
    return 202, None


def list_pools(req):
    req.authorize("os_compute_api:os-floating-ip-pools", {})
    if req.at_least("2.36"):
        raise errors.NotFound("The resource could not be found.")
    return 200, {"floating_ip_pools": [{"name": p["name"]} for p in _pools(req)]}


# --- the actions -------------------------------------------------------------------------
def _by_address(req, address):
    found = [f for f in req.api.network_api.list_floatingips(
        req.context, floating_ip_address=address)]
    if not found:
        raise errors.NotFound("floating IP not found")
    if len(found) > 1:
        raise errors.Conflict(f"Multiple floating IPs are found for address {address}.")
    return found[0]


@actions.action("addFloatingIp", _add_body)
def add_floating_ip(req, rec, body):
    if req.at_least("2.44"):
        raise errors.BadRequest("There is no such action: addFloatingIp")
    req.authorize(P + "add", {"project_id": rec["project_id"]})
    args = body["addFloatingIp"]
    fixed = [(vif["id"], ip["address"]) for vif in rec.get("network_info") or []
             for sn in (vif.get("network") or {}).get("subnets") or []
             for ip in sn.get("ips") or []]
    if not rec.get("network_info"):
        raise errors.BadRequest("Instance network is not ready yet")
    if not fixed:
        raise errors.BadRequest("No fixed IPs associated to instance")
    if "fixed_address" in args:
        chosen = [f for f in fixed if f[1] == args["fixed_address"]]
        if not chosen:
            raise errors.BadRequest("Specified fixed address not assigned to instance")
    else:
        chosen = [f for f in fixed if ipaddress.ip_address(f[1]).version == 4]
        if not chosen:
            raise errors.BadRequest(
                f"Unable to associate floating IP {args['address']} to any fixed IPs for "
                f"instance {rec['uuid']}. Instance has no fixed IPv4 addresses to associate.")
    port_id, fixed_address = chosen[0]
    fip = _by_address(req, args["address"])
    before = _server_of(req, fip)
    try:  # associated elsewhere: it moves, as with the network service's update
        req.api.network_api.update_floatingip(req.context, fip["id"], port_id, fixed_address)
    except fips.FloatingIPError as exc:
        raise errors.BadRequest(f"Unable to associate floating IP {args['address']} to fixed "
                                f"IP {fixed_address} for instance {rec['uuid']}. Error: {exc}")
    common.refresh_network_info(req, rec)
    _refresh(req, before if before != rec["uuid"] else None)
    return 202, None


@actions.action("removeFloatingIp", _remove_body)
def remove_floating_ip(req, rec, body):
    if req.at_least("2.44"):
        raise errors.BadRequest("There is no such action: removeFloatingIp")
    address = body["removeFloatingIp"]["address"]
    req.authorize(P + "remove", {"project_id": rec["project_id"]})
    fip = _by_address(req, address)
    if _server_of(req, fip) != rec["uuid"]:
        raise errors.Conflict(f"Floating IP {address} is not associated with instance "
                              f"{rec['uuid']}.")
    req.api.network_api.update_floatingip(req.context, fip["id"], None)
    common.refresh_network_info(req, rec)
    return 202, None


ROUTES = [
    ("GET", "/os-floating-ips", index),
    ("POST", "/os-floating-ips", create),
    ("GET", "/os-floating-ips/{fip_id}", show),
    ("DELETE", "/os-floating-ips/{fip_id}", delete),
    ("GET", "/os-floating-ip-pools", list_pools),
]
