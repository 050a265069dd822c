"""Security groups: the network service's groups, rules and port bindings, the
Compute API's proxies (before 2.36), a server's groups and the add/remove actions."""
import json

import pytest
import sqlalchemy as sa

from novella.context import RequestContext
from novella.db import api_models as am
from novella.network import models as nm
from novella.network.api import NetworkAPI
from tests.schemas import synced

ALICE = RequestContext(user_id="alice", project_id="project-a", roles=["member"])


@pytest.fixture
def net_cloud(cloud, tmp_path):
    cloud.network_api = NetworkAPI(synced(f"sqlite:///{tmp_path}/network.db", "network"))
    cloud.build_app()
    cloud.net = cloud.network_api.create_network(ALICE, "private", cidr="10.0.0.0/24")
    return cloud


def _rows(cloud, model):
    with cloud.network_api.db.session() as s:
        return s.scalars(sa.select(model)).all()


def _server_with_port(cloud, groups=None):
    cloud.flavor()
    uuid = cloud.instance("cell1", host="h1")
    cloud.network_api.allocate_for_instance(ALICE, uuid, "project-a",
                                            [{"network_id": cloud.net["id"]}], host="h1",
                                            security_groups=groups)
    return uuid


def test_groups_and_rules_through_the_proxy(net_cloud):
    cloud = net_cloud
    listed = cloud.user.get("/os-security-groups").json["security_groups"]
    assert [g["name"] for g in listed] == ["default"]          # made on first look
    default = listed[0]
    assert [r["group"] for r in default["rules"]] == [{"name": "default",
                                                       "tenant_id": "project-a"}] * 2
    resp = cloud.user.post("/os-security-groups", {"security_group": {
        "name": "web", "description": "web servers"}})
    assert resp.status_int == 200, resp.body
    web = resp.json["security_group"]
    assert (web["name"], web["tenant_id"], web["rules"]) == ("web", "project-a", [])
    resp = cloud.user.post("/os-security-group-rules", {"security_group_rule": {
        "parent_group_id": web["id"], "ip_protocol": "tcp", "from_port": 80, "to_port": 443,
        "cidr": "10.1.0.0/16"}})
    assert resp.status_int == 200, resp.body
    rule = resp.json["security_group_rule"]
    assert rule["ip_range"] == {"cidr": "10.1.0.0/16"} and rule["from_port"] == 80
    peer = cloud.user.post("/os-security-group-rules", {"security_group_rule": {
        "parent_group_id": web["id"], "ip_protocol": "icmp", "group_id": default["id"]}})
    assert peer.json["security_group_rule"]["group"] == {"name": "default",
                                                         "tenant_id": "project-a"}
    assert (peer.json["security_group_rule"]["from_port"],
            peer.json["security_group_rule"]["to_port"]) == (-1, -1)
    stored = {r.id: r for r in _rows(cloud, nm.SecurityGroupRule)}
    assert (stored[rule["id"]].protocol, stored[rule["id"]].port_range_min,
            stored[rule["id"]].port_range_max, stored[rule["id"]].remote_ip_prefix,
            stored[rule["id"]].direction) == ("tcp", 80, 443, "10.1.0.0/16", "ingress")
    shown = cloud.reader.get(f"/os-security-groups/{web['id']}").json["security_group"]
    assert {r["id"] for r in shown["rules"]} == {rule["id"], peer.json["security_group_rule"]["id"]}
    resp = cloud.user.put(f"/os-security-groups/{web['id']}", {"security_group": {
        "name": "web2", "description": "d2"}})
    assert resp.json["security_group"]["name"] == "web2"
    assert cloud.user.delete(f"/os-security-group-rules/{rule['id']}").status_int == 202
    assert cloud.user.delete(f"/os-security-groups/{web['id']}").status_int == 202
    assert [g.name for g in _rows(cloud, nm.SecurityGroup)] == ["default"]
    # Gone at 2.36, as in the reference.
    assert cloud.user.get("/os-security-groups", version="2.36").status_int == 404


def test_bad_input_changes_nothing(net_cloud):
    cloud = net_cloud
    default = cloud.user.get("/os-security-groups").json["security_groups"][0]
    group = cloud.user.post("/os-security-groups", {"security_group": {
        "name": "g", "description": ""}}).json["security_group"]
    base = {"parent_group_id": group["id"], "ip_protocol": "tcp", "from_port": 22,
            "to_port": 22, "cidr": "10.0.0.0/8"}
    assert cloud.user.post("/os-security-group-rules",
                           {"security_group_rule": base}).status_int == 200
    before = (len(_rows(cloud, nm.SecurityGroup)), len(_rows(cloud, nm.SecurityGroupRule)))
    for change, code in [({}, 400),                                      # a duplicate
                         ({"from_port": "abc"}, 400), ({"to_port": 65536}, 400),
                         ({"from_port": 30, "to_port": 20}, 400),
                         ({"ip_protocol": "gre"}, 400), ({"cidr": "10.0.0.0/33"}, 400),
                         ({"ip_protocol": None, "from_port": None, "to_port": None}, 400),
                         ({"parent_group_id": "11111111-2222-3333-4444-555555555555"}, 404),
                         ({"group_id": "11111111-2222-3333-4444-555555555555"}, 404),
                         ({"parent_group_id": "nope"}, 400)]:
        resp = cloud.user.post("/os-security-group-rules",
                               {"security_group_rule": {**base, **change}})
        assert resp.status_int == code, (change, resp.body)
    resp = cloud.user.delete(f"/os-security-groups/{default['id']}")
    assert resp.status_int == 400
    assert "default security group" in resp.json["badRequest"]["message"]
    assert cloud.user.post("/os-security-groups", {"security_group": {
        "name": "default", "description": ""}}).status_int == 403
    assert cloud.user.post("/os-security-groups", {"security_group": {
        "name": "x"}}).status_int == 400                                   # no description
    assert cloud.user.get("/os-security-groups/not-a-uuid").status_int == 400
    assert cloud.other.get(f"/os-security-groups/{group['id']}").status_int == 404
    assert cloud.reader.post("/os-security-groups", {"security_group": {
        "name": "r", "description": ""}}).status_int == 403
    assert (len(_rows(cloud, nm.SecurityGroup)), len(_rows(cloud, nm.SecurityGroupRule))) \
        == before


def test_server_groups_follow_its_ports(net_cloud):
    cloud = net_cloud
    web = cloud.network_api.create_security_group(ALICE, "web")
    uuid = _server_with_port(cloud, groups=["web"])
    (port,) = cloud.network_api.list_ports(ALICE, device_id=uuid)
    assert port["security_groups"] == [web["id"]]
    assert [g["name"] for g in cloud.user.get(f"/servers/{uuid}/os-security-groups")
            .json["security_groups"]] == ["web"]
    assert cloud.user.get(f"/servers/{uuid}").json["server"]["security_groups"] == \
        [{"name": "web"}]
    resp = cloud.user.post(f"/servers/{uuid}/action", {"addSecurityGroup": {"name": "default"}})
    assert resp.status_int == 202, resp.body
    default = cloud.network_api.find_security_group(ALICE, "default")
    assert sorted(cloud.network_api.get_port(ALICE, port["id"])["security_groups"]) == \
        sorted([web["id"], default["id"]])
    # In use: the group cannot be deleted.
    assert cloud.user.delete(f"/os-security-groups/{web['id']}").status_int == 400
    assert cloud.user.post(f"/servers/{uuid}/action",
                           {"addSecurityGroup": {"name": "nope"}}).status_int == 404
    assert cloud.user.post(f"/servers/{uuid}/action",
                           {"removeSecurityGroup": {"name": "web"}}).status_int == 202
    assert cloud.network_api.get_port(ALICE, port["id"])["security_groups"] == [default["id"]]
    assert cloud.user.post(f"/servers/{uuid}/action",
                           {"removeSecurityGroup": {"name": "web"}}).status_int == 404
    assert cloud.user.delete(f"/os-security-groups/{web['id']}").status_int == 202
    # A port made without groups named has the project's default group.
    other = cloud.network_api.create_port(ALICE, {"network_id": cloud.net["id"]})
    assert other["security_groups"] == [default["id"]]


def test_create_refuses_a_group_that_does_not_exist(net_cloud):
    cloud = net_cloud
    cloud.flavor()
    cloud.network_api.create_security_group(ALICE, "web")
    before = cloud.counts()
    body = {"name": "s", "flavorRef": "1", "imageRef": "155d900f-4e14-4e4c-a73d-069cbf4541e6"}
    resp = cloud.user.post("/servers", {"server": {**body, "security_groups": [{"name": "no"}]}})
    assert resp.status_int == 400
    assert "Unable to find security_group" in resp.json["badRequest"]["message"]
    assert cloud.counts() == before
    resp = cloud.user.post("/servers", {"server": {**body, "security_groups": [{"name": "web"}]}})
    assert resp.status_int == 202, resp.body
    assert resp.json["server"]["security_groups"] == [{"name": "web"}]
    with cloud.api_db.session() as s:
        spec = json.loads(s.scalars(sa.select(am.RequestSpec.spec)).one())
    assert spec["security_groups"] == ["web"]
