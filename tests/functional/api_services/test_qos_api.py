"""The network API's QoS resources: policies, rules, rule types, and the resource
request they give ports (in-process WSGI requests, noauth2 tokens)."""
import uuid

from tests.functional.api_services.test_service_apis import ADMIN, ALICE, BOB, apis  # noqa: F401

BW_EGR, BW_IGR = "NET_BW_EGR_KILOBIT_PER_SEC", "NET_BW_IGR_KILOBIT_PER_SEC"


def _error(resp, status, kind):
    assert resp.status_int == status, resp.data
    assert set(resp.data["NeutronError"]) == {"type", "message", "detail"}
    assert resp.data["NeutronError"]["type"] == kind, resp.data


def _policy(net, token=ADMIN, **fields):
    resp = net("POST", "/v2.0/qos/policies", {"policy": {"name": "gold", **fields}}, token=token)
    assert resp.status_int == 201, resp.data
    return resp.data["policy"]


def _rule(net, policy_id, kind, token=ADMIN, **fields):
    resp = net("POST", f"/v2.0/qos/policies/{policy_id}/{kind}_rules",
               {f"{kind}_rule": fields}, token=token)
    assert resp.status_int == 201, resp.data
    return resp.data[f"{kind}_rule"]


def test_policy_crud_visibility_and_default(apis):  # noqa: F811
    net = apis["network"]
    _error(net("POST", "/v2.0/qos/policies", {"policy": {"name": "x"}}), 403, "PolicyNotAuthorized")
    _error(net("POST", "/v2.0/qos/policies", {"policy": {"name": "x", "colour": "red"}},
               token=ADMIN), 400, "HTTPBadRequest")
    private = _policy(net, project_id="p1", description="alice's")
    shared = _policy(net, name="shared", shared=True)
    assert (private["project_id"], private["shared"], private["is_default"], private["rules"]) \
        == ("p1", False, False, [])
    assert private["description"] == "alice's" and private["revision_number"] == 1

    # Alice sees her project's policy and the shared one; Bob only the shared one.
    names = lambda token: sorted(p["name"] for p in  # noqa: E731
                                 net("GET", "/v2.0/qos/policies", token=token).data["policies"])
    assert names(ALICE) == ["gold", "shared"] and names(BOB) == ["shared"]
    _error(net("GET", f"/v2.0/qos/policies/{private['id']}", token=BOB), 404, "QosPolicyNotFound")
    assert net("GET", "/v2.0/qos/policies?shared=true", token=ALICE).data["policies"][0]["id"] \
        == shared["id"]
    # Members do not change policies, not even their project's.
    _error(net("PUT", f"/v2.0/qos/policies/{private['id']}", {"policy": {"name": "n"}}),
           403, "PolicyNotAuthorized")
    updated = net("PUT", f"/v2.0/qos/policies/{private['id']}",
                  {"policy": {"name": "silver", "is_default": True}}, token=ADMIN).data["policy"]
    assert (updated["name"], updated["is_default"], updated["revision_number"]) == \
        ("silver", True, 2)

    # One default per project; a new network of the project gets it.
    _error(net("POST", "/v2.0/qos/policies",
               {"policy": {"name": "d2", "project_id": "p1", "is_default": True}}, token=ADMIN),
           409, "QoSPolicyDefaultAlreadyExists")
    network = net("POST", "/v2.0/networks", {"network": {"name": "n1"}}).data["network"]
    assert network["qos_policy_id"] == private["id"]

    # In use: not deleted; unused: gone.
    _error(net("DELETE", f"/v2.0/qos/policies/{private['id']}", token=ADMIN), 409,
           "QosPolicyInUse")
    assert net("DELETE", f"/v2.0/qos/policies/{shared['id']}", token=ADMIN).status_int == 204
    _error(net("GET", f"/v2.0/qos/policies/{shared['id']}", token=ADMIN), 404, "QosPolicyNotFound")


def test_rules_crud_alias_and_errors(apis):  # noqa: F811
    net = apis["network"]
    policy = _policy(net, shared=True)
    pid = policy["id"]
    egress = _rule(net, pid, "minimum_bandwidth", min_kbps=1000)
    assert (egress["direction"], egress["min_kbps"]) == ("egress", 1000)
    ingress = _rule(net, pid, "minimum_bandwidth", min_kbps=2000, direction="ingress")
    limit = _rule(net, pid, "bandwidth_limit", max_kbps=10000, max_burst_kbps=800)
    pps = _rule(net, pid, "minimum_packet_rate", min_kpps=100, direction="any")
    assert (limit["direction"], limit["max_burst_kbps"]) == ("egress", 800)

    shown = net("GET", f"/v2.0/qos/policies/{pid}", token=ADMIN).data["policy"]
    assert [(r["id"], r["type"]) for r in shown["rules"]] == [
        (egress["id"], "minimum_bandwidth"), (ingress["id"], "minimum_bandwidth"),
        (limit["id"], "bandwidth_limit"), (pps["id"], "minimum_packet_rate")]
    listed = net("GET", f"/v2.0/qos/policies/{pid}/minimum_bandwidth_rules").data
    assert [r["id"] for r in listed["minimum_bandwidth_rules"]] == [egress["id"], ingress["id"]]

    # Conflicts: a second rule of one type and direction; 'any' beside a direction.
    _error(net("POST", f"/v2.0/qos/policies/{pid}/minimum_bandwidth_rules",
               {"minimum_bandwidth_rule": {"min_kbps": 5}}, token=ADMIN), 409, "QoSRulesConflict")
    _error(net("POST", f"/v2.0/qos/policies/{pid}/minimum_packet_rate_rules",
               {"minimum_packet_rate_rule": {"min_kpps": 5, "direction": "egress"}},
               token=ADMIN), 409, "QoSRulesConflict")
    # Bad input changes nothing.
    for body in ({"min_kbps": "lots"}, {"min_kbps": -1}, {"min_kbps": 5, "direction": "any"},
                 {"direction": "ingress"}, {"min_kbps": 5, "burst": 1}):
        _error(net("POST", f"/v2.0/qos/policies/{pid}/minimum_bandwidth_rules",
                   {"minimum_bandwidth_rule": body}, token=ADMIN), 400, "HTTPBadRequest")
    assert len(net("GET", f"/v2.0/qos/policies/{pid}").data["policy"]["rules"]) == 4
    _error(net("POST", f"/v2.0/qos/policies/{pid}/minimum_bandwidth_rules",
               {"minimum_bandwidth_rule": {"min_kbps": 5, "direction": "ingress"}}),
           403, "PolicyNotAuthorized")
    _error(net("GET", f"/v2.0/qos/policies/{pid}/minimum_bandwidth_rules/{limit['id']}"),
           404, "QosRuleNotFound")
    _error(net("GET", f"/v2.0/qos/policies/{uuid.uuid4()}/minimum_bandwidth_rules"),
           404, "QosPolicyNotFound")

    # Update through the policy and through the alias API; delete.
    upd = net("PUT", f"/v2.0/qos/policies/{pid}/minimum_bandwidth_rules/{egress['id']}",
              {"minimum_bandwidth_rule": {"min_kbps": 1500}}, token=ADMIN)
    assert upd.status_int == 200 and upd.data["minimum_bandwidth_rule"]["min_kbps"] == 1500
    _error(net("PUT", f"/v2.0/qos/policies/{pid}/minimum_bandwidth_rules/{egress['id']}",
               {"minimum_bandwidth_rule": {"direction": "ingress"}}, token=ADMIN),
           409, "QoSRulesConflict")
    alias = net("GET", f"/v2.0/qos/alias-minimum-bandwidth-rules/{ingress['id']}").data
    assert alias["minimum_bandwidth_rule"]["min_kbps"] == 2000
    assert net("PUT", f"/v2.0/qos/alias-bandwidth-limit-rules/{limit['id']}",
               {"bandwidth_limit_rule": {"max_kbps": 20000}}, token=ADMIN
               ).data["bandwidth_limit_rule"]["max_kbps"] == 20000
    assert net("DELETE", f"/v2.0/qos/alias-minimum-packet-rate-rules/{pps['id']}",
               token=ADMIN).status_int == 204
    _error(net("GET", f"/v2.0/qos/alias-minimum-bandwidth-rules/{pps['id']}"), 404,
           "QosRuleNotFound")
    assert net("DELETE", f"/v2.0/qos/policies/{pid}/bandwidth_limit_rules/{limit['id']}",
               token=ADMIN).status_int == 204
    assert [r["type"] for r in net("GET", f"/v2.0/qos/policies/{pid}").data["policy"]["rules"]] \
        == ["minimum_bandwidth", "minimum_bandwidth"]


def test_rule_types_and_extensions(apis):  # noqa: F811
    net = apis["network"]
    types = net("GET", "/v2.0/qos/rule-types").data["rule_types"]
    assert [t["type"] for t in types] == ["bandwidth_limit", "minimum_bandwidth",
                                          "minimum_packet_rate"]
    assert net("GET", "/v2.0/qos/rule-types?all_rules=true").status_int == 200
    _error(net("GET", "/v2.0/qos/rule-types/minimum_bandwidth"), 403, "PolicyNotAuthorized")
    detail = net("GET", "/v2.0/qos/rule-types/minimum_packet_rate", token=ADMIN).data["rule_type"]
    params = {p["parameter_name"]: p for p in detail["drivers"][0]["supported_parameters"]}
    assert params["direction"]["parameter_values"] == ["egress", "ingress", "any"]
    _error(net("GET", "/v2.0/qos/rule-types/dscp_marking", token=ADMIN), 404,
           "QosRuleTypeNotFound")
    aliases = {e["alias"] for e in net("GET", "/v2.0/extensions").data["extensions"]}
    assert {"qos", "qos-bw-minimum-ingress", "qos-pps-minimum", "qos-rules-alias",
            "qos-default", "qos-rule-type-details", "port-resource-request-groups"} <= aliases
    assert "multi-provider" not in aliases  # no segments here


def test_resource_request_from_the_port_or_its_network_policy(apis):  # noqa: F811
    net = apis["network"]
    policy = _policy(net, shared=True)
    bw_e = _rule(net, policy["id"], "minimum_bandwidth", min_kbps=1000)
    bw_i = _rule(net, policy["id"], "minimum_bandwidth", min_kbps=2000, direction="ingress")
    pps = _rule(net, policy["id"], "minimum_packet_rate", min_kpps=10, direction="any")
    _rule(net, policy["id"], "bandwidth_limit", max_kbps=5000)
    phys = net("POST", "/v2.0/networks", {"network": {
        "name": "phys", "shared": True, "provider:physical_network": "physnet1",
        "provider:network_type": "vlan"}}, token=ADMIN).data["network"]
    tunnel = net("POST", "/v2.0/networks", {"network": {"name": "tun"}}).data["network"]

    port = net("POST", "/v2.0/ports", {"port": {"network_id": phys["id"],
                                                "qos_policy_id": policy["id"]}})
    assert port.status_int == 201, port.data
    port = port.data["port"]
    rr = port["resource_request"]
    ns = uuid.UUID(port["id"])
    bw_group = str(uuid.uuid5(ns, f"{bw_e['id']}:{bw_i['id']}"))
    pps_group = str(uuid.uuid5(ns, pps["id"]))
    assert rr == {"request_groups": [
        {"id": bw_group, "required": ["CUSTOM_PHYSNET_PHYSNET1", "CUSTOM_VNIC_TYPE_NORMAL"],
         "resources": {BW_EGR: 1000, BW_IGR: 2000}},
        {"id": pps_group, "required": ["CUSTOM_VNIC_TYPE_NORMAL"],
         "resources": {"NET_PACKET_RATE_KILOPACKET_PER_SEC": 10}}],
        "same_subtree": [bw_group, pps_group]}
    assert (port["qos_policy_id"], port["qos_network_policy_id"]) == (policy["id"], None)

    # A tunnelled network's port asks for the tunnel's provider; a direct port says so.
    t = net("POST", "/v2.0/ports", {"port": {"network_id": tunnel["id"],
                                             "qos_policy_id": policy["id"],
                                             "binding:vnic_type": "direct"}}).data["port"]
    assert t["resource_request"]["request_groups"][0]["required"] == \
        ["CUSTOM_NETWORK_TUNNEL_PROVIDER", "CUSTOM_VNIC_TYPE_DIRECT"]

    # The network's policy, when the port has none of its own.
    net2 = net("POST", "/v2.0/networks", {"network": {
        "name": "phys2", "qos_policy_id": policy["id"]}}).data["network"]
    inherited = net("POST", "/v2.0/ports", {"port": {"network_id": net2["id"]}}).data["port"]
    assert (inherited["qos_policy_id"], inherited["qos_network_policy_id"]) == \
        (None, policy["id"])
    assert [g["resources"] for g in inherited["resource_request"]["request_groups"]] == \
        [{BW_EGR: 1000, BW_IGR: 2000}, {"NET_PACKET_RATE_KILOPACKET_PER_SEC": 10}]

    # Dropping the policy drops the request; another project's private policy is not found.
    cleared = net("PUT", f"/v2.0/ports/{port['id']}", {"port": {"qos_policy_id": None}})
    assert cleared.status_int == 200 and cleared.data["port"]["resource_request"] is None
    hidden = _policy(net, name="hidden", project_id="p2")
    _error(net("PUT", f"/v2.0/ports/{port['id']}", {"port": {"qos_policy_id": hidden["id"]}}),
           404, "QosPolicyNotFound")
    _error(net("POST", "/v2.0/ports", {"port": {"network_id": phys["id"],
                                                "qos_policy_id": hidden["id"]}}),
           404, "QosPolicyNotFound")


def test_migration_moves_a_policys_rules_into_rows(tmp_path):
    """A network database from before 0002 kept a policy's rules as JSON on the policy."""
    import datetime

    import sqlalchemy as sa
    from alembic import command

    from novella.context import get_admin_context
    from novella.db import migrate
    from novella.network.api import NetworkAPI

    url = f"sqlite:///{tmp_path}/network.db"
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        command.upgrade(migrate._config("network", conn), "0001")
        conn.execute(sa.text("INSERT INTO qos_policies (id, name, project_id, rules, created_at) "
                             "VALUES ('pol-1', 'old', 'p1', :rules, :now)"),
                     {"now": datetime.datetime(2024, 1, 1),
                      "rules": '[{"type": "minimum_bandwidth", "min_kbps": 1000}, '
                               '{"type": "minimum_packet_rate", "min_kpps": 5, "direction": "any"}]'})
    engine.dispose()
    migrate.sync("network", url)
    policy = NetworkAPI(url).get_qos_policy(get_admin_context(), "pol-1")
    assert [(r["type"], r["direction"], r.get("min_kbps"), r.get("min_kpps"))
            for r in policy["rules"]] == [("minimum_bandwidth", "egress", 1000, None),
                                          ("minimum_packet_rate", "any", None, 5)]
    assert (policy["shared"], policy["is_default"], policy["description"]) == (False, False, "")
