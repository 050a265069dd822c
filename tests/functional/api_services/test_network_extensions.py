"""``GET /v2.0/extensions`` advertises exactly what the network API serves.

Every advertised alias has a probe here that uses what the extension adds
(an attribute that takes the value given, a resource that answers); an alias
advertised without a probe, or a probe whose alias is not advertised, fails
the test. Also: SR-IOV vNIC types on ports (docs/qos.md).
"""
from tests.functional.api_services import test_service_apis as service_apis
from tests.functional.api_services.test_qos_api import _error, _policy, _rule
from tests.functional.api_services.test_service_apis import ADMIN

apis = service_apis.apis  # the in-process APIs


def _ok(resp, status=200):
    assert resp.status_int == status, resp.data
    return resp.data


def _world(net):
    """A physnet network with a subnet, a policy of every rule type, a bound port with it."""
    policy = _policy(net, shared=True)
    rules = {kind: _rule(net, policy["id"], kind, direction="ingress", **values)
             for kind, values in (("minimum_bandwidth", {"min_kbps": 1000}),
                                  ("minimum_packet_rate", {"min_kpps": 10}),
                                  ("bandwidth_limit", {"max_kbps": 5000}))}
    network = _ok(net("POST", "/v2.0/networks", {"network": {
        "name": "phys", "shared": True, "provider:physical_network": "physnet9",
        "provider:network_type": "vlan", "mtu": 9000}}, token=ADMIN), 201)["network"]
    subnet = _ok(net("POST", "/v2.0/subnets", {"subnet": {
        "network_id": network["id"], "cidr": "10.9.0.0/24"}}, token=ADMIN), 201)["subnet"]
    port = _ok(net("POST", "/v2.0/ports", {"port": {
        "network_id": network["id"], "qos_policy_id": policy["id"], "binding:host_id": "h1",
        "binding:vnic_type": "direct"}}, token=ADMIN), 201)["port"]
    return {"policy": policy, "rules": rules, "network": network, "subnet": subnet, "port": port}


PROBES = {
    "binding": lambda net, w: w["port"]["binding:host_id"] == "h1"
    and w["port"]["binding:vnic_type"] == "direct" and w["port"]["binding:vif_type"] == "hw_veb",
    "binding-extended": lambda net, w: [b["host"] for b in _ok(net(
        "GET", f"/v2.0/ports/{w['port']['id']}/bindings", token=ADMIN))["bindings"]] == ["h1"],
    "port-resource-request": lambda net, w: w["port"]["resource_request"] is not None,
    "port-resource-request-groups": lambda net, w: [
        g["required"] for g in w["port"]["resource_request"]["request_groups"]] == [
        ["CUSTOM_PHYSNET_PHYSNET9", "CUSTOM_VNIC_TYPE_DIRECT"], ["CUSTOM_VNIC_TYPE_DIRECT"]],
    "qos": lambda net, w: w["port"]["qos_policy_id"] == w["policy"]["id"],
    "qos-bw-minimum-ingress": lambda net, w:
        w["rules"]["minimum_bandwidth"]["direction"] == "ingress",
    "qos-bw-limit-direction": lambda net, w:
        w["rules"]["bandwidth_limit"]["direction"] == "ingress",
    "qos-pps-minimum": lambda net, w: w["rules"]["minimum_packet_rate"]["min_kpps"] == 10,
    "qos-pps-minimum-rule-alias": lambda net, w: _ok(net(
        "GET", f"/v2.0/qos/alias-minimum-packet-rate-rules/"
               f"{w['rules']['minimum_packet_rate']['id']}"))["minimum_packet_rate_rule"],
    "qos-rules-alias": lambda net, w: _ok(net(
        "GET", f"/v2.0/qos/alias-minimum-bandwidth-rules/"
               f"{w['rules']['minimum_bandwidth']['id']}"))["minimum_bandwidth_rule"],
    "qos-default": lambda net, w: _policy(net, name="d", is_default=True)["is_default"],
    "qos-rule-type-details": lambda net, w: _ok(net(
        "GET", "/v2.0/qos/rule-types/minimum_bandwidth", token=ADMIN))["rule_type"]["drivers"],
    "qos-rule-type-filter": lambda net, w: _ok(net(
        "GET", "/v2.0/qos/rule-types?all_supported=true"))["rule_types"],
    "qos-port-network-policy": lambda net, w: "qos_network_policy_id" in w["port"],
    "provider": lambda net, w: (w["network"]["provider:physical_network"],
                                w["network"]["provider:network_type"]) == ("physnet9", "vlan"),
    "network-mtu": lambda net, w: w["network"]["mtu"] == 9000,
    "external-net": lambda net, w: _ok(net("POST", "/v2.0/networks", {"network": {
        "name": "ext", "router:external": True}}, token=ADMIN), 201)["network"]["router:external"],
    "router": lambda net, w: _ok(net("POST", "/v2.0/routers", {"router": {
        "name": "r"}}), 201)["router"]["external_gateway_info"] is None,
    "subnet_allocation": lambda net, w: _pooled_subnet(net, w["network"]) == "10.77.0.0/28",
    "default-subnetpools": lambda net, w: _ok(net("GET", "/v2.0/subnetpools?is_default=true"))[
        "subnetpools"][0]["is_default"],
    "auto-allocated-topology": lambda net, w: _ok(net(
        "GET", "/v2.0/auto-allocated-topology/p1?fields=dry-run"))[
        "auto_allocated_topology"]["id"] == "dry-run=pass",
    "security-group": lambda net, w: _ok(net("GET", "/v2.0/security-groups"))[
        "security_groups"] is not None,
    "trunk": lambda net, w: _trunk_of_a_new_port(net, w["network"]),
    "standard-attr-timestamp": lambda net, w: all(
        r["created_at"] and r["updated_at"]
        for r in (w["network"], w["subnet"], w["port"], w["policy"])),
    "project-id": lambda net, w: w["network"]["project_id"] == "admin",
}


def _pooled_subnet(net, network):
    """A default pool (an external default network too: what auto-allocation needs) and a
    subnet cut from it."""
    pool = _ok(net("POST", "/v2.0/subnetpools", {"subnetpool": {
        "name": "pool", "prefixes": ["10.77.0.0/16"], "default_prefixlen": 28,
        "is_default": True}}, token=ADMIN), 201)["subnetpool"]
    _ok(net("POST", "/v2.0/networks", {"network": {
        "name": "public", "router:external": True, "is_default": True}}, token=ADMIN), 201)
    return _ok(net("POST", "/v2.0/subnets", {"subnet": {
        "network_id": network["id"], "subnetpool_id": pool["id"], "ip_version": 4}},
        token=ADMIN), 201)["subnet"]["cidr"]


def _trunk_of_a_new_port(net, network):
    port = _ok(net("POST", "/v2.0/ports", {"port": {"network_id": network["id"]}}), 201)["port"]
    trunk = _ok(net("POST", "/v2.0/trunks", {"trunk": {"port_id": port["id"]}}), 201)["trunk"]
    return _ok(net("GET", f"/v2.0/trunks/{trunk['id']}"))["trunk"]["port_id"] == port["id"]


def test_every_advertised_extension_is_served_and_only_those(apis):
    net = apis["network"]
    advertised = [e["alias"] for e in _ok(net("GET", "/v2.0/extensions"))["extensions"]]
    assert sorted(advertised) == sorted(PROBES)
    world = _world(net)
    for alias in advertised:
        assert PROBES[alias](net, world), alias
        assert _ok(net("GET", f"/v2.0/extensions/{alias}"))["extension"]["alias"] == alias
    _error(net("GET", "/v2.0/extensions/port-security"), 404, "ExtensionNotFound")


def test_vnic_types(apis):
    net = apis["network"]
    network = _ok(net("POST", "/v2.0/networks", {"network": {"name": "n"}}), 201)["network"]
    vifs, ports = {}, {}
    for vnic in ("normal", "direct", "macvtap", "direct-physical"):
        port = _ok(net("POST", "/v2.0/ports", {"port": {
            "network_id": network["id"], "binding:vnic_type": vnic}}), 201)["port"]
        bound = _ok(net("PUT", f"/v2.0/ports/{port['id']}", {"port": {
            "binding:host_id": "h1"}}, token=ADMIN))["port"]
        vifs[vnic] = (bound["binding:vnic_type"], bound["binding:vif_type"])
        ports[vnic] = bound["id"]
    assert vifs == {"normal": ("normal", "ovs"), "direct": ("direct", "hw_veb"),
                    "macvtap": ("macvtap", "hw_veb"),
                    "direct-physical": ("direct-physical", "hostdev_physical")}
    # A bound port keeps its vNIC type; an unbound one may change it.
    direct = ports["direct"]
    _error(net("PUT", f"/v2.0/ports/{direct}", {"port": {"binding:vnic_type": "normal"}}),
           409, "PortInUse")
    _ok(net("PUT", f"/v2.0/ports/{direct}", {"port": {"binding:host_id": ""}}, token=ADMIN))
    changed = _ok(net("PUT", f"/v2.0/ports/{direct}", {"port": {
        "binding:vnic_type": "macvtap"}}))["port"]
    assert changed["binding:vnic_type"] == "macvtap"
    assert changed["resource_request"] is None
    before = _ok(net("GET", "/v2.0/ports"))["ports"]
    _error(net("POST", "/v2.0/ports", {"port": {"network_id": network["id"],
                                                "binding:vnic_type": "vdpa"}}),
           400, "InvalidInput")
    assert _ok(net("GET", "/v2.0/ports"))["ports"] == before
