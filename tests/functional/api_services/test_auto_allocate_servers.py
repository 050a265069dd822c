"""Servers created with ``networks: "auto"`` (2.37) on a cloud without a shared network:
the project's network is auto-allocated when the first server's ports are made and
reused by the next ones; a project with several networks gets 409, a cloud that
cannot auto-allocate 400, and neither changes anything. The same through the
network service's HTTP client."""
import json
import uuid

import pytest
import sqlalchemy as sa
import webob

from novella.context import RequestContext
from novella.network import models as nm
from tests.functional.api_services import test_http_clients
from tests.functional.system.conftest import Cloud, cloud_factory

ALICE = "alice:p1"
env = test_http_clients.env  # the network service's HTTP client over its API (fixture)
NO_SHARED_NETWORK = {"network_service": {"shared_network": False,
                                         "default_subnet_pool": "10.128.0.0/16"}}


class AutoCloud(Cloud):
    def net(self, method, path, body=None, token="admin:admin"):
        req = webob.Request.blank(path, method=method)
        req.headers["X-Auth-Token"] = token
        if body is not None:
            req.body = json.dumps(body).encode()
            req.content_type = "application/json"
        resp = req.get_response(self.aio.network_api_app)
        return resp.status_int, (json.loads(resp.body) if resp.body else None)

    def create(self, token=ALICE, **extra):
        server = {"name": "vm", "flavorRef": "1", "imageRef": self.aio.demo_image["id"],
                  "networks": "auto", **extra}
        return self.api("POST", "/servers", {"server": server}, token=token, version="2.37")

    def rows(self, project_id):
        with self.aio.network_api.db.session() as s:
            def count(model, *where):
                return s.scalar(sa.select(sa.func.count()).select_from(model).where(*where))
            return {"networks": count(nm.Network, nm.Network.project_id == project_id),
                    "subnets": count(nm.Subnet, nm.Subnet.project_id == project_id),
                    "routers": count(nm.Router, nm.Router.project_id == project_id),
                    "topologies": count(nm.AutoAllocatedTopology,
                                        nm.AutoAllocatedTopology.project_id == project_id),
                    "ports": count(nm.Port)}

    def port_networks(self, server_id):
        with self.aio.network_api.db.session() as s:
            return [p.network_id for p in s.scalars(sa.select(nm.Port).where(
                nm.Port.device_id == server_id))]


@pytest.fixture
def make(tmp_path):
    yield from cloud_factory(tmp_path, AutoCloud, cells=1)


def test_first_server_gets_the_auto_allocated_network_the_next_reuse_it(make):
    cloud = make(2, **NO_SHARED_NETWORK)
    assert cloud.aio.demo_network is None
    status, body = cloud.net("GET", "/v2.0/networks?shared=true", token=ALICE)
    assert (status, body["networks"]) == (200, [])
    assert cloud.rows("p1")["networks"] == 0

    status, body = cloud.create()
    assert status == 202, body
    cloud.aio.wait_idle()
    first = body["server"]["id"]
    assert cloud.server(first, token=ALICE)["status"] == "ACTIVE"
    rows = cloud.rows("p1")
    assert {k: v for k, v in rows.items() if k != "ports"} == {
        "networks": 1, "subnets": 1, "routers": 1, "topologies": 1}
    with cloud.aio.network_api.db.session() as s:
        topology = s.get(nm.AutoAllocatedTopology, "p1")
        network_id = topology.network_id
        assert s.get(nm.Network, network_id).name == "auto_allocated_network"
    assert cloud.port_networks(first) == [network_id]
    addresses = cloud.server(first, token=ALICE)["addresses"]
    assert list(addresses) == ["auto_allocated_network"]
    assert addresses["auto_allocated_network"][0]["addr"].startswith("10.128.0.")

    # Three more at once, as Tempest does: all on the same network; nothing new made.
    status, body = cloud.create(min_count=3)
    assert status == 202, body
    cloud.aio.wait_idle()
    status, listed = cloud.api("GET", "/servers/detail", token=ALICE, version="2.37")
    assert len(listed["servers"]) == 4
    for server in listed["servers"]:
        assert server["status"] == "ACTIVE"
        assert cloud.port_networks(server["id"]) == [network_id]
    assert {k: v for k, v in cloud.rows("p1").items() if k != "ports"} == {
        "networks": 1, "subnets": 1, "routers": 1, "topologies": 1}

    # "none" still gives no port and makes nothing.
    status, body = cloud.create(networks="none")
    assert status == 202, body
    cloud.aio.wait_idle()
    assert cloud.port_networks(body["server"]["id"]) == []


def test_several_networks_409_and_no_auto_allocation_400_change_nothing(make):
    cloud = make(1, **NO_SHARED_NETWORK)
    for name in ("a", "b"):
        status, body = cloud.net("POST", "/v2.0/networks", {"network": {"name": name}},
                                 token="bob:p2")
        assert status == 201, body
    rows = cloud.rows("p2")
    status, body = cloud.create(token="bob:p2")
    assert status == 409, body
    assert "Multiple possible networks found" in body["conflictingRequest"]["message"]
    assert cloud.rows("p2") == rows
    assert cloud.api("GET", "/servers", token="bob:p2")[1]["servers"] == []

    # No default external network: the dry run fails, the request is refused.
    public = cloud.aio.public_network["id"]
    status, body = cloud.net("PUT", f"/v2.0/networks/{public}", {"network": {
        "is_default": False}})
    assert status == 200, body
    status, body = cloud.create(token="carol:p3")
    assert status == 400, body
    assert body["badRequest"]["message"] == \
        "Unable to automatically allocate a network for project p3"
    assert cloud.rows("p3") == {"networks": 0, "subnets": 0, "routers": 0, "topologies": 0,
                                "ports": rows["ports"]}
    assert cloud.api("GET", "/servers", token="carol:p3")[1]["servers"] == []


def test_the_http_client_auto_allocates_too(env):
    http, db = env["network"], env["network_db"]
    public = db.create_network(None, "public", cidr="172.24.4.0/24", external=True,
                               is_default=True, project_id="admin")
    alice = RequestContext(user_id="alice", project_id="p1", roles=["member"])
    with pytest.raises(Exception) as missing:
        http.get_auto_allocated_topology(alice, "p1", dry_run=True)
    assert type(missing.value).__name__ == "AutoAllocationFailure"
    assert missing.value.code == 409
    db.create_subnetpool(None, "default", ["10.128.0.0/16"], default_prefixlen=26,
                         is_default=True)
    assert http.get_auto_allocated_topology(alice, "p1", dry_run=True)["id"] == "dry-run=pass"
    assert http.available_networks(alice, "p1") == []
    vm1, vm2 = str(uuid.uuid4()), str(uuid.uuid4())
    (vif,) = http.allocate_for_instance(alice, vm1, "p1", "auto", host="h1")
    (again,) = http.allocate_for_instance(alice, vm2, "p1", "auto", host="h1")
    assert vif["network"]["id"] == again["network"]["id"]
    assert [n["id"] for n in http.available_networks(alice, "p1")] == [vif["network"]["id"]]
    assert vif["network"]["subnets"][0]["cidr"] == "10.128.0.0/26"
    (router,) = db.list_routers(None)
    assert router["project_id"] == "p1"
    assert router["external_gateway_info"]["network_id"] == public["id"]
