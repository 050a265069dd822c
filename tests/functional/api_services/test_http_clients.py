"""The network, volume and image services' HTTP clients against their embedded APIs.

Each client is built by ``novella.clients.service_clients`` from ``[neutron]``,
``[cinder]`` and ``[glance]`` as a compute host builds it, its keystoneauth
session sending every request in-process to the service's WSGI application
(noauth2) over a SQLite file; what each call did is read back from the
service's own database client (port bindings, attachments, image records).
"""
import uuid

import pytest
from keystoneauth1 import loading as ks_loading
from oslo_config import cfg

from novella import clients
from novella import conf as conf_mod
from novella.api.image.app import make_app as image_app
from novella.api.network.app import make_app as network_app
from novella.api.volume.app import make_app as volume_app
from novella.context import RequestContext, get_admin_context
from novella.image.api import ImageAPI, ImageNotFound
from novella.image.http_client import ImageHTTPClient
from novella.network import api as net_api
from novella.network import qos
from novella.network.http_client import NetworkHTTPClient
from novella.placement.client import WSGIAdapter
from novella.volume import api as vol_api
from novella.volume.http_client import VolumeHTTPClient
from tests.schemas import synced

URLS = {"network": "http://network.test", "volume": "http://volume.test",
        "image": "http://image.test"}
ALICE = RequestContext(user_id="alice", project_id="p1", roles=["member", "reader"],
                       auth_token="alice:p1")


def _conf(**groups):
    conf = cfg.ConfigOpts()
    for module in conf_mod.MODULES:
        module.register_opts(conf)
    conf([], default_config_files=[])
    conf.set_override("auth_strategy", "noauth2", group="api")
    for group, values in groups.items():
        for name, value in values.items():
            conf.set_override(name, value, group=group)
    return conf


HTTP_GROUPS = {"neutron": {"endpoint_override": URLS["network"]},
               "cinder": {"endpoint_template": URLS["volume"] + "/v3"},
               "glance": {"endpoint_override": URLS["image"]}}


class Recorder:
    """A WSGI app's wrapper that keeps the headers of every request."""

    def __init__(self, app):
        self.app, self.requests = app, []

    def __call__(self, environ, start_response):
        self.requests.append({k[5:].replace("_", "-").title(): v for k, v in environ.items()
                              if k.startswith("HTTP_")})
        return self.app(environ, start_response)


def _mount(client, recorder, name):
    client.http.session.session.mount(URLS[name], WSGIAdapter(recorder))


@pytest.fixture
def env(tmp_path):
    conf = _conf(**HTTP_GROUPS)
    url = synced(f"sqlite:///{tmp_path}/services.db")
    image_db = ImageAPI(url, str(tmp_path / "images"))
    network_db = NetworkAPI(url)
    volume_db = vol_api.VolumeAPI(url, image_api=image_db)
    apps = {"image": Recorder(image_app(conf, image_db)),
            "network": Recorder(network_app(conf, network_db)),
            "volume": Recorder(volume_app(conf, volume_db))}
    image, network, volume = clients.service_clients(
        conf, lambda: pytest.fail("no service should be reached over its database"))
    for name, client in (("image", image), ("network", network), ("volume", volume)):
        _mount(client, apps[name], name)
    return {"image": image, "network": network, "volume": volume, "apps": apps,
            "image_db": image_db, "network_db": network_db, "volume_db": volume_db}


NetworkAPI = net_api.NetworkAPI


def _bindings(db, port_id):
    return {b["host"]: b["status"] for b in db.list_port_bindings(None, port_id)}


# --- which client -----------------------------------------------------------------------
def test_a_silent_group_leaves_the_service_on_its_database():
    local = ("image db", "network db", "volume db")
    assert clients.service_clients(_conf(), lambda: local) == local
    image, network, volume = clients.service_clients(
        _conf(neutron=HTTP_GROUPS["neutron"]), lambda: local)
    assert (image, volume) == ("image db", "volume db")
    assert isinstance(network, NetworkHTTPClient)
    made = clients.service_clients(_conf(**HTTP_GROUPS), lambda: pytest.fail("not needed"))
    assert [type(c) for c in made] == [ImageHTTPClient, NetworkHTTPClient, VolumeHTTPClient]


def test_a_service_token_without_a_service_user_is_a_missing_option():
    conf = _conf(service_user={"send_service_user_token": True}, **HTTP_GROUPS)
    with pytest.raises(clients.MissingOption, match=r"\[service_user\]"):
        clients.service_clients(conf, lambda: None)


def test_the_user_token_and_the_service_token_are_sent(env, tmp_path):
    conf = _conf(service_user={"send_service_user_token": True, "auth_type": "admin_token"},
                 **HTTP_GROUPS)
    conf.register_opts(ks_loading.get_auth_plugin_conf_options("admin_token"),
                       group="service_user")
    conf.set_override("token", "service-token", group="service_user")
    conf.set_override("endpoint", URLS["volume"], group="service_user")
    _image, _network, volume = clients.service_clients(conf, lambda: None)
    _mount(volume, env["apps"]["volume"], "volume")
    made = volume.create(ALICE, 1, name="data")
    sent = env["apps"]["volume"].requests
    assert [(r["X-Auth-Token"], r["X-Service-Token"]) for r in sent] == \
        [("alice:p1", "service-token")] * 2
    assert sent[0]["X-Openstack-Request-Id"] == ALICE.request_id
    # A request not made for a user (an administrator's context) goes as the service.
    volume.get(get_admin_context(), made["id"])
    assert (sent[-1]["X-Auth-Token"], sent[-1]["X-Service-Token"]) == \
        ("admin", "service-token")
    # Without [service_user], no service token.
    env["volume"].get(ALICE, made["id"])
    assert "X-Service-Token" not in sent[-1] and sent[-1]["X-Auth-Token"] == "alice:p1"
    assert env["volume_db"].get(None, made["id"])["project_id"] == "p1"


# --- network ----------------------------------------------------------------------------
@pytest.fixture
def net(env):
    return env["network_db"].create_network(get_admin_context(), "private", cidr="10.0.0.0/24",
                                            shared=True)


def test_ports_of_a_server_through_a_move(env, net):
    http, db = env["network"], env["network_db"]
    vm = str(uuid.uuid4())
    given = db.create_port(ALICE, {"network_id": net["id"]})
    nw_info = http.allocate_for_instance(ALICE, vm, "p1",
                                         [{"network_id": net["id"]}, {"port_id": given["id"]}],
                                         host="h1", port_profiles={given["id"]: {"rp": "x"}})
    made = nw_info[0]["id"]
    assert [v["preserve_on_delete"] for v in nw_info] == [False, True]
    assert [v["network"]["subnets"][0]["cidr"] for v in nw_info] == ["10.0.0.0/24"] * 2
    rows = {p["id"]: p for p in db.list_ports(None, device_id=vm)}
    assert set(rows) == {made, given["id"]}
    # Only Neutron's attributes were sent: the service's own mark is not set.
    assert not rows[made]["created_for_instance"]
    assert {p["binding:host_id"] for p in rows.values()} == {"h1"}
    assert rows[given["id"]]["binding:profile"] == {"rp": "x"}
    assert rows[made]["project_id"] == "p1" and rows[made]["security_groups"]

    # The move: INACTIVE bindings on the destination, activated, the source's dropped.
    http.setup_networks_on_host(ALICE, vm, "h2")
    assert db.get_port(None, made)["binding:profile"] == {"migrating_to": "h2"}
    bound = http.bind_ports_to_host(ALICE, vm, "h2", port_profiles={made: {"rp": "y"}})
    assert {b["status"] for b in bound.values()} == {"INACTIVE"}
    assert _bindings(db, made) == {"h1": "ACTIVE", "h2": "INACTIVE"}
    http.activate_port_bindings(ALICE, vm, "h2")
    assert _bindings(db, made) == {"h1": "INACTIVE", "h2": "ACTIVE"}
    http.delete_port_bindings(ALICE, vm, "h1")
    http.delete_port_bindings(ALICE, vm, "h1")  # missing ones are fine
    info = http.migrate_instance_finish(ALICE, vm, "h2", port_profiles={made: {"rp": "z"}})
    assert _bindings(db, made) == _bindings(db, given["id"]) == {"h2": "ACTIVE"}
    assert db.get_port(None, made)["binding:profile"] == {"rp": "z"}
    assert {v["id"]: v["profile"] for v in info}[made] == {"rp": "z"}
    # Read back, a port's preserve_on_delete is not known to Neutron: null; the rest is
    # as the database client composes it.
    read = http.get_instance_nw_info(ALICE, vm)
    assert [v["preserve_on_delete"] for v in read] == [None, None]
    assert [dict(v, preserve_on_delete=None) for v in read] == \
        [dict(v, preserve_on_delete=None) for v in db.get_instance_nw_info(None, vm)]

    # Shelve: unbound, still the server's; delete: the port made goes, the given one stays.
    http.unbind_ports(ALICE, vm)
    assert {p["binding:host_id"] for p in db.list_ports(None, device_id=vm)} == {""}
    assert _bindings(db, made) == {}
    http.deallocate_for_instance(ALICE, vm, {given["id"]})
    assert db.list_ports(None, device_id=vm) == []
    with pytest.raises(net_api.PortNotFound):
        db.get_port(None, made)
    kept = db.get_port(None, given["id"])
    assert (kept["device_id"], kept["binding:host_id"]) == ("", "")


def test_bindings_made_for_a_move_are_undone_when_one_fails(env, net):
    http, db = env["network"], env["network_db"]
    vm = str(uuid.uuid4())
    ports = [p["id"] for p in http.allocate_for_instance(
        ALICE, vm, "p1", [{"network_id": net["id"]}] * 2, host="h1")]
    with pytest.raises(net_api.InvalidInput):
        http.bind_ports_to_host(ALICE, vm, "h2", vnic_types={ports[1]: "bogus"})
    assert [_bindings(db, p) for p in ports] == [{"h1": "ACTIVE"}] * 2
    db.unbindable_hosts.add("h3")
    with pytest.raises(net_api.PortBindingFailed):
        http.bind_ports_to_host(ALICE, vm, "h3")
    assert [_bindings(db, p) for p in ports] == [{"h1": "ACTIVE"}] * 2


def test_ports_made_for_a_server_are_deleted_when_allocation_fails(env, net):
    http, db = env["network"], env["network_db"]
    vm, other = str(uuid.uuid4()), str(uuid.uuid4())
    taken = db.create_port(ALICE, {"network_id": net["id"], "device_id": other})
    with pytest.raises(net_api.PortInUse):
        http.allocate_for_instance(ALICE, vm, "p1",
                                   [{"network_id": net["id"]}, {"port_id": taken["id"]}])
    assert db.list_ports(None, device_id=vm) == []
    assert db.get_port(None, taken["id"])["device_id"] == other
    with pytest.raises(net_api.NetworkNotFound):
        http.allocate_for_instance(ALICE, vm, "p1", [{"network_id": str(uuid.uuid4())}])
    assert db.list_ports(None, device_id=vm) == []


def test_resource_groups_sriov_ports_and_security_groups(env, net):
    http, db = env["network"], env["network_db"]
    admin = get_admin_context()
    physnet = db.create_network(admin, "sriov", cidr="10.1.0.0/24", shared=True,
                                physical_network="physnet1")
    request = {"request_groups": [{"id": "g1", "resources": {"NET_BW_EGR_KILOBIT_PER_SEC": 10},
                                   "required": ["CUSTOM_PHYSNET1"]}], "same_subtree": ["g1"]}
    port = db.create_port(admin, {"network_id": physnet["id"], "binding:vnic_type": "direct",
                                  "resource_request": request, "project_id": "p1"})
    assert http.get_requested_resource_groups(ALICE, port_ids=[port["id"]]) == \
        db.get_requested_resource_groups(None, port_ids=[port["id"]])
    assert http.sriov_ports(ALICE, port_ids=[port["id"]]) == [
        {"port_id": port["id"], "vnic_type": "direct", "physical_network": "physnet1"}]
    vm = str(uuid.uuid4())
    http.allocate_for_instance(ALICE, vm, "p1", [{"network_id": net["id"]}])
    web = db.create_security_group(ALICE, "web")
    http.add_security_group_to_instance(ALICE, vm, "p1", "web")
    assert http.instances_security_group_names(ALICE, [vm]) == \
        db.instances_security_group_names(None, [vm]) == {vm: ["default", "web"]}
    http.remove_security_group_from_instance(ALICE, vm, "p1", web["id"])
    assert db.instances_security_group_names(None, [vm]) == {vm: ["default"]}


# --- volume -----------------------------------------------------------------------------
def test_an_attachment_from_reserved_to_deleted(env):
    http, db = env["volume"], env["volume_db"]
    vm = str(uuid.uuid4())
    vol = http.create(ALICE, 1, name="data")
    assert db.get(None, vol["id"])["status"] == "available"
    reserved = http.attachment_create(ALICE, vol["id"], vm)
    assert (reserved["status"], db.get(None, vol["id"])["status"]) == ("reserved", "reserved")
    att = http.attachment_update(ALICE, reserved["id"], {"host": "h1"}, mountpoint="/dev/vdb")
    assert att["connection_info"]["data"]["target_host"] == "h1"
    row = db.attachment_get(None, att["id"])
    assert (row["status"], row["attached_host"], row["mountpoint"]) == \
        ("attaching", "h1", "/dev/vdb")
    assert http.attachment_complete(ALICE, att["id"])["status"] == "attached"
    v = db.get(None, vol["id"])
    assert (v["status"], v["attach_status"]) == ("in-use", "attached")
    assert http.get(ALICE, vol["id"])["attach_status"] == "attached"
    # A second attachment for the same server (a move's destination), made connected.
    dest = http.attachment_create(ALICE, vol["id"], vm, connector={"host": "h2"},
                                  mountpoint="/dev/vdb")
    assert db.attachment_get(None, dest["id"])["attached_host"] == "h2"
    assert [a["id"] for a in http.attachment_list(ALICE, instance_uuid=vm)] == \
        [att["id"], dest["id"]]
    http.attachment_delete(ALICE, att["id"])
    http.attachment_delete(ALICE, dest["id"])
    assert db.attachment_list(None, volume_id=vol["id"]) == []
    assert db.get(None, vol["id"])["status"] == "available"
    with pytest.raises(vol_api.AttachmentNotFound):
        http.attachment_get(ALICE, att["id"])
    # Another project's volume is not found, and nothing is attached.
    bob = RequestContext(user_id="bob", project_id="p2", auth_token="bob:p2")
    with pytest.raises(vol_api.VolumeNotFound):
        http.attachment_create(bob, vol["id"], vm)
    assert db.attachment_list(None, volume_id=vol["id"]) == []


def test_volume_snapshots_and_delete(env):
    http, db = env["volume"], env["volume_db"]
    vol = http.create(ALICE, 2)
    snap = http.create_snapshot(ALICE, vol["id"], name="s1")
    assert db.get_snapshot(None, snap["id"])["volume_id"] == vol["id"]
    assert [s["id"] for s in http.list_snapshots(ALICE)] == [snap["id"]]
    with pytest.raises(vol_api.InvalidVolume):
        http.delete(ALICE, vol["id"])  # it has a snapshot
    assert db.get(None, vol["id"])["status"] == "available"
    http.delete_snapshot(ALICE, snap["id"])
    http.delete(ALICE, vol["id"])
    with pytest.raises(vol_api.VolumeNotFound):
        db.get(None, vol["id"])



def test_a_volume_made_of_a_snapshot_and_a_cascading_delete(env):
    http, db = env["volume"], env["volume_db"]
    vol = http.create(ALICE, 2, image_id=None)
    snap = http.create_snapshot(ALICE, vol["id"], name="s1")
    made = http.create(ALICE, None, snapshot_id=snap["id"])
    assert (db.get(None, made["id"])["size"], made["status"]) == (2, "available")
    with pytest.raises(vol_api.VolumeError):  # smaller than the snapshot: nothing made
        http.create(ALICE, 1, snapshot_id=snap["id"])
    assert len(db.list(None)) == 2
    http.delete(ALICE, vol["id"], cascade=True)
    with pytest.raises(vol_api.SnapshotNotFound):
        db.get_snapshot(None, snap["id"])
    assert [v["id"] for v in db.list(None)] == [made["id"]]


# --- image ------------------------------------------------------------------------------
def test_a_snapshot_image_uploaded_downloaded_and_deleted(env, tmp_path):
    http, db = env["image"], env["image_db"]
    vm = str(uuid.uuid4())
    snap = http.create_snapshot(ALICE, vm, "snap", base_image_ref="base",
                                disk_format="qcow2", container_format="bare")
    row = db.get(None, snap["id"])
    assert (row["status"], row["owner"], row["visibility"]) == ("queued", "p1", "private")
    assert row["properties"] == {"image_type": "snapshot", "instance_uuid": vm,
                                 "base_image_ref": "base"}
    assert http.upload(ALICE, snap["id"], b"disk bytes")["status"] == "active"
    assert db.get(None, snap["id"])["size"] == len(b"disk bytes")
    assert http.download(ALICE, snap["id"]) == b"disk bytes"
    assert open(http.download(ALICE, snap["id"], str(tmp_path / "copy")), "rb").read() == \
        b"disk bytes"
    assert [i["id"] for i in http.list(ALICE, {"instance_uuid": vm})] == [snap["id"]]
    assert http.list(ALICE, {"instance_uuid": "another"}) == []
    updated = http.update(ALICE, snap["id"], properties={"kind": "nightly"},
                          remove_properties=["base_image_ref"], name="renamed")
    assert updated == http.get(ALICE, snap["id"])
    row = db.get(None, snap["id"])
    assert row["name"] == "renamed" and row["properties"] == {
        "image_type": "snapshot", "instance_uuid": vm, "kind": "nightly"}
    bob = RequestContext(user_id="bob", project_id="p2", auth_token="bob:p2")
    with pytest.raises(ImageNotFound):
        http.get(bob, snap["id"])
    http.delete(ALICE, snap["id"])
    assert db.get(None, snap["id"], include_deleted=True)["status"] == "deleted"
    with pytest.raises(ImageNotFound):
        http.get(ALICE, snap["id"])


def test_a_detach_begun_and_rolled_back_and_a_swap_completed(env):
    http, db = env["volume"], env["volume_db"]
    vm = str(uuid.uuid4())
    vol = http.create(ALICE, 1)
    att = http.attachment_create(ALICE, vol["id"], vm, connector={"host": "h1"})
    http.attachment_complete(ALICE, att["id"])
    http.begin_detaching(ALICE, vol["id"])
    assert db.get(None, vol["id"])["status"] == "detaching"
    with pytest.raises(vol_api.VolumeConflict):
        http.begin_detaching(ALICE, vol["id"])  # detaching already
    http.roll_detaching(ALICE, vol["id"])
    assert db.get(None, vol["id"])["status"] == "in-use"
    # Administrators' actions go with the service's credentials, even for a user.
    assert http.reset_status(ALICE, vol["id"], status="error")["status"] == "error"
    assert db.get(None, vol["id"])["status"] == "error"
    other = http.create(ALICE, 1)
    assert http.migrate_volume_completion(ALICE, vol["id"], other["id"]) == \
        {"save_volume_id": other["id"]}


# --- QoS and trunks ---------------------------------------------------------------------
def test_qos_policies_and_trunks(env, net):
    http, db = env["network"], env["network_db"]
    admin = get_admin_context()
    policy = http.create_qos_policy(admin, "gold", shared=True, rules=[
        {"type": "minimum_bandwidth", "min_kbps": 1000, "direction": "egress"}])
    rule = db.list_qos_rules(None, policy["id"], "minimum_bandwidth")[0]
    assert (rule["min_kbps"], rule["direction"]) == (1000, "egress")
    assert http.find_qos_rule(admin, "minimum_bandwidth", rule["id"]) == policy["id"]
    http.update_qos_rule(admin, policy["id"], "minimum_bandwidth", rule["id"], {"min_kbps": 5})
    assert db.get_qos_rule(None, policy["id"], "minimum_bandwidth", rule["id"])["min_kbps"] == 5
    # A refused rule: the policy made for it goes again.
    with pytest.raises(qos.QoSRulesConflict):
        http.create_qos_policy(admin, "bad", rules=[
            {"type": "minimum_bandwidth", "min_kbps": 1}, {"type": "minimum_bandwidth",
                                                           "min_kbps": 2}])
    assert [p["name"] for p in db.list_qos_policies(None)] == ["gold"]
    parent, child = (db.create_port(ALICE, {"network_id": net["id"]}) for _ in range(2))
    trunk = http.create_trunk(ALICE, parent["id"], name="t")
    http.add_subports(ALICE, trunk["id"], [{"port_id": child["id"],
                                            "segmentation_type": "vlan",
                                            "segmentation_id": 100}])
    assert [s["port_id"] for s in db.get_trunk(None, trunk["id"])["sub_ports"]] == [child["id"]]
    http.remove_subports(ALICE, trunk["id"], [{"port_id": child["id"]}])
    http.delete_trunk(ALICE, trunk["id"])
    assert db.list_trunks(None) == []


# Methods of the database clients with no HTTP counterpart, and why.
NOT_OVER_HTTP = {
    "data_path": "a path in the image service's own data directory",
    "default_qos_policy_id": "a query inside the network service's transactions",
    "ensure_default_security_group": "the network service makes a project's default "
                                     "group itself, when the project first needs it",
}


@pytest.mark.parametrize("db_class, http_class", [
    (NetworkAPI, NetworkHTTPClient), (vol_api.VolumeAPI, VolumeHTTPClient),
    (ImageAPI, ImageHTTPClient)])
def test_every_method_of_the_database_client_is_over_http(db_class, http_class):
    import inspect
    public = {n: f for n, f in inspect.getmembers(db_class, inspect.isfunction)
              if not n.startswith("_") and n not in NOT_OVER_HTTP}
    missing = sorted(n for n in public if not hasattr(http_class, n))
    assert missing == []
    for name, fn in public.items():
        assert inspect.signature(getattr(http_class, name)) == inspect.signature(fn), name


def test_a_service_whose_service_token_cannot_be_made_stops_with_one_line(monkeypatch):
    from novella.cmd import serve
    monkeypatch.setattr(serve, "CONF", _conf(service_user={"send_service_user_token": True},
                                             **HTTP_GROUPS))
    with pytest.raises(serve.ConfigError, match=r"\[service_user\] auth_type"):
        serve._service_clients()
    monkeypatch.setattr(serve, "CONF", _conf(**HTTP_GROUPS))
    assert [type(c) for c in serve._service_clients()] == [
        ImageHTTPClient, NetworkHTTPClient, VolumeHTTPClient]


def test_a_port_deleted_meanwhile_is_skipped_by_a_second_delete(env, net, monkeypatch):
    http, db = env["network"], env["network_db"]
    vm = str(uuid.uuid4())
    ports = [p["id"] for p in http.allocate_for_instance(
        ALICE, vm, "p1", [{"network_id": net["id"]}] * 2, host="h1")]
    listed = http._instance_ports(ALICE, vm)
    db.delete_port(None, ports[0])  # another delete of the server got there first
    monkeypatch.setattr(http, "_instance_ports", lambda ctxt, uuid_: listed)
    http.deallocate_for_instance(ALICE, vm, set())
    http.delete_port_bindings(ALICE, vm, "h1")
    assert db.list_ports(None, device_id=vm) == []
