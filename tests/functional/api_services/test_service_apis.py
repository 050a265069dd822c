"""The image v2, network v2.0 and volume v3 HTTP APIs over the embedded services.

In-process WSGI requests with noauth2 tokens (``user:project``; ``admin`` is
an administrator), each API over its service on a SQLite file.
"""
import hashlib
import json

import pytest
import webob
from oslo_config import cfg

from novella.api.image.app import make_app as image_app
from novella.api.network.app import make_app as network_app
from novella.api.volume.app import make_app as volume_app
from novella.conf import api as api_conf
from novella.image.api import ImageAPI
from novella.network.api import NetworkAPI
from novella.volume.api import VolumeAPI
from tests.schemas import synced

ADMIN, ALICE, BOB = "admin:admin", "alice:p1", "bob:p2"


class Client:
    def __init__(self, app):
        self.app = app

    def __call__(self, method, path, body=None, token=ALICE, headers=None, raw=False):
        req = webob.Request.blank(path, method=method)
        req.headers["X-Auth-Token"] = token
        for k, v in (headers or {}).items():
            req.headers[k] = v
        if body is not None:
            req.body = body if isinstance(body, bytes) else json.dumps(body).encode()
            req.content_type = headers.get("Content-Type", "application/json") \
                if headers else "application/json"
        resp = req.get_response(self.app)
        resp.data = resp.body if raw or not resp.body else \
            resp.text if resp.content_type == "text/plain" else json.loads(resp.body)
        return resp


def noauth_conf():
    """The APIs' configuration: noauth2 tokens."""
    conf = cfg.ConfigOpts()
    api_conf.register_opts(conf)
    conf([], default_config_files=[])
    conf.set_override("auth_strategy", "noauth2", group="api")
    return conf


@pytest.fixture
def apis(tmp_path):
    conf = noauth_conf()
    url = synced(f"sqlite:///{tmp_path}/services.db")
    image_api = ImageAPI(url, str(tmp_path / "images"))
    network_api = NetworkAPI(url)
    volume_api = VolumeAPI(url, image_api=image_api)
    return {"image": Client(image_app(conf, image_api)),
            "network": Client(network_app(conf, network_api)),
            "volume": Client(volume_app(conf, volume_api)),
            "services": (image_api, network_api, volume_api)}


# --- image ------------------------------------------------------------------------
def test_image_lifecycle_and_visibility(apis):
    img = apis["image"]
    assert img("GET", "/", token="").status_int == 300  # versions need no token
    assert img("GET", "/v2/images", token="").status_int == 401

    created = img("POST", "/v2/images", {"name": "mine", "disk_format": "qcow2",
                                         "container_format": "bare", "hw_disk_bus": "virtio"})
    assert created.status_int == 201
    image = created.data
    assert (image["status"], image["visibility"], image["owner"], image["hw_disk_bus"]) == \
        ("queued", "shared", "p1", "virtio")
    iid = image["id"]

    data = b"disk bytes" * 100
    put = img("PUT", f"/v2/images/{iid}/file", data,
              headers={"Content-Type": "application/octet-stream"})
    assert put.status_int == 204
    shown = img("GET", f"/v2/images/{iid}").data
    assert (shown["status"], shown["size"]) == ("active", len(data))
    # Glance's "in:" operator (what `openstack server list` asks its Image column with).
    other = img("POST", "/v2/images", {"name": "other"}).data["id"]
    listed = img("GET", f"/v2/images?id=in:{iid},{other},nope").data["images"]
    assert sorted(i["id"] for i in listed) == sorted([iid, other])
    assert [i["id"] for i in img("GET", "/v2/images?name=in:mine").data["images"]] == [iid]
    assert img("DELETE", f"/v2/images/{other}").status_int == 204
    assert shown["checksum"] == hashlib.md5(data, usedforsecurity=False).hexdigest()
    got = img("GET", f"/v2/images/{iid}/file", raw=True)
    assert got.status_int == 200 and got.body == data
    assert img("PUT", f"/v2/images/{iid}/file", data,
               headers={"Content-Type": "application/octet-stream"}).status_int == 409

    # Another project sees neither the image nor its data; listing filters by name.
    assert img("GET", f"/v2/images/{iid}", token=BOB).status_int == 404
    assert img("GET", "/v2/images", token=BOB).data["images"] == []
    assert [i["id"] for i in img("GET", "/v2/images?name=mine").data["images"]] == [iid]
    assert img("GET", "/v2/images?name=other").data["images"] == []

    # Publicizing needs the admin role.
    assert img("POST", "/v2/images", {"name": "pub", "visibility": "public"}).status_int == 403
    pub = img("POST", "/v2/images", {"name": "pub", "visibility": "public"}, token=ADMIN).data
    assert [i["name"] for i in img("GET", "/v2/images?visibility=public", token=BOB)
            .data["images"]] == ["pub"]

    patch = [{"op": "replace", "path": "/name", "value": "renamed"},
             {"op": "add", "path": "/os_distro", "value": "cirros"},
             {"op": "remove", "path": "/hw_disk_bus"}]
    hdr = {"Content-Type": "application/openstack-images-v2.1-json-patch"}
    patched = img("PATCH", f"/v2/images/{iid}", patch, headers=hdr).data
    assert patched["name"] == "renamed" and patched["os_distro"] == "cirros"
    assert "hw_disk_bus" not in patched
    assert img("PATCH", f"/v2/images/{iid}", [{"op": "replace", "path": "/status",
                                               "value": "active"}], headers=hdr).status_int == 403
    assert img("PATCH", f"/v2/images/{pub['id']}", patch[:1], headers=hdr).status_int == 403

    # Pagination: limit and the next link.
    page = img("GET", "/v2/images?limit=1", token=ADMIN).data
    assert len(page["images"]) == 1 and "marker=" in page["next"]

    assert img("DELETE", f"/v2/images/{pub['id']}").status_int == 403
    assert img("DELETE", f"/v2/images/{iid}").status_int == 204
    assert img("GET", f"/v2/images/{iid}").status_int == 404


# --- network -----------------------------------------------------------------------
def test_image_patch_in_the_older_form(apis):
    """``application/openstack-images-v2.0-json-patch``: ``{"add": "/key", "value": v}``."""
    img = apis["image"]
    iid = img("POST", "/v2/images", {"name": "r", "hw_disk_bus": "ide"}).data["id"]
    hdr = {"Content-Type": "application/openstack-images-v2.0-json-patch"}
    resp = img("PATCH", f"/v2/images/{iid}", [{"add": "/hw_rescue_bus", "value": "virtio"},
                                              {"replace": "/name", "value": "rescue"},
                                              {"remove": "/hw_disk_bus"}], headers=hdr)
    assert resp.status_int == 200, resp.data
    image_api = apis["services"][0]
    stored = image_api.get(None, iid)
    assert stored["name"] == "rescue"
    assert stored["properties"] == {"hw_rescue_bus": "virtio"}
    # Neither form, or both keys at once: refused, nothing changed.
    for bad in ([{"value": "x"}], [{"add": "/a", "remove": "/b", "value": "x"}]):
        assert img("PATCH", f"/v2/images/{iid}", bad, headers=hdr).status_int == 400
    assert image_api.get(None, iid)["properties"] == {"hw_rescue_bus": "virtio"}


def test_network_discovery_and_extensions(apis):
    net = apis["network"]
    versions = net("GET", "/", token="").data["versions"]
    assert [v["id"] for v in versions] == ["v2.0"]
    aliases = {e["alias"] for e in net("GET", "/v2.0/extensions").data["extensions"]}
    assert {"binding", "binding-extended", "port-resource-request"} <= aliases
    assert net("GET", "/v2.0/extensions/binding-extended").data["extension"]["name"]
    missing = net("GET", "/v2.0/extensions/nope")
    assert missing.status_int == 404 and missing.data["NeutronError"]["type"] == "ExtensionNotFound"


def test_networks_subnets_ports_and_bindings(apis):
    net = apis["network"]
    assert net("POST", "/v2.0/networks", {"network": {"name": "shared", "shared": True}}
               ).status_int == 403
    shared = net("POST", "/v2.0/networks", {"network": {"name": "shared", "shared": True}},
                 token=ADMIN).data["network"]
    assert (shared["shared"], shared["project_id"]) == (True, "admin")
    mine = net("POST", "/v2.0/networks", {"network": {"name": "mine"}}).data["network"]
    assert (mine["project_id"], mine["shared"], mine["status"]) == ("p1", False, "ACTIVE")
    subnet = net("POST", "/v2.0/subnets", {"subnet": {"network_id": mine["id"],
                                                       "cidr": "192.168.5.0/24",
                                                       "ip_version": 4, "name": "sn"}})
    assert subnet.status_int == 201
    assert (subnet.data["subnet"]["gateway_ip"], subnet.data["subnet"]["cidr"]) == \
        ("192.168.5.1", "192.168.5.0/24")
    assert net("GET", f"/v2.0/networks/{mine['id']}").data["network"]["subnets"] == \
        [subnet.data["subnet"]["id"]]

    # Visibility: bob sees the shared network only; alice's network is not found for him.
    assert [n["name"] for n in net("GET", "/v2.0/networks", token=BOB).data["networks"]] == \
        ["shared"]
    assert net("GET", f"/v2.0/networks/{mine['id']}", token=BOB).status_int == 404
    assert [n["id"] for n in net("GET", "/v2.0/networks?name=mine").data["networks"]] == \
        [mine["id"]]
    assert [n["name"] for n in net("GET", "/v2.0/networks?shared=true").data["networks"]] == \
        ["shared"]
    fields = net("GET", "/v2.0/networks?fields=id&fields=name").data["networks"]
    assert all(set(n) == {"id", "name"} for n in fields)

    # Ports: a member may not bind; an admin may, and sees the binding fields.
    assert net("POST", "/v2.0/ports", {"port": {"network_id": mine["id"],
                                                "binding:host_id": "host1"}}).status_int == 403
    port = net("POST", "/v2.0/ports", {"port": {"network_id": mine["id"], "name": "p"}})
    assert port.status_int == 201
    port = port.data["port"]
    assert port["fixed_ips"][0]["ip_address"] == "192.168.5.2"
    assert (port["binding:host_id"], port["binding:vif_type"], port["status"]) == \
        ("", "unbound", "DOWN")
    assert port["resource_request"] is None
    pid = port["id"]
    assert net("GET", f"/v2.0/ports/{pid}", token=BOB).status_int == 404

    bound = net("PUT", f"/v2.0/ports/{pid}", {"port": {"binding:host_id": "host1",
                                                       "device_owner": "compute:nova",
                                                       "device_id": "vm-1"}}, token=ADMIN)
    assert bound.status_int == 200
    bound = bound.data["port"]
    assert (bound["binding:host_id"], bound["binding:vif_type"], bound["status"]) == \
        ("host1", "ovs", "ACTIVE")
    assert [p["id"] for p in net("GET", "/v2.0/ports?binding:host_id=host1",
                                 token=ADMIN).data["ports"]] == [pid]
    assert net("GET", "/v2.0/ports?device_id=vm-2").data["ports"] == []

    # The extended port-bindings API: inactive on host2, activate, drop host1.
    assert net("GET", f"/v2.0/ports/{pid}/bindings").status_int == 403
    b = net("POST", f"/v2.0/ports/{pid}/bindings",
            {"binding": {"host": "host2", "profile": {"allocation": "rp-2"}}}, token=ADMIN)
    assert b.status_int == 201
    assert (b.data["binding"]["host"], b.data["binding"]["status"]) == ("host2", "INACTIVE")
    assert net("POST", f"/v2.0/ports/{pid}/bindings", {"binding": {"host": "host2"}},
               token=ADMIN).status_int == 409
    statuses = {x["host"]: x["status"] for x in
                net("GET", f"/v2.0/ports/{pid}/bindings", token=ADMIN).data["bindings"]}
    assert statuses == {"host1": "ACTIVE", "host2": "INACTIVE"}
    act = net("PUT", f"/v2.0/ports/{pid}/bindings/host2/activate", token=ADMIN)
    assert act.status_int == 200 and act.data["binding"]["status"] == "ACTIVE"
    assert net("PUT", f"/v2.0/ports/{pid}/bindings/host2/activate", token=ADMIN).status_int == 409
    shown = net("GET", f"/v2.0/ports/{pid}", token=ADMIN).data["port"]
    assert (shown["binding:host_id"], shown["binding:profile"]) == ("host2", {"allocation": "rp-2"})
    assert net("DELETE", f"/v2.0/ports/{pid}/bindings/host1", token=ADMIN).status_int == 204
    assert net("GET", f"/v2.0/ports/{pid}/bindings/host1", token=ADMIN).status_int == 404

    assert net("DELETE", f"/v2.0/networks/{mine['id']}").status_int == 409  # has a port
    assert net("DELETE", f"/v2.0/ports/{pid}").status_int == 204
    assert net("DELETE", f"/v2.0/networks/{mine['id']}").status_int == 204
    assert net("GET", f"/v2.0/networks/{mine['id']}").data["NeutronError"]["type"] == \
        "NetworkNotFound"


# --- volume ------------------------------------------------------------------------
def test_volumes_and_attachments(apis):
    vol = apis["volume"]
    root = vol("GET", "/", token="")
    assert root.status_int == 300
    assert (root.data["versions"][0]["min_version"], root.data["versions"][0]["version"]) == \
        ("3.0", "3.68")

    created = vol("POST", "/v3/p1/volumes", {"volume": {"size": 2, "name": "data"}})
    assert created.status_int == 202
    v = created.data["volume"]
    assert (v["size"], v["name"], v["status"], v["bootable"]) == (2, "data", "available", "false")
    vid = v["id"]
    # The create response is the detail view without the attributes show adds.
    assert "os-vol-tenant-attr:tenant_id" not in v and "os-vol-host-attr:host" not in v
    shown = vol("GET", f"/v3/volumes/{vid}").data["volume"]
    assert shown["os-vol-tenant-attr:tenant_id"] == "p1"
    assert set(shown) - set(v) == {"os-vol-tenant-attr:tenant_id"}   # (host: admins only)
    # With or without the project id in the path; another project does not see it.
    assert vol("GET", f"/v3/volumes/{vid}").data["volume"]["id"] == vid
    assert [x["id"] for x in vol("GET", "/v3/p1/volumes").data["volumes"]] == [vid]
    assert [x["name"] for x in vol("GET", "/v3/volumes/detail?name=data").data["volumes"]] == \
        ["data"]
    missing = vol("GET", f"/v3/p2/volumes/{vid}", token=BOB)
    assert missing.status_int == 404 and "itemNotFound" in missing.data
    assert vol("GET", f"/v3/p2/volumes/{vid}", token=ALICE).status_int == 400
    assert vol("POST", "/v3/volumes", {"volume": {"name": "nosize"}}).status_int == 400

    # Attachments need 3.27; the version is echoed.
    body = {"attachment": {"volume_uuid": vid, "instance_uuid": "vm-1"}}
    assert vol("POST", "/v3/attachments", body).status_int == 404
    mv = {"OpenStack-API-Version": "volume 3.44"}
    att = vol("POST", "/v3/attachments", body, headers=mv)
    assert att.status_int == 200 and att.headers["OpenStack-API-Version"] == "volume 3.44"
    aid = att.data["attachment"]["id"]
    assert att.data["attachment"]["status"] == "reserved"
    assert vol("GET", f"/v3/volumes/{vid}").data["volume"]["status"] == "reserved"
    upd = vol("PUT", f"/v3/attachments/{aid}",
              {"attachment": {"connector": {"host": "host1", "mountpoint": "/dev/vdb"}}},
              headers=mv)
    assert upd.data["attachment"]["status"] == "attaching"
    assert upd.data["attachment"]["connection_info"]["driver_volume_type"] == "simulated"
    assert vol("POST", f"/v3/attachments/{aid}/action", {"os-complete": None},
               headers=mv).status_int == 204
    v = vol("GET", f"/v3/volumes/{vid}").data["volume"]
    assert v["status"] == "in-use"
    assert [(a["server_id"], a["host_name"], a["device"]) for a in v["attachments"]] == \
        [("vm-1", "host1", "/dev/vdb")]
    assert [a["id"] for a in vol("GET", "/v3/attachments?volume_id=" + vid,
                                 headers=mv).data["attachments"]] == [aid]
    assert vol("GET", f"/v3/attachments/{aid}", token=BOB, headers=mv).status_int == 404
    assert vol("DELETE", f"/v3/volumes/{vid}").status_int == 400   # attached (Cinder's 400)
    assert vol("DELETE", f"/v3/attachments/{aid}", headers=mv).status_int == 200
    assert vol("GET", f"/v3/volumes/{vid}").data["volume"]["status"] == "available"
    assert vol("DELETE", f"/v3/volumes/{vid}").status_int == 202
    assert vol("GET", f"/v3/volumes/{vid}").status_int == 404
    assert vol("GET", "/v3/types").data["volume_types"][0]["name"] == "__DEFAULT__"
    # Metadata kept; os-set_bootable changes the row; bad input changes nothing.
    meta = vol("POST", "/v3/volumes", {"volume": {"size": 1, "metadata": {"k": "v"}}})
    mid = meta.data["volume"]["id"]
    assert vol("GET", f"/v3/volumes/{mid}").data["volume"]["metadata"] == {"k": "v"}
    assert vol("POST", "/v3/volumes", {"volume": {"size": 1, "metadata": {"k": 1}}}
               ).status_int == 400
    assert vol("POST", f"/v3/volumes/{mid}/action", {"os-set_bootable": {"bootable": "maybe"}}
               ).status_int == 400
    assert vol("POST", f"/v3/volumes/{mid}/action", {"os-frobnicate": {}}).status_int == 400
    assert vol("GET", f"/v3/volumes/{mid}").data["volume"]["bootable"] == "false"
    assert vol("POST", f"/v3/volumes/{mid}/action", {"os-set_bootable": {"bootable": True}}
               ).status_int == 200
    assert vol("GET", f"/v3/volumes/{mid}").data["volume"]["bootable"] == "true"
    assert vol("POST", f"/v3/p2/volumes/{mid}/action", {"os-set_bootable": {"bootable": False}},
               token=BOB).status_int == 404
    assert vol("GET", "/v3/volumes", headers={"OpenStack-API-Version": "volume 4.0"}
               ).status_int == 406


def test_subnet_delete(apis):
    net = apis["network"]
    mine = net("POST", "/v2.0/networks", {"network": {"name": "mine"}}).data["network"]
    first, second = (net("POST", "/v2.0/subnets", {"subnet": {
        "network_id": mine["id"], "cidr": cidr, "ip_version": 4}}).data["subnet"]["id"]
        for cidr in ("192.168.7.0/24", "192.168.8.0/24"))
    port = net("POST", "/v2.0/ports", {"port": {"network_id": mine["id"], "fixed_ips": [
        {"subnet_id": first}]}}).data["port"]
    assert [ip["subnet_id"] for ip in port["fixed_ips"]] == [first]

    # A port has an address from it: 409, and the subnet stays.
    busy = net("DELETE", f"/v2.0/subnets/{first}")
    assert busy.status_int == 409 and busy.data["NeutronError"]["type"] == "SubnetInUse"
    # Another project: not found; the shared-network rules as for a network.
    assert net("DELETE", f"/v2.0/subnets/{second}", token=BOB).status_int == 404
    assert net("DELETE", f"/v2.0/subnets/{second}").status_int == 204
    assert net("GET", f"/v2.0/subnets/{second}").status_int == 404
    assert net("GET", f"/v2.0/networks/{mine['id']}").data["network"]["subnets"] == [first]
    assert net("DELETE", f"/v2.0/subnets/{second}").status_int == 404

    assert net("DELETE", f"/v2.0/ports/{port['id']}").status_int == 204
    assert net("DELETE", f"/v2.0/subnets/{first}").status_int == 204
    assert net("GET", f"/v2.0/networks/{mine['id']}").data["network"]["subnets"] == []
    # A new port on the network gets no address (no subnet left).
    bare = net("POST", "/v2.0/ports", {"port": {"network_id": mine["id"]}})
    assert bare.status_int == 201 and bare.data["port"]["fixed_ips"] == []


def test_image_list_by_property_sorted_and_image_tasks(apis):
    img = apis["image"]
    ids = [img("POST", "/v2/images", {"name": f"b{i}", "image_type": "backup",
                                      "backup_type": "daily"}).data["id"] for i in range(3)]
    img("POST", "/v2/images", {"name": "snap", "image_type": "snapshot"})
    listed = img("GET", "/v2/images?image_type=backup&backup_type=daily"
                 "&sort_key=created_at&sort_dir=asc").data["images"]
    assert [i["id"] for i in listed] == ids
    listed = img("GET", "/v2/images?image_type=backup&sort_key=name&sort_dir=desc").data
    assert [i["name"] for i in listed["images"]] == ["b2", "b1", "b0"]
    assert img("GET", "/v2/images?sort_key=nope").status_int == 400
    assert img("GET", f"/v2/images/{ids[0]}/tasks").data == {"tasks": []}
    assert img("GET", f"/v2/images/{ids[0]}/tasks", token=BOB).status_int == 404
