"""Floating IPs: the network service's (an address of an external network, held by a
project, associated with a port) and the Compute API's proxies and actions."""
import json

import pytest
import sqlalchemy as sa

from novella.context import RequestContext
from novella.db import cell_models as cm
from novella.network import models as nm
from novella.network.api import NetworkAPI
from tests.schemas import synced

ALICE = RequestContext(user_id="alice", project_id="project-a", roles=["member"])


@pytest.fixture
def fip_cloud(cloud, tmp_path):
    cloud.network_api = NetworkAPI(synced(f"sqlite:///{tmp_path}/network.db", "network"))
    cloud.build_app()
    cloud.private = cloud.network_api.create_network(ALICE, "private", cidr="10.0.0.0/24")
    cloud.public = cloud.network_api.create_network(None, "public", cidr="172.24.4.0/24",
                                                    external=True, project_id="admin")
    cloud.flavor()
    cloud.server = cloud.instance("cell1", host="h1")
    info = cloud.network_api.allocate_for_instance(
        ALICE, cloud.server, "project-a", [{"network_id": cloud.private["id"]}], host="h1")
    with cloud.db("cell1").session(write=True) as s:
        s.add(cm.InstanceInfoCache(instance_uuid=cloud.server, network_info=json.dumps(info)))
    return cloud


def _fips(cloud):
    with cloud.network_api.db.session() as s:
        return {f.floating_ip_address: (f.project_id, f.port_id, f.fixed_ip_address)
                for f in s.scalars(sa.select(nm.FloatingIP))}


def _addresses(cloud):
    return cloud.user.get(f"/servers/{cloud.server}").json["server"]["addresses"]["private"]


def test_allocate_associate_disassociate_release(fip_cloud):
    cloud = fip_cloud
    assert cloud.user.get("/os-floating-ip-pools").json == {"floating_ip_pools": [
        {"name": "public"}]}
    resp = cloud.user.post("/os-floating-ips", {"pool": "public"})
    assert resp.status_int == 200, resp.body
    fip = resp.json["floating_ip"]
    assert (fip["pool"], fip["instance_id"], fip["fixed_ip"]) == ("public", None, None)
    assert fip["ip"].startswith("172.24.4.")
    assert _fips(cloud) == {fip["ip"]: ("project-a", None, None)}
    resp = cloud.user.post(f"/servers/{cloud.server}/action",
                           {"addFloatingIp": {"address": fip["ip"]}})
    assert resp.status_int == 202, resp.body
    (port,) = cloud.network_api.list_ports(ALICE, device_id=cloud.server)
    fixed = port["fixed_ips"][0]["ip_address"]
    assert _fips(cloud) == {fip["ip"]: ("project-a", port["id"], fixed)}
    assert {"addr": fip["ip"], "OS-EXT-IPS:type": "floating", "version": 4,
            "OS-EXT-IPS-MAC:mac_addr": port["mac_address"]} in _addresses(cloud)
    shown = cloud.user.get(f"/os-floating-ips/{fip['id']}").json["floating_ip"]
    assert (shown["instance_id"], shown["fixed_ip"]) == (cloud.server, fixed)
    # Another server's removal is refused; then the removal.
    other = cloud.instance("cell1", host="h1")
    assert cloud.user.post(f"/servers/{other}/action",
                           {"removeFloatingIp": {"address": fip["ip"]}}).status_int == 409
    assert cloud.user.post(f"/servers/{cloud.server}/action",
                           {"removeFloatingIp": {"address": fip["ip"]}}).status_int == 202
    assert _fips(cloud) == {fip["ip"]: ("project-a", None, None)}
    assert all(a["OS-EXT-IPS:type"] == "fixed" for a in _addresses(cloud))
    assert cloud.user.delete(f"/os-floating-ips/{fip['id']}").status_int == 202
    assert _fips(cloud) == {}
    # Its address went back: the next one allocated may take it again.
    with cloud.network_api.db.session() as s:
        assert s.scalar(sa.select(sa.func.count()).select_from(nm.Port).where(
            nm.Port.device_owner == "network:floatingip")) == 0


def test_associating_elsewhere_moves_it(fip_cloud):
    cloud = fip_cloud
    fip = cloud.user.post("/os-floating-ips", {"pool": "public"}).json["floating_ip"]
    other = cloud.instance("cell1", host="h1")
    info = cloud.network_api.allocate_for_instance(
        ALICE, other, "project-a", [{"network_id": cloud.private["id"]}], host="h1")
    with cloud.db("cell1").session(write=True) as s:
        s.add(cm.InstanceInfoCache(instance_uuid=other, network_info=json.dumps(info)))
    for server in (cloud.server, other):
        assert cloud.user.post(f"/servers/{server}/action",
                               {"addFloatingIp": {"address": fip["ip"]}}).status_int == 202
    (port,) = cloud.network_api.list_ports(ALICE, device_id=other)
    assert _fips(cloud)[fip["ip"]][1] == port["id"]
    assert all(a["OS-EXT-IPS:type"] == "fixed" for a in _addresses(cloud))


def test_deleting_the_port_disassociates(fip_cloud):
    cloud = fip_cloud
    fip = cloud.network_api.create_floatingip(ALICE, cloud.public["id"])
    (port,) = cloud.network_api.list_ports(ALICE, device_id=cloud.server)
    cloud.network_api.update_floatingip(ALICE, fip["id"], port["id"])
    cloud.network_api.delete_port(ALICE, port["id"])
    assert _fips(cloud) == {fip["floating_ip_address"]: ("project-a", None, None)}


def test_refusals_change_nothing(fip_cloud):
    cloud = fip_cloud
    fip = cloud.user.post("/os-floating-ips", {"pool": "public"}).json["floating_ip"]
    before = _fips(cloud)
    server = f"/servers/{cloud.server}/action"
    for method, path, body, code in [
            ("POST", "/os-floating-ips", {"pool": "nope"}, 404),
            ("POST", "/os-floating-ips", {"pool": 5}, 400),
            ("GET", "/os-floating-ips/6ba7b810-9dad-11d1-80b4-00c04fd430c8", None, 404),
            ("DELETE", "/os-floating-ips/6ba7b810-9dad-11d1-80b4-00c04fd430c8", None, 404),
            ("POST", server, {"addFloatingIp": {"address": "10.10.10.10"}}, 404),
            ("POST", server, {"addFloatingIp": {"address": "not-an-ip"}}, 400),
            ("POST", server, {"addFloatingIp": {"address": fip["ip"],
                                                "fixed_address": "10.9.9.9"}}, 400),
            ("POST", server, {"removeFloatingIp": {"address": "10.10.10.10"}}, 404)]:
        resp = cloud.user.request(method, path, body)
        assert resp.status_int == code, (method, path, body, resp.body)
    assert cloud.other.get(f"/os-floating-ips/{fip['id']}").status_int == 404
    assert cloud.other.post(f"/servers/{cloud.server}/action",
                            {"addFloatingIp": {"address": fip["ip"]}}).status_int == 404
    assert cloud.user.get("/os-floating-ips", version="2.36").status_int == 404
    assert cloud.user.post(server, {"addFloatingIp": {"address": fip["ip"]}},
                           version="2.44").status_int == 400
    assert _fips(cloud) == before


def test_network_proxies(fip_cloud):
    """/os-networks and /os-tenant-networks: the project's, the shared and the external
    networks in the nova-network shapes; gone at 2.36; create and delete are 410."""
    cloud = fip_cloud
    nets = cloud.user.get("/os-networks").json["networks"]
    assert sorted(n["label"] for n in nets) == ["private", "public"]
    private = next(n for n in nets if n["label"] == "private")
    assert private["id"] == cloud.private["id"] and private["cidr"] is None
    assert "project_id" not in private and "project_id" in cloud.admin.get(
        f"/os-networks/{private['id']}").json["network"]
    assert cloud.user.get(f"/os-tenant-networks/{private['id']}").json == {
        "network": {"id": private["id"], "cidr": "None", "label": "private"}}
    assert cloud.other.get(f"/os-networks/{private['id']}").status_int == 404
    assert cloud.user.get("/os-tenant-networks/6ba7b810-9dad-11d1-80b4-00c04fd430c8"
                          ).status_int == 404
    assert cloud.user.get("/os-networks", version="2.36").status_int == 404
    assert cloud.admin.post("/os-networks", {"network": {"label": "x"}}).status_int == 410
    assert cloud.admin.delete(f"/os-tenant-networks/{private['id']}").status_int == 410
    assert len(cloud.network_api.list_networks(None)) == 2


def test_an_external_network_is_never_chosen_for_a_server(fip_cloud):
    """The external network belongs to the admin project; a server of that project
    asking for no network in particular still gets its port on the other one."""
    cloud = fip_cloud
    shared = cloud.network_api.create_network(None, "shared", cidr="10.2.0.0/24", shared=True)
    (vif,) = cloud.network_api.allocate_for_instance(None, "admin-server", "admin", None,
                                                     host="h1")
    assert vif["network"]["id"] == shared["id"]


def test_an_association_made_in_the_network_api_shows_at_once(fip_cloud):
    """As `openstack server add floating ip` does: the floating IP's port set in the
    network service; the server shows it without its info cache being refreshed."""
    cloud = fip_cloud
    fip = cloud.network_api.create_floatingip(ALICE, cloud.public["id"])
    (port,) = cloud.network_api.list_ports(ALICE, device_id=cloud.server)
    cloud.network_api.update_floatingip(ALICE, fip["id"], port["id"])
    assert fip["floating_ip_address"] in [a["addr"] for a in _addresses(cloud)
                                          if a["OS-EXT-IPS:type"] == "floating"]
    listed = cloud.user.get("/servers/detail").json["servers"][0]["addresses"]["private"]
    assert [a["addr"] for a in listed if a["OS-EXT-IPS:type"] == "floating"] == \
        [fip["floating_ip_address"]]
    cloud.network_api.update_floatingip(ALICE, fip["id"], None)
    assert all(a["OS-EXT-IPS:type"] == "fixed" for a in _addresses(cloud))
