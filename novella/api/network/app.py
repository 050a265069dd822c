"""Networking API v2.0 (Neutron's wire format) over ``novella.network.api.NetworkAPI``.

    GET /                      versions
    GET /v2.0                  resources
    GET /v2.0/extensions[/{alias}]
    /v2.0/networks[/{id}]      list, create, show, update (name, description, admin_state_up,
                               mtu, shared, is_default), delete
    /v2.0/subnets[/{id}]       list, create (a cidr, or a block of a subnet pool), show,
                               update, delete
    /v2.0/ports[/{id}]         list, create, show, update, delete; binding:* fields and
                               resource_request as the service returns them
    /v2.0/ports/{id}/bindings[/{host}[/activate]]   the extended port-bindings API
    /v2.0/qos/policies[/{id}]  list, create, show, update, delete (admins change them)
    /v2.0/qos/policies/{id}/{bandwidth_limit|minimum_bandwidth|minimum_packet_rate}_rules[/{rule}]
    /v2.0/qos/alias-{bandwidth-limit|minimum-bandwidth|minimum-packet-rate}-rules/{rule}
    /v2.0/qos/rule-types[/{type}]   (docs/qos.md)
    /v2.0/security-groups[/{id}]        list, create, show, update, delete
    /v2.0/security-group-rules[/{id}]   list, create, show, delete
    /v2.0/floatingips[/{id}]            list, create, show, update (port_id), delete
    /v2.0/trunks[/{id}]                 list, create, show, update, delete;
                                        PUT .../add_subports|remove_subports, GET .../get_subports
    /v2.0/routers[/{id}]                list, create, show, update, delete;
                                        PUT .../add_router_interface|remove_router_interface
    /v2.0/subnetpools[/{id}]            list, create, show, delete
    /v2.0/auto-allocated-topology/{project_id}   show (made if missing; ?fields=dry-run
                                        checks only), delete (novella/network/auto_allocate.py)

Lists take Neutron-style filters (any field of the resource; a repeated
parameter matches any of its values) and ``fields``. Setting ``binding:*``
fields, shared networks and provider attributes need the admin role. As
Neutron does, a port created or updated with an attribute that is not one of
Neutron's port attributes is refused (400, "Unrecognized attribute(s) ..."),
and nothing is changed; the network service's own columns (its
``created_for_instance``) are neither accepted nor shown. Which ports of a
server go with it is the compute side's to know (novella/network/ownership.py).
"""
import functools

from novella.api import rest
from novella.network import qos
from novella.network.api import PORT_KEPT_ATTRIBUTES, SUBNET_ATTRIBUTES, SUBNET_UPDATABLE

# Exactly what is served: each alias has a probe in
# tests/functional/api_services/test_network_extensions.py. Not advertised, as not
# served: port-security (port_security_enabled cannot be turned off).
EXTENSIONS = [
    ("binding", "Port Binding", "Expose port bindings of a virtual port to external application"),
    ("binding-extended", "Port Bindings Extended", "Expose port bindings of a virtual port to external application"),
    ("port-resource-request", "Port Resource Request", "Expose resource request to Port"),
    ("port-resource-request-groups", "Port Resource Request Groups", "Support requesting multiple groups of resources per port"),
    ("qos", "Quality of Service", "QoS policies and their rules, on ports and networks."),
    ("qos-bw-minimum-ingress", "Ingress minimum bandwidth rule", "Minimum bandwidth rules for ingress traffic too."),
    ("qos-bw-limit-direction", "Direction for QoS bandwidth limit rule", "Bandwidth limit rules for either direction."),
    ("qos-pps-minimum", "QoS minimum packet rate rule", "Minimum packet rate rules (egress, ingress or any)."),
    ("qos-pps-minimum-rule-alias", "QoS minimum packet rate rule alias", "Minimum packet rate rules by id, without their policy."),
    ("qos-rules-alias", "QoS rules alias API", "QoS rules by id, without their policy."),
    ("qos-default", "QoS default policy", "A project's default QoS policy, given to its new networks."),
    ("qos-rule-type-details", "Details of QoS rule types", "What each rule type's parameters may be."),
    ("qos-rule-type-filter", "QoS rule type filter", "Rule types listed with all_rules or all_supported."),
    ("qos-port-network-policy", "QoS port network policy", "A port shows its network's QoS policy (qos_network_policy_id)."),
    ("provider", "Provider Network", "Expose mapping of virtual networks to physical networks"),
    ("network-mtu", "Network MTU", "Provides MTU attribute for a network resource."),
    ("external-net", "Neutron external network", "Networks marked router:external, for floating IPs."),
    ("security-group", "security-group", "The security groups extension."),
    ("router", "Neutron L3 Router", "Routers with a gateway on an external network and "
     "interfaces on subnets (recorded, no traffic routed); floating IPs."),
    ("subnet_allocation", "Subnet Allocation", "Subnets cut from subnet pools."),
    ("default-subnetpools", "Default Subnetpools", "A default subnet pool per IP version "
     "(is_default); subnets with use_default_subnetpool."),
    ("auto-allocated-topology", "Auto Allocated Topology Services",
     "A project's network, subnet and router, made on request (get-me-a-network)."),
    ("trunk", "Trunk Extension", "Ports carrying other ports as VLANs (subports)."),
    ("standard-attr-timestamp", "Resource timestamps", "Adds created_at and updated_at fields to all Neutron resources that have Neutron standard attributes."),
    ("project-id", "project_id field enabled", "Extension that indicates that project_id field is enabled."),
]
NETWORK_EXTRA = { "availability_zones": ["nova"],
                 "availability_zone_hints": [], "ipv4_address_scope": None,
                 "ipv6_address_scope": None, "port_security_enabled": True, "tags": [],
                 "description": "", "revision_number": 1}
SUBNET_EXTRA = {"subnetpool_id": None, "service_types": [],
                "segment_id": None, "tags": [], "revision_number": 1}
PORT_EXTRA = {"allowed_address_pairs": [], "extra_dhcp_opts": [], "dns_name": "",
              "dns_assignment": [], "tags": [], "description": "", "revision_number": 1,
              "propagate_uplink_status": False, "ip_allocation": "immediate"}
PAGING = {"fields", "limit", "marker", "sort_key", "sort_dir", "page_reverse"}
ADMIN_PORT_FIELDS = ("binding:host_id", "binding:profile")
HIDDEN_PORT_FIELDS = ("created_for_instance",)  # the service's own, not Neutron's


QOS_RULE_KINDS = {  # collection in the URL: rule type
    "bandwidth_limit_rules": "bandwidth_limit",
    "minimum_bandwidth_rules": "minimum_bandwidth",
    "minimum_packet_rate_rules": "minimum_packet_rate",
}


def error_body(code, title, message, kind):
    return {"NeutronError": {"type": kind, "message": message, "detail": ""}}


def _api(req):
    return req.state["network_api"]


def _admin_only(req, body, keys, what):
    for key in keys:
        if key in body and not req.is_admin():
            raise rest.HTTPError(403, f"(rule:{what}:{key}) is disallowed by policy",
                                 "PolicyNotAuthorized")


def _norm(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def _matches(have, wanted):
    """A query value (or any of several) against a field (or any item of a list field)."""
    wanted = [w.lower() if w.lower() in ("true", "false") else w
              for w in (wanted if isinstance(wanted, list) else [wanted])]
    return any(_norm(h) in wanted for h in (have if isinstance(have, list) else [have]))


def _filtered(req, items):
    """Neutron-style query filters and ``fields`` on a list of dicts."""
    filters = {k: v for k, v in req.filters().items() if k not in PAGING}
    return [_fields(req, item) for item in items
            if all(_matches(item[k], v) for k, v in filters.items() if k in item)]


def _fields(req, item):
    fields = req.GET.getall("fields")
    return {k: v for k, v in item.items() if k in fields} if fields else item


def _network(n):
    return {**NETWORK_EXTRA, **n, "updated_at": n.get("updated_at") or n.get("created_at")}


def _subnet(sn):
    return {**SUBNET_EXTRA, **sn}


def _port(req, p):
    doc = {**PORT_EXTRA, **p, "updated_at": p.get("updated_at") or p.get("created_at")}
    for key in HIDDEN_PORT_FIELDS:
        doc.pop(key, None)
    return doc


# --- discovery ---------------------------------------------------------------------
def versions(req):
    base = req.host_url + req.script_name
    return 200, {"versions": [{"id": "v2.0", "status": "CURRENT",
                               "links": [{"rel": "self", "href": f"{base}/v2.0/"}]}]}


def resources(req):
    base = req.host_url + req.script_name + "/v2.0"
    return 200, {"resources": [{"name": n[:-1], "collection": n,
                                "links": [{"rel": "self", "href": f"{base}/{n}"}]}
                               for n in ("networks", "subnets", "ports")]
                              + [{"name": n[:-1].replace("-", "_"), "collection": n,
                                  "links": [{"rel": "self", "href": f"{base}/{n}"}]}
                                 for n in ("security-groups", "security-group-rules",
                                           "floatingips", "trunks", "routers", "subnetpools")]}


def _extension(alias, name, description):
    return {"alias": alias, "name": name, "description": description,
            "updated": "2024-01-01T00:00:00-00:00", "links": []}


def list_extensions(req):
    return 200, {"extensions": [_extension(*e) for e in EXTENSIONS]}


def show_extension(req, alias):
    for e in EXTENSIONS:
        if e[0] == alias:
            return 200, {"extension": _extension(*e)}
    raise rest.not_found(f"Extension with alias {alias} does not exist", "ExtensionNotFound")


# --- networks ----------------------------------------------------------------------
def list_networks(req):
    nets = [_network(n) for n in _api(req).list_networks(req.context)]
    return 200, {"networks": _filtered(req, nets)}


def create_network(req):
    body = req.field("network")
    _admin_only(req, body, ("shared", "provider:network_type", "provider:physical_network",
                            "project_id", "tenant_id", "router:external", "is_default"),
                "create_network")
    cidr = None  # subnets come through POST /v2.0/subnets
    net = _api(req).create_network(
        req.context, body.get("name") or "", cidr=cidr, shared=bool(body.get("shared", False)),
        project_id=body.get("project_id") or body.get("tenant_id"), mtu=body.get("mtu") or 1500,
        physical_network=body.get("provider:physical_network"),
        network_type=body.get("provider:network_type"), qos_policy_id=body.get("qos_policy_id"),
        external=bool(body.get("router:external", False)),
        is_default=bool(body.get("is_default", False)),
        admin_state_up=bool(body.get("admin_state_up", True)),
        description=body.get("description") or "")
    return 201, {"network": _network(net)}


def update_network(req, network_id):
    body = _body(req, "network", {"name", "admin_state_up", "is_default", "description", "mtu",
                                  "shared"}, update=True)
    _admin_only(req, body, ("is_default", "shared"), "update_network")
    return 200, {"network": _network(_api(req).update_network(req.context, network_id, body))}


def show_network(req, network_id):
    return 200, {"network": _fields(req, _network(_api(req).get_network(req.context, network_id)))}


def delete_network(req, network_id):
    net = _api(req).get_network(req.context, network_id)
    if not req.is_admin() and net["project_id"] != req.context.project_id:
        raise rest.HTTPError(403, "(rule:delete_network) is disallowed by policy",
                             "PolicyNotAuthorized")
    _api(req).delete_network(req.context, network_id)
    return 204, None


# --- subnets -----------------------------------------------------------------------
def _visible_network_ids(req):
    return {n["id"] for n in _api(req).list_networks(req.context)}


def list_subnets(req):
    visible = _visible_network_ids(req)
    subnets = [_subnet(sn) for sn in _api(req).list_subnets(req.context)
               if sn["network_id"] in visible]
    return 200, {"subnets": _filtered(req, subnets)}


def create_subnet(req):
    body = req.field("subnet")
    pooled = body.get("subnetpool_id") or body.get("use_default_subnetpool")
    if not body.get("network_id") or not (body.get("cidr") or pooled):
        raise rest.bad_request("A subnet needs network_id and cidr (or a subnet pool).",
                               "HTTPBadRequest")
    net = _api(req).get_network(req.context, body["network_id"])
    if not req.is_admin() and net["project_id"] != req.context.project_id:
        raise rest.HTTPError(403, "(rule:create_subnet) is disallowed by policy",
                             "PolicyNotAuthorized")
    attrs = {k: body[k] for k in SUBNET_ATTRIBUTES - {"name", "enable_dhcp"} if k in body}
    try:
        sn = _api(req).create_subnet(req.context, body["network_id"], body.get("cidr"),
                                     name=body.get("name") or "",
                                     enable_dhcp=body.get("enable_dhcp", True), **attrs,
                                     subnetpool_id=body.get("subnetpool_id"),
                                     prefixlen=body.get("prefixlen"),
                                     use_default_subnetpool=bool(
                                         body.get("use_default_subnetpool")),
                                     ip_version=body.get("ip_version") or 4)
    except ValueError as exc:
        raise rest.bad_request(f"Invalid input for cidr: {exc}", "HTTPBadRequest")
    return 201, {"subnet": _subnet(sn)}


def show_subnet(req, subnet_id):
    sn = _api(req).get_subnet(req.context, subnet_id)
    if sn["network_id"] not in _visible_network_ids(req):
        raise rest.not_found(f"Subnet {subnet_id} could not be found.", "SubnetNotFound")
    return 200, {"subnet": _fields(req, _subnet(sn))}


def _own_subnet(req, subnet_id, action):
    """The subnet, if the caller may ``action`` it (its network's project, or admin)."""
    sn = _api(req).get_subnet(req.context, subnet_id)
    if sn["network_id"] not in _visible_network_ids(req):
        raise rest.not_found(f"Subnet {subnet_id} could not be found.", "SubnetNotFound")
    net = _api(req).get_network(req.context, sn["network_id"])
    if not req.is_admin() and net["project_id"] != req.context.project_id:
        raise rest.HTTPError(403, f"(rule:{action}) is disallowed by policy",
                             "PolicyNotAuthorized")
    return sn


def update_subnet(req, subnet_id):
    body = _body(req, "subnet", SUBNET_UPDATABLE, update=True)
    _own_subnet(req, subnet_id, "update_subnet")
    return 200, {"subnet": _subnet(_api(req).update_subnet(req.context, subnet_id, body))}


def delete_subnet(req, subnet_id):
    _own_subnet(req, subnet_id, "delete_subnet")
    _api(req).delete_subnet(req.context, subnet_id)
    return 204, None


# --- ports -------------------------------------------------------------------------
# Port filters the service applies in its query (the rest are matched on the views).
PORT_QUERY_FILTERS = ("id", "device_id", "network_id")


def list_ports(req):
    ports = [_port(req, p) for p in _api(req).list_ports(req.context,
                                                          req.filters(PORT_QUERY_FILTERS))]
    return 200, {"ports": _filtered(req, ports)}


CREATE_PORT_FIELDS = {"network_id", "name", "admin_state_up", "mac_address", "fixed_ips",
                      "device_id", "device_owner", "project_id", "tenant_id", "qos_policy_id",
                      "binding:host_id", "binding:profile", "binding:vnic_type", "resource_request",
                      "security_groups"} | set(PORT_KEPT_ATTRIBUTES)
# Neutron's port attributes (of its extensions too) a request may carry that are not
# kept here: accepted, and ignored.
IGNORED_PORT_FIELDS = {"tags", "port_security_enabled", "dns_domain", "numa_affinity_policy", "hardware_offload_type", "mac_learning_enabled",
                       "data_plane_status", "trusted", "device_profile"}


def _check_port_attributes(body):
    """400, as Neutron answers, for an attribute that is not a port's."""
    unknown = sorted(k for k in body if k not in CREATE_PORT_FIELDS | IGNORED_PORT_FIELDS)
    if unknown:
        raise rest.bad_request("Unrecognized attribute(s) '"
                               + ", ".join(unknown) + "'", "HTTPBadRequest")


def create_port(req):
    body = req.field("port")
    _check_port_attributes(body)
    if not body.get("network_id"):
        raise rest.bad_request("A port needs a network_id.", "HTTPBadRequest")
    _admin_only(req, body, ADMIN_PORT_FIELDS + ("resource_request", "mac_address"),
                "create_port")
    if body.get("project_id", body.get("tenant_id", req.context.project_id)) \
            != req.context.project_id:
        _admin_only(req, {"project_id": 1}, ("project_id",), "create_port")
    _api(req).get_network(req.context, body["network_id"])  # 404 unless visible
    fields = {k: v for k, v in body.items() if k in CREATE_PORT_FIELDS}
    port = _api(req).create_port(req.context, fields)
    return 201, {"port": _port(req, port)}


def show_port(req, port_id):
    return 200, {"port": _fields(req, _port(req, _api(req).get_port(req.context, port_id)))}


def update_port(req, port_id):
    body = req.field("port")
    _check_port_attributes(body)
    _api(req).get_port(req.context, port_id)  # 404 unless visible
    _admin_only(req, body, ADMIN_PORT_FIELDS + ("resource_request",), "update_port")
    port = _api(req).update_port(req.context, port_id, {
        k: v for k, v in body.items() if k not in IGNORED_PORT_FIELDS})
    return 200, {"port": _port(req, port)}


def delete_port(req, port_id):
    _api(req).get_port(req.context, port_id)
    _api(req).delete_port(req.context, port_id)
    return 204, None


# --- port bindings ------------------------------------------------------------------
def _binding_admin(req, port_id):
    if not req.is_admin():
        raise rest.HTTPError(403, "(rule:get_port_binding) is disallowed by policy",
                             "PolicyNotAuthorized")
    _api(req).get_port(req.context, port_id)


def list_bindings(req, port_id):
    _binding_admin(req, port_id)
    return 200, {"bindings": _filtered(req, _api(req).list_port_bindings(req.context, port_id))}


def create_binding(req, port_id):
    _binding_admin(req, port_id)
    body = req.field("binding")
    if not body.get("host"):
        raise rest.bad_request("A binding needs a host.", "HTTPBadRequest")
    b = _api(req).create_port_binding(req.context, port_id, body["host"],
                                      vnic_type=body.get("vnic_type"),
                                      profile=body.get("profile"))
    return 201, {"binding": b}


def show_binding(req, port_id, host):
    _binding_admin(req, port_id)
    return 200, {"binding": _api(req).get_port_binding(req.context, port_id, host)}


def activate_binding(req, port_id, host):
    _binding_admin(req, port_id)
    return 200, {"binding": _api(req).activate_port_binding(req.context, port_id, host)}


def delete_binding(req, port_id, host):
    _binding_admin(req, port_id)
    _api(req).delete_port_binding(req.context, port_id, host)
    return 204, None


def _body(req, resource, allowed, update=False):
    """The request's ``resource`` object; 400 if it has a field not in ``allowed``
    (unknown at a create, read-only at an update, as the network service says)."""
    body = req.field(resource)
    unknown = sorted(set(body) - set(allowed))
    if unknown and update:
        raise rest.bad_request(f"Cannot update read-only attribute {unknown[0]}",
                               "HTTPBadRequest")
    if unknown:
        raise rest.bad_request(f"Unrecognized attribute(s) '{', '.join(unknown)}'",
                               "HTTPBadRequest")
    for key in ("name", "description"):
        value = body.get(key)
        if value is not None and (not isinstance(value, str) or len(value) > 255):
            raise rest.bad_request(f"Invalid input for {key}. Reason: '{value}' is not a "
                                   "string of at most 255 characters.", "HTTPBadRequest")
    return body


# --- security groups -----------------------------------------------------------------
def list_security_groups(req):
    groups = _api(req).list_security_groups(req.context)
    return 200, {"security_groups": _filtered(req, groups)}


def create_security_group(req):
    body = _body(req, "security_group",
                 {"name", "description", "project_id", "tenant_id", "stateful"})
    project = body.get("project_id") or body.get("tenant_id")
    if project and project != req.context.project_id:
        _admin_only(req, {"project_id": 1}, ("project_id",), "create_security_group")
    group = _api(req).create_security_group(req.context, body.get("name") or "",
                                            body.get("description") or "", project_id=project)
    return 201, {"security_group": group}


def show_security_group(req, group_id):
    group = _api(req).get_security_group(req.context, group_id)
    return 200, {"security_group": _fields(req, group)}


def update_security_group(req, group_id):
    body = _body(req, "security_group", {"name", "description", "stateful"}, update=True)
    group = _api(req).update_security_group(req.context, group_id, body.get("name"),
                                            body.get("description"))
    return 200, {"security_group": group}


def delete_security_group(req, group_id):
    _api(req).delete_security_group(req.context, group_id)
    return 204, None


def list_security_group_rules(req):
    rules = _api(req).list_security_group_rules(req.context)
    return 200, {"security_group_rules": _filtered(req, rules)}


def create_security_group_rule(req):
    body = req.field("security_group_rule")
    rule = _api(req).create_security_group_rule(req.context, dict(body))
    return 201, {"security_group_rule": rule}


def show_security_group_rule(req, rule_id):
    rule = _api(req).get_security_group_rule(req.context, rule_id)
    return 200, {"security_group_rule": _fields(req, rule)}


def delete_security_group_rule(req, rule_id):
    _api(req).delete_security_group_rule(req.context, rule_id)
    return 204, None


# --- floating IPs -------------------------------------------------------------------
FLOATINGIP_FIELDS = {"floating_network_id", "port_id", "fixed_ip_address", "project_id",
                     "tenant_id", "description"}


def list_floatingips(req):
    return 200, {"floatingips": _filtered(req, _api(req).list_floatingips(req.context))}


def create_floatingip(req):
    body = _body(req, "floatingip", FLOATINGIP_FIELDS)
    if not body.get("floating_network_id"):
        raise rest.bad_request("Failed to parse request. Required attribute "
                               "'floating_network_id' not specified", "HTTPBadRequest")
    project = body.get("project_id") or body.get("tenant_id")
    if project and project != req.context.project_id:
        _admin_only(req, {"project_id": 1}, ("project_id",), "create_floatingip")
    fip = _api(req).create_floatingip(req.context, body["floating_network_id"],
                                      port_id=body.get("port_id"),
                                      fixed_ip_address=body.get("fixed_ip_address"),
                                      project_id=project, description=body.get("description"))
    return 201, {"floatingip": fip}


def show_floatingip(req, fip_id):
    return 200, {"floatingip": _fields(req, _api(req).get_floatingip(req.context, fip_id))}


def update_floatingip(req, fip_id):
    body = _body(req, "floatingip", {"port_id", "fixed_ip_address", "description"},
                 update=True)
    current = _api(req).get_floatingip(req.context, fip_id)
    fip = _api(req).update_floatingip(req.context, fip_id,
                                      body.get("port_id", current["port_id"]),
                                      body.get("fixed_ip_address"), body.get("description"))
    return 200, {"floatingip": fip}


def delete_floatingip(req, fip_id):
    _api(req).delete_floatingip(req.context, fip_id)
    return 204, None


# --- trunks ---------------------------------------------------------------------------
def list_trunks(req):
    return 200, {"trunks": _filtered(req, _api(req).list_trunks(req.context))}


def create_trunk(req):
    body = _body(req, "trunk", {"port_id", "sub_ports", "name", "description", "project_id",
                                "tenant_id", "admin_state_up"})
    if not body.get("port_id"):
        raise rest.bad_request("Failed to parse request. Required attribute 'port_id' not "
                               "specified", "HTTPBadRequest")
    if not isinstance(body.get("sub_ports", []), list):
        raise rest.bad_request("Invalid input for sub_ports: a list is required.",
                               "HTTPBadRequest")
    trunk = _api(req).create_trunk(req.context, body["port_id"], body.get("sub_ports") or [],
                                   name=body.get("name"), description=body.get("description"))
    return 201, {"trunk": trunk}


def show_trunk(req, trunk_id):
    return 200, {"trunk": _fields(req, _api(req).get_trunk(req.context, trunk_id))}


def update_trunk(req, trunk_id):
    body = _body(req, "trunk", {"name", "description", "admin_state_up"}, update=True)
    return 200, {"trunk": _api(req).update_trunk(req.context, trunk_id, dict(body))}


def delete_trunk(req, trunk_id):
    _api(req).delete_trunk(req.context, trunk_id)
    return 204, None


def _sub_ports(req):
    body = req.json()
    if not isinstance(body, dict) or not isinstance(body.get("sub_ports"), list):
        raise rest.bad_request("Request body must contain a 'sub_ports' list.", "HTTPBadRequest")
    return body["sub_ports"]


def add_subports(req, trunk_id):
    return 200, _api(req).add_subports(req.context, trunk_id, _sub_ports(req))


def remove_subports(req, trunk_id):
    return 200, _api(req).remove_subports(req.context, trunk_id, _sub_ports(req))


def get_subports(req, trunk_id):
    return 200, {"sub_ports": _api(req).get_trunk(req.context, trunk_id)["sub_ports"]}


# --- routers ----------------------------------------------------------------------------
ROUTER_FIELDS = {"name", "description", "admin_state_up", "external_gateway_info",
                 "project_id", "tenant_id"}


def list_routers(req):
    return 200, {"routers": _filtered(req, _api(req).list_routers(req.context))}


def create_router(req):
    body = _body(req, "router", ROUTER_FIELDS | {"availability_zone_hints"})
    project = body.get("project_id") or body.get("tenant_id")
    if project and project != req.context.project_id:
        _admin_only(req, {"project_id": 1}, ("project_id",), "create_router")
    router = _api(req).create_router(
        req.context, body.get("name") or "", project_id=project,
        admin_state_up=bool(body.get("admin_state_up", True)),
        external_gateway_info=body.get("external_gateway_info"),
        description=body.get("description") or "")
    return 201, {"router": router}


def show_router(req, router_id):
    return 200, {"router": _fields(req, _api(req).get_router(req.context, router_id))}


def update_router(req, router_id):
    body = _body(req, "router", {"name", "description", "admin_state_up",
                                 "external_gateway_info"}, update=True)
    return 200, {"router": _api(req).update_router(req.context, router_id, dict(body))}


def delete_router(req, router_id):
    _api(req).delete_router(req.context, router_id)
    return 204, None


def _interface_body(req):
    body = req.json()
    if not isinstance(body, dict) or set(body) - {"subnet_id", "port_id"}:
        raise rest.bad_request("Bad router request: the body takes subnet_id or port_id.",
                               "BadRequest")
    return body


def add_router_interface(req, router_id):
    body = _interface_body(req)
    return 200, _api(req).add_router_interface(req.context, router_id,
                                               subnet_id=body.get("subnet_id"),
                                               port_id=body.get("port_id"))


def remove_router_interface(req, router_id):
    body = _interface_body(req)
    return 200, _api(req).remove_router_interface(req.context, router_id,
                                                  subnet_id=body.get("subnet_id"),
                                                  port_id=body.get("port_id"))


# --- subnet pools ---------------------------------------------------------------------
SUBNETPOOL_FIELDS = {"name", "description", "prefixes", "default_prefixlen", "min_prefixlen",
                     "max_prefixlen", "is_default", "shared", "project_id", "tenant_id"}


def list_subnetpools(req):
    return 200, {"subnetpools": _filtered(req, _api(req).list_subnetpools(req.context))}


def create_subnetpool(req):
    body = _body(req, "subnetpool", SUBNETPOOL_FIELDS)
    _admin_only(req, {k: v for k, v in body.items() if v}, ("is_default", "shared"),
                "create_subnetpool")
    project = body.get("project_id") or body.get("tenant_id")
    if project and project != req.context.project_id:
        _admin_only(req, {"project_id": 1}, ("project_id",), "create_subnetpool")
    pool = _api(req).create_subnetpool(
        req.context, body.get("name") or "", body.get("prefixes"),
        default_prefixlen=body.get("default_prefixlen"),
        min_prefixlen=body.get("min_prefixlen"), max_prefixlen=body.get("max_prefixlen"),
        is_default=qos._bool("is_default", body.get("is_default", False)),
        shared=qos._bool("shared", body.get("shared", False)), project_id=project,
        description=body.get("description") or "")
    return 201, {"subnetpool": pool}


def show_subnetpool(req, pool_id):
    return 200, {"subnetpool": _fields(req, _api(req).get_subnetpool(req.context, pool_id))}


def delete_subnetpool(req, pool_id):
    _api(req).delete_subnetpool(req.context, pool_id)
    return 204, None


# --- auto-allocated topology ------------------------------------------------------------
def _own_project(req, project_id, rule):
    if not req.is_admin() and project_id != req.context.project_id:
        raise rest.HTTPError(403, f"(rule:{rule}) is disallowed by policy",
                             "PolicyNotAuthorized")


def show_auto_allocated_topology(req, project_id):
    _own_project(req, project_id, "get_auto_allocated_topology")
    fields = req.GET.getall("fields")
    if any(f != "dry-run" for f in fields):
        raise rest.bad_request("Unrecognized field", "BadRequest")
    topology = _api(req).get_auto_allocated_topology(req.context, project_id,
                                                     dry_run=bool(fields))
    return 200, {"auto_allocated_topology": topology}


def delete_auto_allocated_topology(req, project_id):
    _own_project(req, project_id, "delete_auto_allocated_topology")
    _api(req).delete_auto_allocated_topology(req.context, project_id)
    return 204, None


# --- QoS -------------------------------------------------------------------------
def list_qos_policies(req):
    return 200, {"policies": _filtered(req, _api(req).list_qos_policies(req.context))}


def create_qos_policy(req):
    body = _body(req, "policy", qos.POLICY_FIELDS)
    if not req.is_admin():
        raise rest.HTTPError(403, "rule:create_policy is disallowed by policy",
                             "PolicyNotAuthorized")
    shared = qos._bool("shared", body.get("shared", False))
    is_default = qos._bool("is_default", body.get("is_default", False))
    policy = _api(req).create_qos_policy(
        req.context, body.get("name") or "", description=body.get("description") or "",
        shared=shared, is_default=is_default,
        project_id=body.get("project_id") or body.get("tenant_id"))
    return 201, {"policy": policy}


def show_qos_policy(req, policy_id):
    return 200, {"policy": _fields(req, _api(req).get_qos_policy(req.context, policy_id))}


def update_qos_policy(req, policy_id):
    body = req.field("policy")
    return 200, {"policy": _api(req).update_qos_policy(req.context, policy_id, dict(body))}


def delete_qos_policy(req, policy_id):
    _api(req).delete_qos_policy(req.context, policy_id)
    return 204, None


def _rule_key(kind):
    return kind[:-1]  # minimum_bandwidth_rules -> minimum_bandwidth_rule


def _public_rule(rule):
    return {k: v for k, v in rule.items() if k != "type"}


def list_qos_rules(req, policy_id, kind):
    rules = _api(req).list_qos_rules(req.context, policy_id, QOS_RULE_KINDS[kind])
    return 200, {kind: _filtered(req, [_public_rule(r) for r in rules])}


def create_qos_rule(req, policy_id, kind):
    body = req.field(_rule_key(kind))
    rule = _api(req).create_qos_rule(req.context, policy_id, QOS_RULE_KINDS[kind], body)
    return 201, {_rule_key(kind): _public_rule(rule)}


def show_qos_rule(req, policy_id, rule_id, kind):
    rule = _api(req).get_qos_rule(req.context, policy_id, QOS_RULE_KINDS[kind], rule_id)
    return 200, {_rule_key(kind): _fields(req, _public_rule(rule))}


def update_qos_rule(req, policy_id, rule_id, kind):
    body = req.field(_rule_key(kind))
    rule = _api(req).update_qos_rule(req.context, policy_id, QOS_RULE_KINDS[kind], rule_id, body)
    return 200, {_rule_key(kind): _public_rule(rule)}


def delete_qos_rule(req, policy_id, rule_id, kind):
    _api(req).delete_qos_rule(req.context, policy_id, QOS_RULE_KINDS[kind], rule_id)
    return 204, None


def _aliased(fn):
    """The rules-alias API: a rule by its id alone, through its policy's handler."""
    def handler(req, rule_id, kind):
        policy_id = _api(req).find_qos_rule(req.context, QOS_RULE_KINDS[kind], rule_id)
        return fn(req, policy_id, rule_id, kind)
    return handler


def _rule_type_details(rule_type):
    spec = qos.RULE_TYPES[rule_type]
    params = [{"parameter_name": field, "parameter_type": "range",
               "parameter_values": {"start": 0, "end": qos.MAX_INT}} for field in spec["fields"]]
    params.append({"parameter_name": "direction", "parameter_type": "choices",
                   "parameter_values": list(spec["directions"])})
    return {"type": rule_type, "drivers": [{"name": "openvswitch",
                                            "supported_parameters": params}]}


def list_qos_rule_types(req):
    for flag in ("all_rules", "all_supported"):
        if flag in req.GET:
            qos._bool(flag, req.GET[flag])
    types = [{"type": t} for t in sorted(qos.RULE_TYPES)]
    return 200, {"rule_types": _filtered(req, types)}


def show_qos_rule_type(req, rule_type):
    if not req.is_admin():
        raise rest.HTTPError(403, "rule:get_rule_type is disallowed by policy",
                             "PolicyNotAuthorized")
    if rule_type not in qos.RULE_TYPES:
        raise rest.not_found(f"QoS rule type {rule_type} could not be found.",
                             "QosRuleTypeNotFound")
    return 200, {"rule_type": _rule_type_details(rule_type)}


def _qos_routes():
    routes = [
        ("GET", "/v2.0/qos/policies", list_qos_policies),
        ("POST", "/v2.0/qos/policies", create_qos_policy),
        ("GET", "/v2.0/qos/policies/{policy_id}", show_qos_policy),
        ("PUT", "/v2.0/qos/policies/{policy_id}", update_qos_policy),
        ("DELETE", "/v2.0/qos/policies/{policy_id}", delete_qos_policy),
        ("GET", "/v2.0/qos/rule-types", list_qos_rule_types),
        ("GET", "/v2.0/qos/rule-types/{rule_type}", show_qos_rule_type),
    ]
    for kind in QOS_RULE_KINDS:
        base = f"/v2.0/qos/policies/{{policy_id}}/{kind}"
        alias = "/v2.0/qos/alias-" + kind.replace("_", "-") + "/{rule_id}"
        routes += [
            ("GET", base, functools.partial(list_qos_rules, kind=kind)),
            ("POST", base, functools.partial(create_qos_rule, kind=kind)),
            ("GET", base + "/{rule_id}", functools.partial(show_qos_rule, kind=kind)),
            ("PUT", base + "/{rule_id}", functools.partial(update_qos_rule, kind=kind)),
            ("DELETE", base + "/{rule_id}", functools.partial(delete_qos_rule, kind=kind)),
            ("GET", alias, functools.partial(_aliased(show_qos_rule), kind=kind)),
            ("PUT", alias, functools.partial(_aliased(update_qos_rule), kind=kind)),
            ("DELETE", alias, functools.partial(_aliased(delete_qos_rule), kind=kind)),
        ]
    return routes


ROUTES = [
    ("GET", "/", versions),
    ("GET", "/v2.0", resources),
    ("GET", "/v2.0/extensions", list_extensions),
    ("GET", "/v2.0/extensions/{alias}", show_extension),
    ("GET", "/v2.0/networks", list_networks),
    ("POST", "/v2.0/networks", create_network),
    ("GET", "/v2.0/networks/{network_id}", show_network),
    ("PUT", "/v2.0/networks/{network_id}", update_network),
    ("DELETE", "/v2.0/networks/{network_id}", delete_network),
    ("GET", "/v2.0/subnets", list_subnets),
    ("POST", "/v2.0/subnets", create_subnet),
    ("GET", "/v2.0/subnets/{subnet_id}", show_subnet),
    ("PUT", "/v2.0/subnets/{subnet_id}", update_subnet),
    ("DELETE", "/v2.0/subnets/{subnet_id}", delete_subnet),
    ("GET", "/v2.0/ports", list_ports),
    ("POST", "/v2.0/ports", create_port),
    ("GET", "/v2.0/ports/{port_id}", show_port),
    ("PUT", "/v2.0/ports/{port_id}", update_port),
    ("DELETE", "/v2.0/ports/{port_id}", delete_port),
    ("GET", "/v2.0/ports/{port_id}/bindings", list_bindings),
    ("POST", "/v2.0/ports/{port_id}/bindings", create_binding),
    ("GET", "/v2.0/ports/{port_id}/bindings/{host}", show_binding),
    ("DELETE", "/v2.0/ports/{port_id}/bindings/{host}", delete_binding),
    ("PUT", "/v2.0/ports/{port_id}/bindings/{host}/activate", activate_binding),
    ("GET", "/v2.0/security-groups", list_security_groups),
    ("POST", "/v2.0/security-groups", create_security_group),
    ("GET", "/v2.0/security-groups/{group_id}", show_security_group),
    ("PUT", "/v2.0/security-groups/{group_id}", update_security_group),
    ("DELETE", "/v2.0/security-groups/{group_id}", delete_security_group),
    ("GET", "/v2.0/security-group-rules", list_security_group_rules),
    ("POST", "/v2.0/security-group-rules", create_security_group_rule),
    ("GET", "/v2.0/security-group-rules/{rule_id}", show_security_group_rule),
    ("DELETE", "/v2.0/security-group-rules/{rule_id}", delete_security_group_rule),
    ("GET", "/v2.0/floatingips", list_floatingips),
    ("POST", "/v2.0/floatingips", create_floatingip),
    ("GET", "/v2.0/floatingips/{fip_id}", show_floatingip),
    ("PUT", "/v2.0/floatingips/{fip_id}", update_floatingip),
    ("DELETE", "/v2.0/floatingips/{fip_id}", delete_floatingip),
    ("GET", "/v2.0/trunks", list_trunks),
    ("POST", "/v2.0/trunks", create_trunk),
    ("GET", "/v2.0/trunks/{trunk_id}", show_trunk),
    ("PUT", "/v2.0/trunks/{trunk_id}", update_trunk),
    ("DELETE", "/v2.0/trunks/{trunk_id}", delete_trunk),
    ("PUT", "/v2.0/trunks/{trunk_id}/add_subports", add_subports),
    ("PUT", "/v2.0/trunks/{trunk_id}/remove_subports", remove_subports),
    ("GET", "/v2.0/trunks/{trunk_id}/get_subports", get_subports),
    ("GET", "/v2.0/routers", list_routers),
    ("POST", "/v2.0/routers", create_router),
    ("GET", "/v2.0/routers/{router_id}", show_router),
    ("PUT", "/v2.0/routers/{router_id}", update_router),
    ("DELETE", "/v2.0/routers/{router_id}", delete_router),
    ("PUT", "/v2.0/routers/{router_id}/add_router_interface", add_router_interface),
    ("PUT", "/v2.0/routers/{router_id}/remove_router_interface", remove_router_interface),
    ("GET", "/v2.0/subnetpools", list_subnetpools),
    ("POST", "/v2.0/subnetpools", create_subnetpool),
    ("GET", "/v2.0/subnetpools/{pool_id}", show_subnetpool),
    ("DELETE", "/v2.0/subnetpools/{pool_id}", delete_subnetpool),
    ("GET", "/v2.0/auto-allocated-topology/{project_id}", show_auto_allocated_topology),
    ("DELETE", "/v2.0/auto-allocated-topology/{project_id}", delete_auto_allocated_topology),
] + _qos_routes()


def make_app(conf, network_api):
    return rest.make_app(conf, ROUTES, error_body, public_paths=("/", ""),
                         state={"network_api": network_api})
