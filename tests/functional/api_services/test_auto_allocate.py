"""Routers, subnet pools and auto-allocated topologies through the network API
(docs/services.md, "Routers, subnet pools and auto-allocated topologies").

In-process WSGI requests over the embedded network service on SQLite; every
check is on the service's rows or on what the API answers afterwards.
"""
import threading

import pytest
import sqlalchemy as sa

from novella.network import models as nm
from novella.network.api import NetworkAPI
from tests.functional.api_services import test_service_apis as service_apis
from tests.functional.api_services.test_service_apis import ADMIN, ALICE, BOB

apis = service_apis.apis  # the in-process APIs


def _ok(resp, status=200):
    assert resp.status_int == status, resp.data
    return resp.data


def _error(resp, status, kind):
    assert resp.status_int == status, resp.data
    assert resp.data["NeutronError"]["type"] == kind, resp.data
    return resp.data["NeutronError"]["message"]


def _service(apis):
    return apis["services"][1]


def _rows(network_api, project_id=None):
    """{table: count} of what a topology is made of (the project's, where it has one)."""
    with network_api.db.session() as s:
        def count(model, *where):
            return s.scalar(sa.select(sa.func.count()).select_from(model).where(*where))
        of = (lambda col: col == project_id) if project_id else (lambda col: sa.true())
        return {"networks": count(nm.Network, of(nm.Network.project_id)),
                "subnets": count(nm.Subnet, of(nm.Subnet.project_id)),
                "routers": count(nm.Router, of(nm.Router.project_id)),
                "routerports": count(nm.RouterPort),
                "topologies": count(nm.AutoAllocatedTopology),
                "ports": count(nm.Port)}


def _external(net, default=True, cidr="172.24.4.0/24"):
    network = _ok(net("POST", "/v2.0/networks", {"network": {
        "name": "public", "router:external": True, "is_default": default}}, token=ADMIN),
        201)["network"]
    _ok(net("POST", "/v2.0/subnets", {"subnet": {"network_id": network["id"], "cidr": cidr}},
            token=ADMIN), 201)
    return network


def _default_pool(net, prefix="10.128.0.0/16", prefixlen=26):
    return _ok(net("POST", "/v2.0/subnetpools", {"subnetpool": {
        "name": "default-subnetpool-v4", "prefixes": [prefix], "default_prefixlen": prefixlen,
        "is_default": True}}, token=ADMIN), 201)["subnetpool"]


@pytest.fixture
def ready(apis):
    """A default external network and a default subnet pool: auto-allocation can work."""
    net = apis["network"]
    apis["public"] = _external(net)
    apis["pool"] = _default_pool(net)
    return apis


# --- routers ---------------------------------------------------------------------------
def test_router_gateway_interfaces_and_deletion(apis):
    net = apis["network"]
    public = _external(net, default=False)
    network = _ok(net("POST", "/v2.0/networks", {"network": {"name": "n"}}), 201)["network"]
    subnet = _ok(net("POST", "/v2.0/subnets", {"subnet": {
        "network_id": network["id"], "cidr": "10.5.0.0/24"}}), 201)["subnet"]
    _error(net("POST", "/v2.0/routers", {"router": {
        "name": "r", "external_gateway_info": {"network_id": network["id"]}}}),
        400, "RouterError")
    assert _ok(net("GET", "/v2.0/routers"))["routers"] == []
    router = _ok(net("POST", "/v2.0/routers", {"router": {
        "name": "r", "external_gateway_info": {"network_id": public["id"]}}}), 201)["router"]
    gateway = router["external_gateway_info"]
    assert gateway["network_id"] == public["id"] and gateway["enable_snat"] is True
    (gw_ip,) = gateway["external_fixed_ips"]
    assert gw_ip["ip_address"].startswith("172.24.4.")

    info = _ok(net("PUT", f"/v2.0/routers/{router['id']}/add_router_interface",
                   {"subnet_id": subnet["id"]}))
    assert (info["id"], info["subnet_id"], info["network_id"]) == \
        (router["id"], subnet["id"], network["id"])
    port = _ok(net("GET", f"/v2.0/ports/{info['port_id']}"))["port"]
    assert (port["device_owner"], port["device_id"], port["fixed_ips"]) == (
        "network:router_interface", router["id"],
        [{"subnet_id": subnet["id"], "ip_address": "10.5.0.1"}])
    _error(net("PUT", f"/v2.0/routers/{router['id']}/add_router_interface",
               {"subnet_id": subnet["id"]}), 400, "RouterError")
    # In use: neither the router nor its port goes; the subnet and network stay.
    before = _rows(_service(apis))
    _error(net("DELETE", f"/v2.0/routers/{router['id']}"), 409, "RouterInUse")
    _error(net("DELETE", f"/v2.0/ports/{port['id']}"), 409, "ServicePortInUse")
    _error(net("DELETE", f"/v2.0/networks/{network['id']}"), 409, "NetworkInUse")
    assert _rows(_service(apis)) == before

    # Another project sees neither the router nor may it change it.
    _error(net("GET", f"/v2.0/routers/{router['id']}", token=BOB), 404, "RouterNotFound")
    _error(net("PUT", f"/v2.0/routers/{router['id']}/remove_router_interface",
               {"subnet_id": subnet["id"]}, token=BOB), 404, "RouterNotFound")
    assert _ok(net("GET", "/v2.0/routers", token=BOB))["routers"] == []

    # An interface by port: a free port of the project is adopted.
    other = _ok(net("POST", "/v2.0/subnets", {"subnet": {
        "network_id": network["id"], "cidr": "10.6.0.0/24"}}), 201)["subnet"]
    free = _ok(net("POST", "/v2.0/ports", {"port": {
        "network_id": network["id"], "fixed_ips": [{"subnet_id": other["id"]}]}}), 201)["port"]
    by_port = _ok(net("PUT", f"/v2.0/routers/{router['id']}/add_router_interface",
                      {"port_id": free["id"]}))
    assert by_port["subnet_ids"] == [other["id"]]
    assert _ok(net("GET", f"/v2.0/ports/{free['id']}"))["port"]["device_owner"] == \
        "network:router_interface"

    _error(net("PUT", f"/v2.0/routers/{router['id']}/remove_router_interface",
               {"subnet_id": "5a5e0d1e-1b1f-4b4e-9d8f-000000000001"}),
           404, "RouterInterfaceNotFoundForSubnet")
    _ok(net("PUT", f"/v2.0/routers/{router['id']}/remove_router_interface",
            {"subnet_id": subnet["id"]}))
    _ok(net("PUT", f"/v2.0/routers/{router['id']}/remove_router_interface",
            {"port_id": free["id"]}))
    with _service(apis).db.session() as s:
        owners = set(s.scalars(sa.select(nm.Port.device_owner)))
    assert owners == {"network:router_gateway"}
    _ok(net("DELETE", f"/v2.0/routers/{router['id']}"), 204)
    assert _rows(_service(apis))["ports"] == 0  # the gateway port went with the router
    _ok(net("DELETE", f"/v2.0/networks/{network['id']}"), 204)


def test_gateway_update_moves_the_gateway_port(apis):
    net = apis["network"]
    first, second = _external(net, default=False), _external(net, False, "172.25.0.0/24")
    router = _ok(net("POST", "/v2.0/routers", {"router": {
        "external_gateway_info": {"network_id": first["id"]}}}), 201)["router"]
    moved = _ok(net("PUT", f"/v2.0/routers/{router['id']}", {"router": {
        "external_gateway_info": {"network_id": second["id"]}}}))["router"]
    assert moved["external_gateway_info"]["network_id"] == second["id"]
    with _service(apis).db.session() as s:
        assert [p.network_id for p in s.scalars(sa.select(nm.Port))] == [second["id"]]
    cleared = _ok(net("PUT", f"/v2.0/routers/{router['id']}", {"router": {
        "external_gateway_info": {}}}))["router"]
    assert cleared["external_gateway_info"] is None
    assert _rows(_service(apis))["ports"] == 0
    _error(net("PUT", f"/v2.0/routers/{router['id']}", {"router": {
        "external_gateway_info": {"network_id": first["id"], "enable_snat": False}}}),
        403, "RouterPolicyError")


# --- subnet pools ------------------------------------------------------------------------
def test_subnet_pools(apis):
    net = apis["network"]
    _error(net("POST", "/v2.0/subnetpools", {"subnetpool": {
        "name": "p", "prefixes": ["10.0.0.0/8"], "is_default": True}}), 403,
        "PolicyNotAuthorized")
    _error(net("POST", "/v2.0/subnetpools", {"subnetpool": {
        "name": "p", "prefixes": ["10.0.0.0/8", "fd00::/48"]}}), 400, "SubnetPoolError")
    _error(net("POST", "/v2.0/subnetpools", {"subnetpool": {
        "name": "p", "prefixes": ["10.0.0.0/8"], "default_prefixlen": 4}}),
        400, "SubnetPoolError")
    assert _ok(net("GET", "/v2.0/subnetpools", token=ADMIN))["subnetpools"] == []
    pool = _default_pool(net, "10.128.0.0/24", 26)
    assert (pool["ip_version"], pool["min_prefixlen"], pool["max_prefixlen"],
            pool["prefixes"]) == (4, 8, 32, ["10.128.0.0/24"])
    _error(net("POST", "/v2.0/subnetpools", {"subnetpool": {
        "name": "again", "prefixes": ["10.9.0.0/16"], "is_default": True}}, token=ADMIN),
        400, "SubnetPoolError")
    # Every project sees the default pool; subnets are cut from it in order.
    assert [p["id"] for p in _ok(net("GET", "/v2.0/subnetpools"))["subnetpools"]] == \
        [pool["id"]]
    network = _ok(net("POST", "/v2.0/networks", {"network": {"name": "n"}}), 201)["network"]
    cidrs = [_ok(net("POST", "/v2.0/subnets", {"subnet": body}), 201)["subnet"]
             for body in ({"network_id": network["id"], "subnetpool_id": pool["id"]},
                          {"network_id": network["id"], "use_default_subnetpool": True},
                          {"network_id": network["id"], "subnetpool_id": pool["id"],
                           "prefixlen": 27})]
    assert [(sn["cidr"], sn["subnetpool_id"]) for sn in cidrs] == [
        ("10.128.0.0/26", pool["id"]), ("10.128.0.64/26", pool["id"]),
        ("10.128.0.128/27", pool["id"])]
    _error(net("POST", "/v2.0/subnets", {"subnet": {
        "network_id": network["id"], "subnetpool_id": pool["id"],
        "cidr": "10.128.0.0/28"}}), 400, "InvalidInput")
    cidrs.append(_ok(net("POST", "/v2.0/subnets", {"subnet": {
        "network_id": network["id"], "subnetpool_id": pool["id"]}}), 201)["subnet"])
    assert cidrs[-1]["cidr"] == "10.128.0.192/26"  # the /27 left room below it
    _error(net("POST", "/v2.0/subnets", {"subnet": {
        "network_id": network["id"], "subnetpool_id": pool["id"]}}), 409,
        "SubnetAllocationError")  # no /26 left
    _error(net("DELETE", f"/v2.0/subnetpools/{pool['id']}", token=ADMIN), 409,
           "SubnetPoolInUse")
    for sn in cidrs:
        _ok(net("DELETE", f"/v2.0/subnets/{sn['id']}"), 204)
    _ok(net("DELETE", f"/v2.0/subnetpools/{pool['id']}", token=ADMIN), 204)
    _error(net("GET", f"/v2.0/subnetpools/{pool['id']}", token=ADMIN), 404,
           "SubnetPoolNotFound")


def test_one_default_external_network(apis):
    net = apis["network"]
    first = _external(net)
    second = _external(net, default=False, cidr="172.25.0.0/24")
    _error(net("PUT", f"/v2.0/networks/{second['id']}", {"network": {"is_default": True}},
               token=ADMIN), 409, "DefaultExternalNetworkExists")
    _error(net("PUT", f"/v2.0/networks/{second['id']}", {"network": {"is_default": True}},
               token=ALICE), 403, "PolicyNotAuthorized")
    _ok(net("PUT", f"/v2.0/networks/{first['id']}", {"network": {"is_default": False}},
            token=ADMIN))
    assert _ok(net("PUT", f"/v2.0/networks/{second['id']}", {"network": {
        "is_default": True}}, token=ADMIN))["network"]["is_default"] is True
    private = _ok(net("POST", "/v2.0/networks", {"network": {"name": "n"}}), 201)["network"]
    _error(net("PUT", f"/v2.0/networks/{private['id']}", {"network": {"is_default": True}},
               token=ADMIN), 400, "InvalidInput")


# --- auto-allocated topologies -------------------------------------------------------
def test_requirements_missing_is_a_409_that_changes_nothing(apis):
    net = apis["network"]
    before = _rows(_service(apis))
    for query in ("?fields=dry-run", ""):
        message = _error(net("GET", f"/v2.0/auto-allocated-topology/p1{query}"), 409,
                         "AutoAllocationFailure")
        assert "No default router:external network" in message
    _external(net)
    message = _error(net("GET", "/v2.0/auto-allocated-topology/p1"), 409,
                     "AutoAllocationFailure")
    assert "No default subnetpools" in message
    after = _rows(_service(apis))
    assert (after["networks"], after["routers"], after["topologies"]) == \
        (before["networks"] + 1, 0, 0)  # only the external network made above


def test_topology_made_once_shown_again_and_deleted(ready):
    net, api = ready["network"], _service(ready)
    dry = _ok(net("GET", "/v2.0/auto-allocated-topology/p1?fields=dry-run"))
    assert dry == {"auto_allocated_topology": {"id": "dry-run=pass", "tenant_id": "p1",
                                               "project_id": "p1"}}
    assert _rows(api, "p1")["networks"] == 0
    _error(net("GET", "/v2.0/auto-allocated-topology/p1?fields=name"), 400, "BadRequest")

    topology = _ok(net("GET", "/v2.0/auto-allocated-topology/p1"))["auto_allocated_topology"]
    assert topology["project_id"] == "p1"
    assert _ok(net("GET", "/v2.0/auto-allocated-topology/p1"))[
        "auto_allocated_topology"] == topology
    assert {k: v for k, v in _rows(api, "p1").items() if k != "ports"} == {
        "networks": 1, "subnets": 1, "routers": 1, "routerports": 2, "topologies": 1}
    network = _ok(net("GET", f"/v2.0/networks/{topology['id']}"))["network"]
    assert (network["name"], network["shared"], network["admin_state_up"],
            network["project_id"]) == ("auto_allocated_network", False, True, "p1")
    (subnet,) = _ok(net("GET", f"/v2.0/subnets?network_id={network['id']}"))["subnets"]
    assert (subnet["cidr"], subnet["subnetpool_id"]) == ("10.128.0.0/26", ready["pool"]["id"])
    (router,) = _ok(net("GET", "/v2.0/routers"))["routers"]
    assert router["name"] == "auto_allocated_router"
    assert router["external_gateway_info"]["network_id"] == ready["public"]["id"]
    (iface,) = _ok(net("GET", f"/v2.0/ports?device_id={router['id']}&"
                              f"network_id={network['id']}"))["ports"]
    assert iface["device_owner"] == "network:router_interface"
    assert iface["fixed_ips"] == [{"subnet_id": subnet["id"], "ip_address": "10.128.0.1"}]

    # Project-scoped: a member gets only its own project's; an administrator any.
    _error(net("GET", "/v2.0/auto-allocated-topology/p1", token=BOB), 403,
           "PolicyNotAuthorized")
    _error(net("DELETE", "/v2.0/auto-allocated-topology/p1", token=BOB), 403,
           "PolicyNotAuthorized")
    other = _ok(net("GET", "/v2.0/auto-allocated-topology/p2", token=ADMIN))[
        "auto_allocated_topology"]
    assert other["id"] != topology["id"] and _rows(api, "p2")["routers"] == 1
    (sn2,) = _ok(net("GET", f"/v2.0/subnets?network_id={other['id']}", token=ADMIN))["subnets"]
    assert sn2["cidr"] == "10.128.0.64/26"

    # In use by a port of the project: the delete is refused and changes nothing.
    port = _ok(net("POST", "/v2.0/ports", {"port": {"network_id": network["id"]}}),
               201)["port"]
    before = _rows(api, "p1")
    _error(net("DELETE", "/v2.0/auto-allocated-topology/p1"), 409, "NetworkInUse")
    assert _rows(api, "p1") == before
    _ok(net("DELETE", f"/v2.0/ports/{port['id']}"), 204)
    _ok(net("DELETE", "/v2.0/auto-allocated-topology/p1"), 204)
    assert {k: v for k, v in _rows(api, "p1").items()
            if k in ("networks", "subnets", "routers")} == \
        {"networks": 0, "subnets": 0, "routers": 0}
    _error(net("DELETE", "/v2.0/auto-allocated-topology/p1"), 404, "TopologyNotFound")
    assert _rows(api, "p2")["routers"] == 1  # the other project's stays


def test_a_death_midway_leaves_nothing_and_the_next_request_makes_one(ready, monkeypatch):
    """The process dies after the network and its subnet are made, before the router."""
    net, api = ready["network"], _service(ready)

    class Died(BaseException):
        """Not an Exception: nothing on the way catches it, as with a killed process."""

    def die(*args, **kwargs):
        raise Died()

    with monkeypatch.context() as m:
        m.setattr(NetworkAPI, "_add_router", die)
        with pytest.raises(Died):
            api.get_auto_allocated_topology(None, "p1")
    assert _rows(api, "p1") == {"networks": 0, "subnets": 0, "routers": 0, "routerports": 0,
                                "topologies": 0, "ports": 0}
    topology = _ok(net("GET", "/v2.0/auto-allocated-topology/p1"))["auto_allocated_topology"]
    assert {k: v for k, v in _rows(api, "p1").items() if k != "ports"} == {
        "networks": 1, "subnets": 1, "routers": 1, "routerports": 2, "topologies": 1}
    (row,) = [n for n in _ok(net("GET", "/v2.0/networks"))["networks"]
              if n["project_id"] == "p1"]
    assert row["id"] == topology["id"]


def test_concurrent_requests_make_one_topology(ready):
    api = _service(ready)
    answers, errors = [], []

    def ask():
        try:
            answers.append(api.get_auto_allocated_topology(None, "p1")["id"])
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(set(answers)) == 1
    assert _rows(api, "p1")["networks"] == 1 and _rows(api, "p1")["routers"] == 1


def test_removed_by_hand_then_made_again(ready):
    """What Tempest's clean-up does: interfaces removed, router and network deleted; the
    project then gets a new topology."""
    net = ready["network"]
    first = _ok(net("GET", "/v2.0/auto-allocated-topology/p1"))["auto_allocated_topology"]
    (router,) = _ok(net("GET", "/v2.0/routers"))["routers"]
    network = _ok(net("GET", f"/v2.0/networks/{first['id']}"))["network"]
    for subnet_id in network["subnets"]:
        _ok(net("PUT", f"/v2.0/routers/{router['id']}/remove_router_interface",
                {"subnet_id": subnet_id}))
    _ok(net("DELETE", f"/v2.0/routers/{router['id']}"), 204)
    for subnet_id in network["subnets"]:
        _ok(net("DELETE", f"/v2.0/subnets/{subnet_id}"), 204)
    _ok(net("DELETE", f"/v2.0/networks/{network['id']}"), 204)
    assert _rows(_service(ready), "p1")["topologies"] == 0
    again = _ok(net("GET", "/v2.0/auto-allocated-topology/p1"))["auto_allocated_topology"]
    assert again["id"] != first["id"]
    assert _rows(_service(ready), "p1")["routers"] == 1
