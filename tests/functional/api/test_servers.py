"""Servers: create, list across cells, show, update, delete."""
import json

import sqlalchemy as sa

from novella.db import api_models as am, cell_models as cm
from tests.functional.api.conftest import IMAGE, NET, PORT, USED_PORT, VOLUME, INACTIVE_IMAGE, BIG_IMAGE


def _server(**kw):
    body = {"name": "web", "flavorRef": "1", "imageRef": IMAGE}
    body.update(kw)
    return {"server": body}


def test_create_writes_build_request_spec_mapping_and_casts(services_cloud):
    cloud = services_cloud
    cloud.flavor()
    resp = cloud.user.post("/servers", _server(metadata={"role": "web"}, availability_zone="nova",
                                               networks=[{"uuid": NET}], tags=["a", "b"]),
                           version="2.52")
    assert resp.status_int == 202, resp.body
    server = resp.json["server"]
    uuid = server["id"]
    assert server["adminPass"] and server["links"][0]["rel"] == "self"
    assert resp.headers["Location"].endswith("/servers/" + uuid)
    with cloud.api_db.session() as s:
        br = s.scalars(sa.select(am.BuildRequest)).one()
        spec = json.loads(s.scalars(sa.select(am.RequestSpec)).one().spec)
        im = s.scalars(sa.select(am.InstanceMapping)).one()
    inst = json.loads(br.instance)
    assert br.instance_uuid == uuid and inst["display_name"] == "web"
    assert inst["metadata"] == {"role": "web"} and json.loads(br.tags) == ["a", "b"]
    assert inst["flavor"]["memory_mb"] == 512 and inst["availability_zone"] == "nova"
    assert spec["instance_uuid"] == uuid and spec["flavor"]["flavorid"] == "1"
    assert spec["image"]["properties"] == {"hw_machine_type": "q35"}
    assert spec["availability_zone"] == "nova" and spec["is_bfv"] is False
    assert im.instance_uuid == uuid and im.cell_id is None and im.project_id == "project-a"
    cloud.wait()
    (method, kwargs, ctxt), = cloud.conductor.calls
    assert method == "schedule_and_build_instances"
    assert [b["instance_uuid"] for b in kwargs["build_requests"]] == [uuid]
    assert kwargs["request_specs"][0]["instance_uuid"] == uuid
    assert kwargs["requested_networks"] == [{"network_id": NET, "port_id": None,
                                             "fixed_ip": None, "tag": None}]
    assert kwargs["tags"] == ["a", "b"] and ctxt.project_id == "project-a"


def test_create_many_and_reservation_id(cloud):
    cloud.flavor()
    resp = cloud.user.post("/servers", _server(min_count=2, max_count=3, return_reservation_id=True))
    assert resp.status_int == 202
    rid = resp.json["reservation_id"]
    with cloud.api_db.session() as s:
        insts = [json.loads(b.instance) for b in s.scalars(sa.select(am.BuildRequest))]
    assert sorted(i["display_name"] for i in insts) == ["web-1", "web-2", "web-3"]
    assert {i["reservation_id"] for i in insts} == {rid}
    cloud.wait()
    assert len(cloud.conductor.calls[0][1]["build_requests"]) == 3


def test_boot_from_volume(services_cloud):
    cloud = services_cloud
    cloud.flavor(disk=0)
    bdm = [{"source_type": "volume", "destination_type": "volume", "uuid": VOLUME,
            "boot_index": 0, "delete_on_termination": True}]
    resp = cloud.user.post("/servers", {"server": {"name": "bfv", "flavorRef": "1",
                                                   "block_device_mapping_v2": bdm}})
    assert resp.status_int == 202, resp.body
    with cloud.api_db.session() as s:
        br = s.scalars(sa.select(am.BuildRequest)).one()
        spec = json.loads(s.scalars(sa.select(am.RequestSpec)).one().spec)
    bdms = json.loads(br.block_device_mappings)
    assert bdms[0]["volume_id"] == VOLUME and bdms[0]["boot_index"] == 0
    assert spec["is_bfv"] is True and spec["image"]["id"] is None
    show = cloud.user.get("/servers/" + resp.json["server"]["id"], version="2.3").json["server"]
    assert show["image"] == ""
    assert show["os-extended-volumes:volumes_attached"] == [{"id": VOLUME, "delete_on_termination": True}]


def _assert_refused(cloud, body, status, fault, message=None, version=None, client=None):
    before = cloud.counts()
    resp = (client or cloud.user).post("/servers", body, version=version)
    assert resp.status_int == status, resp.body
    assert resp.json[fault]["code"] == status
    if message:
        assert message in resp.json[fault]["message"], resp.json
    assert cloud.counts() == before
    cloud.wait()
    assert cloud.conductor.calls == []


def test_bad_create_requests_change_nothing(services_cloud):
    cloud = services_cloud
    cloud.flavor()
    cloud.flavor(flavorid="zero", name="zero", disk=0)
    bad = "00000000-0000-0000-0000-00000000beef"
    _assert_refused(cloud, _server(flavorRef="42"), 400, "badRequest", "Flavor 42 could not be found.")
    _assert_refused(cloud, _server(imageRef=bad), 400, "badRequest", f"Image {bad} could not be found.")
    _assert_refused(cloud, _server(imageRef=INACTIVE_IMAGE), 400, "badRequest", "is not active")
    _assert_refused(cloud, _server(imageRef=BIG_IMAGE), 400, "badRequest", "memory is too small")
    _assert_refused(cloud, _server(networks=[{"uuid": bad}]), 400, "badRequest",
                    f"Network {bad} could not be found.")
    _assert_refused(cloud, _server(networks=[{"port": bad}]), 404, "itemNotFound")
    _assert_refused(cloud, _server(networks=[{"port": USED_PORT}]), 409, "conflictingRequest")
    _assert_refused(cloud, _server(key_name="nope"), 400, "badRequest", "Invalid key_name provided.")
    _assert_refused(cloud, _server(availability_zone="mars"), 400, "badRequest",
                    "The requested availability zone is not available")
    _assert_refused(cloud, {"server": {"flavorRef": "1", "imageRef": IMAGE}}, 400, "badRequest",
                    "'name' is a required property")
    _assert_refused(cloud, _server(bogus=1), 400, "badRequest", "Additional properties")
    _assert_refused(cloud, {"server": {"name": "x", "flavorRef": "1"}}, 400, "badRequest",
                    "Block Device Mapping is Invalid")
    _assert_refused(cloud, {"server": {"name": "x", "flavorRef": "1", "imageRef": IMAGE}}, 400,
                    "badRequest", "'networks' is a required property", version="2.37")
    _assert_refused(cloud, _server(networks="auto"), 400, "badRequest", version="2.1")
    _assert_refused(cloud, _server(min_count=3, max_count=2), 400, "badRequest")
    _assert_refused(cloud, _server(user_data="not base64!"), 400, "badRequest")
    _assert_refused(cloud, _server(flavorRef="zero"), 403, "forbidden", "zero disk")
    _assert_refused(cloud, _server(availability_zone="nova:host1"), 403, "forbidden")
    _assert_refused(cloud, _server(), 403, "forbidden", client=cloud.reader)
    _assert_refused(cloud, _server(block_device_mapping_v2=[
        {"source_type": "volume", "destination_type": "volume", "uuid": bad, "boot_index": 1}]),
        400, "badRequest", "failed to get volume")
    before = cloud.counts()
    resp = cloud.user.request("POST", "/servers", b"{not json")
    assert resp.status_int == 400 and cloud.counts() == before


def test_key_name_and_port(services_cloud):
    cloud = services_cloud
    cloud.flavor()
    assert cloud.user.post("/os-keypairs", {"keypair": {
        "name": "k", "public_key": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGXgw8W4Ebl80ncU1WbY7/IrXoRkCwPFIeiDMxf5sTX0 me@host"}}).status_int == 200
    resp = cloud.user.post("/servers", _server(key_name="k", networks=[{"port": PORT}]))
    assert resp.status_int == 202, resp.body
    with cloud.api_db.session() as s:
        inst = json.loads(s.scalars(sa.select(am.BuildRequest)).one().instance)
    assert inst["key_name"] == "k" and inst["key_data"].startswith("ssh-ed25519")
    cloud.wait()
    assert cloud.conductor.calls[0][1]["requested_networks"][0]["port_id"] == PORT


def test_show_build_request_and_cell_instance(cloud):
    cloud.flavor()
    uuid = cloud.user.post("/servers", _server()).json["server"]["id"]
    show = cloud.user.get("/servers/" + uuid, version="2.47").json["server"]
    assert show["status"] == "BUILD" and show["OS-EXT-STS:task_state"] == "scheduling"
    assert show["flavor"]["ram"] == 512 and show["flavor"]["original_name"] == "m1.small"
    cell_uuid = cloud.instance("cell2", host="h1", name="db", tags=["x"])
    show = cloud.user.get("/servers/" + cell_uuid, version="2.26").json["server"]
    assert show["status"] == "ACTIVE" and show["tags"] == ["x"] and show["hostId"]
    assert "OS-EXT-SRV-ATTR:host" not in show
    admin_show = cloud.admin.get("/servers/" + cell_uuid).json["server"]
    assert admin_show["OS-EXT-SRV-ATTR:host"] == "h1"


def test_other_projects_server_is_404(cloud):
    uuid = cloud.instance("cell1", project="project-b", user="bob", host="h1")
    for resp in (cloud.user.get("/servers/" + uuid),
                 cloud.user.put("/servers/" + uuid, {"server": {"name": "mine"}}),
                 cloud.user.delete("/servers/" + uuid),
                 cloud.user.post(f"/servers/{uuid}/action", {"os-stop": None})):
        assert resp.status_int == 404
        assert resp.json["itemNotFound"]["message"] == f"Instance {uuid} could not be found."
    with cloud.db("cell1").session() as s:
        inst = s.scalars(sa.select(cm.Instance)).one()
    assert inst.display_name == "vm" and inst.task_state is None
    assert cloud.count(cloud.db("cell1"), cm.InstanceAction) == 0
    assert cloud.admin.get("/servers/" + uuid).status_int == 200


def test_update_name_and_description(cloud):
    uuid = cloud.instance("cell1", host="h1")
    resp = cloud.user.put("/servers/" + uuid, {"server": {"name": "renamed", "description": "d"}},
                          version="2.19")
    assert resp.status_int == 200
    assert resp.json["server"]["name"] == "renamed" and resp.json["server"]["description"] == "d"
    with cloud.db("cell1").session() as s:
        inst = s.scalars(sa.select(cm.Instance)).one()
    assert (inst.display_name, inst.display_description) == ("renamed", "d")
    resp = cloud.user.put("/servers/" + uuid, {"server": {"description": "d"}}, version="2.18")
    assert resp.status_int == 400


def test_delete_build_request_removes_it_and_its_mapping(cloud):
    cloud.flavor()
    uuid = cloud.user.post("/servers", _server()).json["server"]["id"]
    assert cloud.user.delete("/servers/" + uuid).status_int == 204
    for model in (am.BuildRequest, am.InstanceMapping, am.RequestSpec):
        assert cloud.count(cloud.api_db, model) == 0
    assert cloud.user.get("/servers/" + uuid).status_int == 404


def test_delete_instance_on_host_casts_terminate(cloud):
    cloud.compute_host("cell1", "h1")
    uuid = cloud.instance("cell1", host="h1")
    resp = cloud.user.delete("/servers/" + uuid)
    assert resp.status_int == 204
    cloud.wait()
    with cloud.db("cell1").session() as s:
        inst = s.scalars(sa.select(cm.Instance)).one()
        action = s.scalars(sa.select(cm.InstanceAction)).one()
    assert inst.task_state == "deleting" and inst.deleted == 0
    assert action.action == "delete" and action.project_id == "project-a"
    (method, kwargs, _ctxt), = cloud.computes["cell1"].calls
    assert method == "terminate_instance" and kwargs["instance_uuid"] == uuid
    with cloud.api_db.session() as s:
        assert s.scalars(sa.select(am.InstanceMapping)).one().queued_for_delete


def test_delete_in_cell0_is_local(cloud):
    uuid = cloud.instance("cell0", vm_state="error")
    assert cloud.user.delete("/servers/" + uuid).status_int == 204
    with cloud.db("cell0").session() as s:
        inst = s.scalars(sa.select(cm.Instance)).one()
    assert inst.deleted == inst.id and inst.vm_state == "deleted" and inst.terminated_at
    with cloud.api_db.session() as s:
        assert s.scalars(sa.select(am.InstanceMapping)).one().queued_for_delete
    assert cloud.user.get("/servers/" + uuid).status_int == 404


def test_requested_destination_is_admin_only_and_must_exist(cloud):
    cloud.flavor()
    cloud.compute_host("cell2", "h2")
    v = "2.74"
    assert cloud.user.post("/servers", _server(host="h2", networks="none"), version=v).status_int == 403
    before = cloud.counts()
    resp = cloud.admin.post("/servers", _server(host="h9", networks="none"), version=v)
    assert resp.status_int == 400 and "Compute host h9 could not be found." in resp.json["badRequest"]["message"]
    assert cloud.counts() == before
    resp = cloud.admin.post("/servers", _server(host="h2", hypervisor_hostname="h2", networks="none"), version=v)
    assert resp.status_int == 202
    with cloud.api_db.session() as s:
        spec = json.loads(s.scalars(sa.select(am.RequestSpec.spec)).one())
    assert spec["requested_destination"] == {"host": "h2", "node": "h2", "cell_uuid": None}


def test_down_cell_is_skipped_when_listing(cloud):
    cloud.instance("cell1", name="up")
    with cloud.api_db.session(write=True) as s:
        cell2 = s.scalars(sa.select(am.CellMapping).where(am.CellMapping.name == "cell2")).one()
        cell2.database_connection = "sqlite:////nonexistent-dir/cell2.db"
    resp = cloud.user.get("/servers")
    assert resp.status_int == 200 and [s["name"] for s in resp.json["servers"]] == ["up"]
    cloud.conf.set_override("list_records_by_skipping_down_cells", False, group="api")
    resp = cloud.user.get("/servers")
    assert resp.status_int == 500 and "computeFault" in resp.json


def test_host_status_and_pinned_zone(cloud):
    svc = cloud.compute_host("cell1", "h1")
    uuid = cloud.instance("cell1", host="h1")
    lost = cloud.instance("cell1", host="gone-host")
    assert cloud.admin.get("/servers/" + uuid, version="2.16").json["server"]["host_status"] == "UP"
    assert "host_status" not in cloud.user.get("/servers/" + uuid, version="2.16").json["server"]
    assert cloud.admin.get("/servers/" + lost, version="2.16").json["server"]["host_status"] == "UNKNOWN"
    cloud.admin.put(f"/os-services/{svc}", {"status": "disabled"}, version="2.53")
    assert cloud.admin.get("/servers/" + uuid, version="2.16").json["server"]["host_status"] == "MAINTENANCE"
    cloud.admin.put(f"/os-services/{svc}", {"forced_down": True}, version="2.53")
    servers = cloud.admin.get("/servers/detail?all_tenants=1", version="2.16").json["servers"]
    assert {s["id"]: s["host_status"] for s in servers} == {uuid: "DOWN", lost: "UNKNOWN"}
    cloud.flavor()
    new = cloud.user.post("/servers", _server(availability_zone="nova")).json["server"]["id"]
    assert cloud.user.get("/servers/" + new, version="2.96").json["server"]["pinned_availability_zone"] == "nova"
    listed = {s["id"]: s for s in cloud.user.get("/servers/detail", version="2.96").json["servers"]}
    assert listed[new]["pinned_availability_zone"] == "nova"
    assert listed[uuid]["pinned_availability_zone"] is None


def test_host_status_of_a_page_reads_the_page_hosts_services_only(cloud):
    """A listing reads the services rows of its servers' hosts, one query per
    cell, not every compute service of the fleet."""
    for i in range(5):
        cloud.compute_host("cell1", f"h{i}")
    cloud.compute_host("cell2", "c2h")
    on_h1 = cloud.instance("cell1", host="h1")
    on_h3 = cloud.instance("cell1", host="h3")
    on_c2 = cloud.instance("cell2", host="c2h")
    seen = []

    def record(conn, cursor, statement, params, context, executemany):
        if "FROM services" in statement:
            seen.append(params)

    engines = [cloud.db(c).engine for c in ("cell1", "cell2")]
    for engine in engines:
        sa.event.listen(engine, "before_cursor_execute", record)
    try:
        servers = cloud.admin.get("/servers/detail?all_tenants=1", version="2.16").json["servers"]
    finally:
        for engine in engines:
            sa.event.remove(engine, "before_cursor_execute", record)
    assert {s["id"]: s["host_status"] for s in servers} == {
        on_h1: "UP", on_h3: "UP", on_c2: "UP"}
    hosts_read = sorted(sorted(v for v in params if str(v).startswith(("h", "c2h")))
                        for params in seen)
    assert hosts_read == [["c2h"], ["h1", "h3"]]
