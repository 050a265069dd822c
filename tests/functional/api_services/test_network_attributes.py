"""Every attribute the network API accepts on create is kept, and what Neutron
updates can be updated; bad input is 400 in Neutron's shape and changes nothing."""
from tests.functional.api_services.test_service_apis import ADMIN, ALICE, BOB, apis  # noqa: F401

SUBNET = {"name": "sn", "description": "the subnet", "cidr": "10.9.0.0/24",
          "ip_version": 4, "gateway_ip": "10.9.0.254", "enable_dhcp": False,
          "dns_nameservers": ["10.9.0.2", "8.8.8.8"],
          "host_routes": [{"destination": "10.10.0.0/16", "nexthop": "10.9.0.3"}],
          "allocation_pools": [{"start": "10.9.0.10", "end": "10.9.0.99"}]}


def _network(net, **fields):
    r = net("POST", "/v2.0/networks", {"network": dict({"name": "n1"}, **fields)})
    assert r.status_int == 201, r.data
    return r.data["network"]


def _refused(net, method, path, body, token=ALICE):
    r = net(method, path, body, token=token)
    assert r.status_int == 400, r.data
    assert set(r.data["NeutronError"]) == {"type", "message", "detail"}
    return r.data["NeutronError"]


def test_subnet_keeps_every_create_attribute_and_updates(apis):  # noqa: F811
    net = apis["network"]
    network = _network(net, description="the network")
    assert net("GET", f"/v2.0/networks/{network['id']}").data["network"]["description"] == \
        "the network"
    r = net("POST", "/v2.0/subnets", {"subnet": dict(SUBNET, network_id=network["id"])})
    assert r.status_int == 201, r.data
    sid = r.data["subnet"]["id"]
    shown = net("GET", f"/v2.0/subnets/{sid}").data["subnet"]
    for doc in (r.data["subnet"], shown):
        assert {k: doc[k] for k in SUBNET} == SUBNET

    change = {"name": "sn2", "description": "", "gateway_ip": "10.9.0.1",
              "enable_dhcp": True, "dns_nameservers": ["1.1.1.1"], "host_routes": [],
              "allocation_pools": [{"start": "10.9.0.20", "end": "10.9.0.200"}]}
    r = net("PUT", f"/v2.0/subnets/{sid}", {"subnet": change})
    assert r.status_int == 200, r.data
    shown = net("GET", f"/v2.0/subnets/{sid}").data["subnet"]
    assert {k: shown[k] for k in change} == change
    assert shown["cidr"] == "10.9.0.0/24"
    # New ports take their address from the new pools.
    port = net("POST", "/v2.0/ports", {"port": {"network_id": network["id"]}}).data["port"]
    assert port["fixed_ips"][0]["ip_address"] == "10.9.0.20"

    r = net("PUT", f"/v2.0/networks/{network['id']}", {"network": {"description": "d2"}})
    assert r.status_int == 200 and r.data["network"]["description"] == "d2"
    assert net("GET", f"/v2.0/networks/{network['id']}").data["network"]["description"] == "d2"
    r = net("PUT", f"/v2.0/networks/{network['id']}", {"network": {"mtu": 1400}})
    assert r.status_int == 200 and net("GET", f"/v2.0/networks/{network['id']}").data[
        "network"]["mtu"] == 1400
    _refused(net, "PUT", f"/v2.0/networks/{network['id']}", {"network": {"mtu": 10}})
    r = net("PUT", f"/v2.0/networks/{network['id']}", {"network": {"shared": True}})
    assert r.status_int == 403 and r.data["NeutronError"]["type"] == "PolicyNotAuthorized"
    r = net("PUT", f"/v2.0/networks/{network['id']}", {"network": {"shared": True}}, token=ADMIN)
    assert r.status_int == 200
    shown = net("GET", f"/v2.0/networks/{network['id']}", token=BOB).data["network"]
    assert (shown["shared"], shown["mtu"]) == (True, 1400)


def test_bad_subnet_input_is_400_and_changes_nothing(apis):  # noqa: F811
    net = apis["network"]
    network = _network(net)
    bad_creates = [{"dns_nameservers": ["not-an-ip"]}, {"dns_nameservers": "8.8.8.8"},
                   {"host_routes": [{"destination": "x", "nexthop": "10.9.0.1"}]},
                   {"host_routes": [{"nexthop": "10.9.0.1"}]},
                   {"gateway_ip": "192.168.0.1"},
                   {"allocation_pools": [{"start": "10.9.0.50", "end": "10.9.0.10"}]},
                   {"allocation_pools": [{"start": "10.9.1.1", "end": "10.9.1.9"}]},
                   {"ipv6_ra_mode": "slaac"}]
    for bad in bad_creates:
        body = {"subnet": dict({"network_id": network["id"], "cidr": "10.9.0.0/24"}, **bad)}
        error = _refused(net, "POST", "/v2.0/subnets", body)
        assert error["type"] == "InvalidInput", (bad, error)
    assert net("GET", "/v2.0/subnets").data["subnets"] == []

    sid = net("POST", "/v2.0/subnets", {"subnet": dict(SUBNET, network_id=network["id"])}) \
        .data["subnet"]["id"]
    port = net("POST", "/v2.0/ports", {"port": {"network_id": network["id"]}}).data["port"]
    before = net("GET", f"/v2.0/subnets/{sid}").data["subnet"]
    for bad in ({"cidr": "10.8.0.0/24"}, {"ip_version": 6}, {"network_id": network["id"]},
                {"dns_nameservers": ["1.1.1.1", "1.1.1.1"]}, {"gateway_ip": "10.1.0.1"},
                # the port's address would fall outside the pools
                {"allocation_pools": [{"start": "10.9.0.100", "end": "10.9.0.120"}]}):
        _refused(net, "PUT", f"/v2.0/subnets/{sid}", {"subnet": bad})
    assert net("GET", f"/v2.0/subnets/{sid}").data["subnet"] == before
    assert port["fixed_ips"][0]["ip_address"] == "10.9.0.10"
    # Another project's subnet: not found; not its owner: 404 too (not visible).
    r = net("PUT", f"/v2.0/subnets/{sid}", {"subnet": {"name": "x"}}, token=BOB)
    assert r.status_int == 404 and r.data["NeutronError"]["type"] == "SubnetNotFound"
    assert net("GET", f"/v2.0/subnets/{sid}").data["subnet"] == before


PORT_KEPT = {"description": "the port", "dns_name": "web-1", "propagate_uplink_status": True,
             "allowed_address_pairs": [{"ip_address": "10.9.0.200/32",
                                        "mac_address": "fa:16:3e:00:00:01"}],
             "extra_dhcp_opts": [{"opt_name": "bootfile-name", "opt_value": "pxelinux.0"}]}


def test_port_keeps_its_attributes_and_updates_them(apis):  # noqa: F811
    net = apis["network"]
    network = _network(net)
    net("POST", "/v2.0/subnets", {"subnet": dict(SUBNET, network_id=network["id"])})
    r = net("POST", "/v2.0/ports", {"port": dict(PORT_KEPT, network_id=network["id"])})
    assert r.status_int == 201, r.data
    pid = r.data["port"]["id"]
    shown = net("GET", f"/v2.0/ports/{pid}").data["port"]
    assert {k: shown[k] for k in PORT_KEPT} == PORT_KEPT
    change = {"description": "", "allowed_address_pairs": [], "dns_name": "web-2"}
    assert net("PUT", f"/v2.0/ports/{pid}", {"port": change}).status_int == 200
    shown = net("GET", f"/v2.0/ports/{pid}").data["port"]
    assert {k: shown[k] for k in change} == change
    assert shown["extra_dhcp_opts"] == PORT_KEPT["extra_dhcp_opts"]
    for bad in ({"allowed_address_pairs": [{"ip_address": "nope"}]},
                {"extra_dhcp_opts": [{"opt_value": "x"}]}, {"description": 5}):
        _refused(net, "PUT", f"/v2.0/ports/{pid}", {"port": bad})
        _refused(net, "POST", "/v2.0/ports", {"port": dict(bad, network_id=network["id"])})
    assert net("GET", f"/v2.0/ports/{pid}").data["port"] == shown
    assert [p["id"] for p in net("GET", "/v2.0/ports").data["ports"]] == [pid]


def test_router_security_group_and_floating_ip_descriptions_update(apis):  # noqa: F811
    net = apis["network"]
    ext = net("POST", "/v2.0/networks", {"network": {"name": "ext", "router:external": True}},
              token=ADMIN).data["network"]
    net("POST", "/v2.0/subnets", {"subnet": {"network_id": ext["id"], "cidr": "172.24.4.0/24"}},
        token=ADMIN)
    for collection, key, body in (
            ("routers", "router", {"name": "r", "description": "d"}),
            ("security-groups", "security_group", {"name": "g", "description": "d"}),
            ("floatingips", "floatingip", {"floating_network_id": ext["id"],
                                           "description": "d"})):
        r = net("POST", f"/v2.0/{collection}", {key: body})
        assert r.status_int == 201 and r.data[key]["description"] == "d", r.data
        path = f"/v2.0/{collection}/{r.data[key]['id']}"
        assert net("PUT", path, {key: {"description": "d2"}}).status_int == 200
        assert net("GET", path).data[key]["description"] == "d2"
        error = _refused(net, "PUT", path, {key: {"description": 7}})
        assert net("GET", path).data[key]["description"] == "d2", error
