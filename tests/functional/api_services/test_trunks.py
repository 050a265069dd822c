"""Trunks in the network service: subports bound where their parent is, through a
server's build, a move's activation and an unbind; the refusals change nothing."""
import json

import pytest
import webob
from oslo_config import cfg

from novella.api.network.app import make_app
from novella.conf import api as api_conf
from novella.context import RequestContext
from novella.network.api import NetworkAPI
from tests.schemas import synced

ALICE = RequestContext(user_id="alice", project_id="p1", roles=["member"])


@pytest.fixture
def net(tmp_path):
    return NetworkAPI(synced(f"sqlite:///{tmp_path}/network.db", "network"))


def _port(net, port_id):
    p = net.get_port(None, port_id)
    return p["binding:host_id"], p["status"], p["device_owner"]


def test_subports_follow_their_parent(net):
    private = net.create_network(ALICE, "private", cidr="10.0.0.0/24")
    vlans = net.create_network(ALICE, "vlans", cidr="19.80.0.0/24")
    parent = net.create_port(ALICE, {"network_id": private["id"]})
    sub = net.create_port(ALICE, {"network_id": vlans["id"]})
    trunk = net.create_trunk(ALICE, parent["id"], [
        {"port_id": sub["id"], "segmentation_type": "vlan", "segmentation_id": 42}])
    assert trunk["sub_ports"] == [{"port_id": sub["id"], "segmentation_type": "vlan",
                                   "segmentation_id": 42}]
    assert _port(net, sub["id"]) == ("", "DOWN", "trunk:subport")
    net.allocate_for_instance(ALICE, "vm-1", "p1", [{"port_id": parent["id"]}], host="h1")
    assert _port(net, sub["id"]) == ("h1", "ACTIVE", "trunk:subport")
    assert net.get_trunk(ALICE, trunk["id"])["status"] == "ACTIVE"
    # A move: an inactive binding on the destination, then activated there.
    net.bind_ports_to_host(ALICE, "vm-1", "h2")
    assert _port(net, sub["id"])[0] == "h1"
    net.activate_port_bindings(ALICE, "vm-1", "h2")
    assert _port(net, sub["id"]) == ("h2", "ACTIVE", "trunk:subport")
    # In use: neither the trunk nor its ports can go.
    for call in (lambda: net.delete_trunk(ALICE, trunk["id"]),
                 lambda: net.delete_port(ALICE, parent["id"]),
                 lambda: net.delete_port(ALICE, sub["id"])):
        with pytest.raises(Exception) as exc:
            call()
        assert exc.value.code == 409
    net.unbind_ports(ALICE, "vm-1")
    assert _port(net, sub["id"]) == ("", "DOWN", "trunk:subport")
    net.update_port(ALICE, parent["id"], {"device_id": "", "device_owner": ""})
    net.delete_trunk(ALICE, trunk["id"])
    assert _port(net, sub["id"]) == ("", "DOWN", "")
    assert net.list_trunks(None) == []


def test_trunk_api_and_its_refusals(net):
    conf = cfg.ConfigOpts()
    api_conf.register_opts(conf)
    conf([], default_config_files=[])
    conf.set_override("auth_strategy", "noauth2", group="api")
    app = make_app(conf, net)

    def call(method, path, body=None):
        req = webob.Request.blank(path, method=method)
        req.headers["X-Auth-Token"] = "alice:p1"
        if body is not None:
            req.body = json.dumps(body).encode()
            req.content_type = "application/json"
        resp = req.get_response(app)
        return resp.status_int, json.loads(resp.body) if resp.body else None

    private = net.create_network(ALICE, "private", cidr="10.0.0.0/24")
    parent = net.create_port(ALICE, {"network_id": private["id"]})
    sub = net.create_port(ALICE, {"network_id": private["id"]})
    status, body = call("POST", "/v2.0/trunks", {"trunk": {"port_id": parent["id"]}})
    assert status == 201, body
    tid = body["trunk"]["id"]
    for path, sub_ports, code in [
            ("add_subports", [{"port_id": sub["id"], "segmentation_id": 5000}], 400),
            ("add_subports", [{"port_id": parent["id"], "segmentation_id": 7}], 409),
            ("add_subports", [{"port_id": "nope", "segmentation_id": 7}], 404),
            ("remove_subports", [{"port_id": sub["id"]}], 404)]:
        status, body = call("PUT", f"/v2.0/trunks/{tid}/{path}", {"sub_ports": sub_ports})
        assert status == code, (path, sub_ports, body)
        assert "NeutronError" in body
    assert call("GET", f"/v2.0/trunks/{tid}/get_subports")[1] == {"sub_ports": []}
    status, body = call("PUT", f"/v2.0/trunks/{tid}/add_subports",
                        {"sub_ports": [{"port_id": sub["id"], "segmentation_type": "vlan",
                                        "segmentation_id": 7}]})
    assert status == 200 and body["sub_ports"][0]["segmentation_id"] == 7
    assert call("POST", "/v2.0/trunks", {"trunk": {"port_id": sub["id"]}})[0] == 409
    assert call("DELETE", f"/v2.0/trunks/{tid}")[0] == 204
    assert call("GET", f"/v2.0/trunks/{tid}")[0] == 404
    assert any(e["alias"] == "trunk" for e in call("GET", "/v2.0/extensions")[1]["extensions"])
