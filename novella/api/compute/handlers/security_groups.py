"""Security groups through the Compute API: the proxies to the network service's
groups (``/os-security-groups``, ``/os-security-group-rules``, up to 2.35), a
server's groups (``/servers/{id}/os-security-groups``) and the
``addSecurityGroup`` / ``removeSecurityGroup`` actions.

Shown in the reference's nova-network era shape: a group's ``rules`` are its
ingress rules, each with ``ip_protocol``, ``from_port``, ``to_port`` and either
``ip_range`` ({cidr}) or ``group`` ({name, tenant_id}) of its peer group. The
network service's refusals are the reference's: 404 for a group it does not
have, 400 for what it refuses otherwise (the default group, one in use, a rule
it has already).
"""
import ipaddress
import uuid as uuid_mod

from novella.api.compute import actions, common, errors, instances, validation as v
from novella.network import security_groups as sgs

P = "os_compute_api:os-security-groups:"

_group_body = {"type": "object", "required": ["security_group"], "properties": {
    "security_group": {"type": "object", "required": ["name", "description"], "properties": {
        "name": v.string(0, 255), "description": v.string(0, 255)}}}}
_rule_body = {"type": "object", "required": ["security_group_rule"], "properties": {
    "security_group_rule": {"type": "object", "required": ["parent_group_id"], "properties": {
        "group_id": {"type": ["string", "null"], "format": "uuid"},
        "parent_group_id": {"type": "string", "format": "uuid"}}}}}


def _action_body(name):
    return {"type": "object", "required": [name], "properties": {
        name: v.obj({"name": {"type": "string", "minLength": 1}}, ["name"])}}


def _network(req):
    if req.at_least("2.36"):
        raise errors.NotFound("The resource could not be found.")
    return req.api.network_api


def _error(exc):
    """A refusal of the network service as the reference turns it: 404 or 400."""
    return errors.NotFound(str(exc)) if exc.code == 404 else errors.BadRequest(str(exc))


def _call(fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except sgs.SecurityGroupError as exc:
        raise _error(exc)


def _valid_id(group_id):
    try:
        uuid_mod.UUID(str(group_id))
    except ValueError:
        raise errors.BadRequest("Security group id should be uuid")


# --- the reference's shapes -------------------------------------------------------------
def _rule_view(rule, peers):
    """An ingress rule; None when its peer group is gone."""
    proto = rule["protocol"]
    low, high = rule["port_range_min"], rule["port_range_max"]
    if proto and low is None and high is None:
        low, high = (1, 65535) if proto.upper() in ("TCP", "UDP") else (-1, -1)
    out = {"id": rule["id"], "parent_group_id": rule["security_group_id"],
           "ip_protocol": proto, "from_port": low, "to_port": high, "group": {},
           "ip_range": {}}
    if rule["remote_group_id"]:
        peer = peers.get(rule["remote_group_id"])
        if peer is None:
            return None
        out["group"] = {"name": peer["name"], "tenant_id": peer["project_id"]}
    else:
        out["ip_range"] = {"cidr": rule["remote_ip_prefix"] or "0.0.0.0/0"}
    return out


def _group_view(group, peers):
    rules = [_rule_view(r, peers) for r in group["security_group_rules"]
             if r["direction"] == "ingress"]
    return {"id": group["id"], "name": group["name"], "description": group["description"],
            "tenant_id": group["project_id"], "rules": [r for r in rules if r is not None]}


def _peers(req, groups):
    """{group id: group} of the groups the rules name, as far as the caller sees them."""
    peers = {g["id"]: g for g in groups}
    for g in groups:
        for r in g["security_group_rules"]:
            gid = r["remote_group_id"]
            if gid and gid not in peers:
                try:
                    peers[gid] = req.api.network_api.get_security_group(req.context, gid)
                except sgs.SecurityGroupNotFound:
                    pass
    return peers


def _views(req, groups):
    peers = _peers(req, groups)
    return sorted((_group_view(g, peers) for g in groups),
                  key=lambda g: (g["tenant_id"] or "", g["name"]))


# --- /os-security-groups ----------------------------------------------------------------
def index(req):
    net = _network(req)
    req.authorize(P + "get")
    all_tenants = "all_tenants" in req.GET and req.context.is_admin
    groups = net.list_security_groups(req.context,
                                      project_id=None if all_tenants else req.context.project_id)
    limit, _marker = common.limit_and_marker(req)
    offset = common.db_int(req.GET.get("offset", 0))
    return 200, {"security_groups": _views(req, groups)[offset:offset + limit]}


def create(req):
    net = _network(req)
    req.authorize(P + "create")
    body = req.body_json(_group_body)["security_group"]
    try:
        group = net.create_security_group(req.context, body["name"], body["description"])
    except sgs.SecurityGroupDefaultAlreadyExists as exc:  # the reference's reading of a 409
        raise errors.Forbidden(str(exc))
    return 200, {"security_group": _views(req, [group])[0]}


def show(req, group_id):
    net = _network(req)
    req.authorize(P + "show")
    _valid_id(group_id)
    group = _call(net.get_security_group, req.context, group_id)
    return 200, {"security_group": _views(req, [group])[0]}


def update(req, group_id):
    net = _network(req)
    req.authorize(P + "update")
    _valid_id(group_id)
    body = req.body_json(_group_body)["security_group"]
    _call(net.get_security_group, req.context, group_id)
    group = _call(net.update_security_group, req.context, group_id, body["name"],
                  body["description"])
    return 200, {"security_group": _views(req, [group])[0]}


def delete(req, group_id):
    net = _network(req)
    req.authorize(P + "delete")
    _valid_id(group_id)
    _call(net.delete_security_group, req.context, group_id)
    return 202, None


# --- /os-security-group-rules -------------------------------------------------------------
def _ports(protocol, low, high):
    """(from, to) as the reference checks them for TCP, UDP and ICMP."""
    try:
        low, high = int(low), int(high)
    except (TypeError, ValueError):
        if protocol.upper() == "ICMP":
            raise errors.BadRequest("Invalid input received: Type and Code must be integers "
                                    "for ICMP protocol type")
        raise errors.BadRequest("Invalid input received: To and From ports must be integers")
    kind = protocol.upper()
    if kind not in ("TCP", "UDP", "ICMP"):
        raise errors.BadRequest(f"Invalid IP protocol {protocol}.")
    if kind in ("TCP", "UDP") and low > high:
        raise errors.BadRequest(f"Invalid port range {low}:{high}. Former value cannot be "
                                "greater than the later")
    if kind in ("TCP", "UDP") and (low < 1 or high > 65535):
        raise errors.BadRequest(f"Invalid port range {low}:{high}. Valid {kind} ports should "
                                "be between 1-65535")
    if kind == "ICMP" and not (-1 <= low <= 255 and -1 <= high <= 255):
        raise errors.BadRequest(f"Invalid port range {low}:{high}. For ICMP, the type:code "
                                "must be valid")
    return low, high


def _new_rule(body):
    """The network service's rule for a reference-style body, or 400."""
    protocol, low, high = body.get("ip_protocol"), body.get("from_port"), body.get("to_port")
    group_id = body.get("group_id")
    cidr = None
    if group_id is None:
        cidr = body.get("cidr") or "0.0.0.0/0"
        try:
            net = ipaddress.ip_network(str(cidr), strict=False)
        except ValueError:
            raise errors.BadRequest(f"{cidr} is not a valid IP network.")
        if str(net.network_address) not in ("0.0.0.0", "::") and net.prefixlen == 0:
            raise errors.BadRequest(f"Bad prefix for network in cidr {cidr}")
    elif protocol and low is None and high is None:  # a peer group: every port
        low, high = (-1, -1) if str(protocol).upper() == "ICMP" else (1, 65535)
    if protocol and low is not None and high is not None:
        low, high = _ports(str(protocol), low, high)
        protocol = str(protocol).lower()
    elif cidr is not None:  # a range of addresses needs a protocol and ports
        raise errors.BadRequest("Not enough parameters to build a valid rule.")
    else:
        protocol = low = high = None
    if protocol == "icmp":  # -1: any type, any code
        low, high = (None if low == -1 else low), (None if high == -1 else high)
    ethertype = "IPv6" if cidr and ":" in cidr else "IPv4"
    return {"direction": "ingress", "ethertype": ethertype, "protocol": protocol,
            "port_range_min": low, "port_range_max": high,
            "remote_ip_prefix": cidr, "remote_group_id": group_id}


def create_rule(req):
    net = _network(req)
    req.authorize(P + "rule:create")
    body = req.body_json(_rule_body)["security_group_rule"]
    parent = _call(net.get_security_group, req.context, body["parent_group_id"])
    if body.get("group_id") is not None:
        _call(net.get_security_group, req.context, body["group_id"])
    rule = {**_new_rule(body), "security_group_id": parent["id"]}
    try:
        created = net.create_security_group_rule(req.context, rule)
    except sgs.SecurityGroupRuleExists:
        raise errors.BadRequest(f"This rule already exists in group {parent['id']}")
    except sgs.SecurityGroupError as exc:
        raise _error(exc)
    peers = _peers(req, [{**parent, "security_group_rules": [created]}])
    return 200, {"security_group_rule": _rule_view(created, peers)}


def delete_rule(req, rule_id):
    net = _network(req)
    req.authorize(P + "rule:delete")
    _valid_id(rule_id)
    try:
        net.delete_security_group_rule(req.context, rule_id)
    except sgs.SecurityGroupRuleNotFound as exc:
        raise errors.NotFound(str(exc))
    return 202, None


# --- a server's groups ------------------------------------------------------------------
def server_index(req, server_id):
    rec = instances.get(req, server_id)
    req.authorize(P + "list", {"project_id": rec["project_id"]})
    groups = req.api.network_api.get_instance_security_groups(req.context, server_id)
    return 200, {"security_groups": _views(req, groups)}


def _change(req, rec, body, name, add):
    req.authorize(P + ("add" if add else "remove"), {"project_id": rec["project_id"]})
    group = body[name]["name"]
    if not group.strip():
        raise errors.BadRequest("Security group name cannot be empty")
    net = req.api.network_api
    change = net.add_security_group_to_instance if add \
        else net.remove_security_group_from_instance
    try:
        change(req.context, rec["uuid"], rec["project_id"], group)
    except sgs.SecurityGroupNameNotUnique as exc:
        raise errors.Conflict(str(exc))
    except sgs.SecurityGroupNotFound as exc:
        raise errors.NotFound(str(exc))
    return 202, None


@actions.action("addSecurityGroup", _action_body("addSecurityGroup"))
def add_security_group(req, rec, body):
    return _change(req, rec, body, "addSecurityGroup", add=True)


@actions.action("removeSecurityGroup", _action_body("removeSecurityGroup"))
def remove_security_group(req, rec, body):
    return _change(req, rec, body, "removeSecurityGroup", add=False)


ROUTES = [
    ("GET", "/os-security-groups", index),
    ("POST", "/os-security-groups", create),
    ("GET", "/os-security-groups/{group_id}", show),
    ("PUT", "/os-security-groups/{group_id}", update),
    ("DELETE", "/os-security-groups/{group_id}", delete),
    ("POST", "/os-security-group-rules", create_rule),
    ("DELETE", "/os-security-group-rules/{rule_id}", delete_rule),
    ("GET", "/servers/{server_id}/os-security-groups", server_index),
]
