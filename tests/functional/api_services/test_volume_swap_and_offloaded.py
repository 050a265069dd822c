"""Volumes of a shelved-offloaded server, volume swap and assisted volume snapshots,
through the Compute and volume HTTP APIs of an all-in-one.

Asserted on the block device mappings (cell database), the volume service's
volumes and attachments, and the simulated guest's domain.json.
"""
import json

import pytest
import sqlalchemy as sa

from novella.allinone import AllInOne
from novella.db import cell_models as cm
from novella.db import cells as cells_mod
from novella.db import host_operations
from novella.virt import simulated
from tests.functional.api_services.test_volume_attachments import ADMIN, _call

SERVICE = {"X-Roles": "service"}


@pytest.fixture
def aio(tmp_path):
    cloud = AllInOne(str(tmp_path / "data"), cells=1, hosts_per_cell=2, log=None).start()
    yield cloud
    simulated.clear_faults()
    cloud.stop()


class Cloud:
    def __init__(self, aio):
        self.aio = aio

    def compute(self, method, path, body=None, version="2.79", token=ADMIN, headers=None):
        return _call(self.aio.compute_api_app, method, "/v2.1" + path, body, token,
                     dict(headers or {}, **{"OpenStack-API-Version": f"compute {version}"}))

    def volume_api(self, method, path, body=None, token=ADMIN):
        return _call(self.aio.volume_api_app, method, "/v3" + path, body, token)

    def volume(self, vid):
        return self.volume_api("GET", f"/volumes/{vid}")[1]["volume"]

    def new_volume(self, size=1):
        status, body = self.volume_api("POST", "/volumes", {"volume": {"size": size}})
        assert status == 202, body
        return body["volume"]["id"]

    def boot(self):
        status, body = self.compute("POST", "/servers", {"server": {
            "name": "vm", "flavorRef": "1", "imageRef": self.aio.demo_image["id"],
            "networks": "auto"}})
        assert status == 202, body
        self.aio.wait_idle()
        return body["server"]["id"]

    def server(self, sid):
        return self.compute("GET", f"/servers/{sid}")[1]["server"]

    def bdms(self, sid):
        """(volume id, device, attachment id) of the server's live volume mappings."""
        cell = cells_mod.list_cells(self.aio.api_db, include_cell0=False)[0]
        with cells_mod.cell_database(cell).read_session() as s:
            rows = s.scalars(sa.select(cm.BlockDeviceMapping).where(
                cm.BlockDeviceMapping.instance_uuid == sid,
                cm.BlockDeviceMapping.deleted == 0,
                cm.BlockDeviceMapping.volume_id.is_not(None)).order_by(
                cm.BlockDeviceMapping.id)).all()
            return [(b.volume_id, b.device_name, b.attachment_id) for b in rows]

    def cell_db(self):
        return cells_mod.cell_database(cells_mod.list_cells(self.aio.api_db,
                                                            include_cell0=False)[0])

    def domain(self, sid):
        host = self.server(sid)["OS-EXT-SRV-ATTR:host"]
        with open(simulated.driver_for(host)._domain_file(sid)) as f:
            return json.load(f)

    def live_attachments(self, vid):
        return [(a["instance"], a["status"], a["attached_host"])
                for a in self.aio.volume_api.attachment_list(None, volume_id=vid)]

    def attach(self, sid, vid, version="2.79"):
        status, body = self.compute("POST", f"/servers/{sid}/os-volume_attachments",
                                    {"volumeAttachment": {"volumeId": vid}}, version=version)
        self.aio.wait_idle()
        return status, body


@pytest.fixture
def cloud(aio):
    return Cloud(aio)


def _offload(cloud, sid):
    assert cloud.compute("POST", f"/servers/{sid}/action", {"shelve": None})[0] == 202
    cloud.aio.wait_idle()
    assert cloud.server(sid)["status"] == "SHELVED_OFFLOADED"


def test_attach_to_an_offloaded_server_is_connected_at_unshelve(cloud):
    sid = cloud.boot()
    vid = cloud.new_volume()
    _offload(cloud, sid)

    # Below 2.20 the reference's 409, and nothing changes.
    status, body = cloud.attach(sid, vid, version="2.19")
    assert status == 409 and "vm_state shelved_offloaded" in body["conflictingRequest"]["message"]
    assert cloud.bdms(sid) == [] and cloud.volume(vid)["status"] == "available"
    # A tag cannot be honoured without a host.
    status, _ = cloud.compute("POST", f"/servers/{sid}/os-volume_attachments",
                              {"volumeAttachment": {"volumeId": vid, "tag": "t"}}, version="2.79")
    assert status == 400 and cloud.bdms(sid) == []

    status, body = cloud.attach(sid, vid)
    assert status == 200, body
    assert body["volumeAttachment"]["device"] is None
    [(volume_id, device, attachment_id)] = cloud.bdms(sid)
    assert (volume_id, device) == (vid, None) and attachment_id
    # in-use, its attachment completed without a host
    assert cloud.volume(vid)["status"] == "in-use"
    assert cloud.live_attachments(vid) == [(sid, "attached", None)]
    events = cloud.compute("GET", f"/servers/{sid}/os-instance-actions")[1]["instanceActions"]
    assert events[0]["action"] == "attach_volume"

    assert cloud.compute("POST", f"/servers/{sid}/action", {"unshelve": None},
                         version="2.77")[0] == 202
    cloud.aio.wait_idle()
    server = cloud.server(sid)
    assert server["status"] == "ACTIVE"
    host = server["OS-EXT-SRV-ATTR:host"]
    [(volume_id, device, attachment_id2)] = cloud.bdms(sid)
    assert (volume_id, device, attachment_id2) == (vid, "/dev/vdb", attachment_id)
    assert cloud.live_attachments(vid) == [(sid, "attached", host)]
    assert cloud.domain(sid)["volumes"] == {vid: "/dev/vdb"}
    status, body = cloud.compute("GET", f"/servers/{sid}/os-volume_attachments/{vid}")
    assert status == 200 and body["volumeAttachment"]["device"] == "/dev/vdb"


def test_detach_from_an_offloaded_server(cloud):
    sid = cloud.boot()
    keep, gone = cloud.new_volume(), cloud.new_volume()
    # One attached while running (parked at the offload), one while offloaded that the
    # detach deletes (delete_on_termination).
    assert cloud.attach(sid, keep)[0] == 200
    _offload(cloud, sid)
    status, _ = cloud.compute("POST", f"/servers/{sid}/os-volume_attachments",
                              {"volumeAttachment": {"volumeId": gone,
                                                    "delete_on_termination": True}})
    assert status == 200
    cloud.aio.wait_idle()

    assert cloud.compute("DELETE", f"/servers/{sid}/os-volume_attachments/{keep}",
                         version="2.19")[0] == 409
    assert [b[0] for b in cloud.bdms(sid)] == [keep, gone]

    for vid in (keep, gone):
        assert cloud.compute("DELETE", f"/servers/{sid}/os-volume_attachments/{vid}")[0] == 202
    cloud.aio.wait_idle()
    assert cloud.bdms(sid) == []
    assert cloud.volume(keep)["status"] == "available" and cloud.live_attachments(keep) == []
    assert cloud.volume_api("GET", f"/volumes/{gone}")[0] == 404
    actions = cloud.compute("GET", f"/servers/{sid}/os-instance-actions")[1]["instanceActions"]
    assert [a["action"] for a in actions[:2]] == ["detach_volume", "detach_volume"]

    assert cloud.compute("POST", f"/servers/{sid}/action", {"unshelve": None})[0] == 202
    cloud.aio.wait_idle()
    assert cloud.server(sid)["status"] == "ACTIVE" and cloud.domain(sid)["volumes"] == {}


def _migrating(cloud, old, new=None):
    """The volume service moving ``old`` (to ``new``), as before it asks for a swap."""
    body = {"os-reset_status": {"migration_status": "migrating"}}
    assert cloud.volume_api("POST", f"/volumes/{old}/action", body)[0] == 202
    if new:
        body = {"os-reset_status": {"migration_status": f"target:{old}"}}
        assert cloud.volume_api("POST", f"/volumes/{new}/action", body)[0] == 202


def _swap(cloud, sid, old, new, version="2.79", headers=SERVICE):
    return cloud.compute("PUT", f"/servers/{sid}/os-volume_attachments/{old}",
                         {"volumeAttachment": {"volumeId": new}}, version=version,
                         headers=headers)


def test_swap_needs_the_service_role_and_a_migrating_volume(cloud):
    sid = cloud.boot()
    old, new, small = cloud.new_volume(size=2), cloud.new_volume(size=2), cloud.new_volume()
    assert cloud.attach(sid, old)[0] == 200
    before = cloud.bdms(sid)
    # A member may not swap; an administrator may (service_or_admin).
    assert _swap(cloud, sid, old, new, headers={"X-Roles": "member"})[0] == 403
    status, body = _swap(cloud, sid, old, new)
    assert status == 409 and "is not migrating" in body["conflictingRequest"]["message"]
    _migrating(cloud, old)
    # The new volume must exist (400: it is in the body), be as large and not attached.
    assert _swap(cloud, sid, old, "00000000-0000-4000-8000-000000000000")[0] == 400
    status, body = _swap(cloud, sid, old, small)
    assert status == 400 and "same size or larger" in body["badRequest"]["message"]
    assert _swap(cloud, sid, old, old)[0] == 400
    cloud.aio.wait_idle()
    assert cloud.bdms(sid) == before
    assert cloud.volume(old)["status"] == "in-use" and cloud.volume(new)["status"] == "available"
    assert cloud.live_attachments(new) == []
    # The server must be active (or paused or resized).
    assert cloud.compute("POST", f"/servers/{sid}/action", {"os-stop": None})[0] == 202
    cloud.aio.wait_idle()
    assert _swap(cloud, sid, old, new)[0] == 409
    assert cloud.volume(old)["status"] == "in-use" and cloud.volume(new)["status"] == "available"


def test_swap_of_a_volume_the_service_had_moved_before(cloud):
    """A volume whose last migration ended (``success``): the host swaps the two
    volumes without asking the volume service to complete anything."""
    sid = cloud.boot()
    old, new = cloud.new_volume(), cloud.new_volume(size=2)
    assert cloud.attach(sid, old)[0] == 200
    [(_, device, old_attachment)] = cloud.bdms(sid)
    body = {"os-reset_status": {"migration_status": "success"}}
    assert cloud.volume_api("POST", f"/volumes/{old}/action", body)[0] == 202

    assert _swap(cloud, sid, old, new)[0] == 202
    cloud.aio.wait_idle()
    host = cloud.server(sid)["OS-EXT-SRV-ATTR:host"]
    [(volume_id, device2, attachment_id)] = cloud.bdms(sid)
    assert (volume_id, device2) == (new, device) and attachment_id != old_attachment
    assert cloud.volume(old)["status"] == "available" and cloud.live_attachments(old) == []
    assert cloud.volume(new)["status"] == "in-use"
    assert cloud.live_attachments(new) == [(sid, "attached", host)]
    domain = cloud.domain(sid)
    assert domain["volumes"] == {new: device}
    assert domain["volume_copies"] == {new: {"from": old, "size_gb": 2}}
    status, body = cloud.compute("GET", f"/servers/{sid}/os-volume_attachments")
    assert [a["volumeId"] for a in body["volumeAttachments"]] == [new]
    assert host_operations.of_server(cloud.cell_db(), sid).get("swap_volume") is None
    actions = cloud.compute("GET", f"/servers/{sid}/os-instance-actions")[1]["instanceActions"]
    assert actions[0]["action"] == "swap_volume"
    detail = cloud.compute("GET", f"/servers/{sid}/os-instance-actions/"
                                  f"{actions[0]['request_id']}")[1]["instanceAction"]
    assert [(e["event"], e["result"]) for e in detail["events"]] == \
        [("compute_swap_volume", "Success")]


def test_swap_for_a_volume_migration_keeps_the_volume_id(cloud):
    """The volume service migrates ``old`` to ``new``: the host copies the data, the
    migration's completion makes ``old``'s id name the copy and ``new`` goes."""
    sid = cloud.boot()
    old, new = cloud.new_volume(), cloud.new_volume()
    assert cloud.attach(sid, old)[0] == 200
    [(_, device, old_attachment)] = cloud.bdms(sid)
    _migrating(cloud, old, new)

    assert _swap(cloud, sid, old, new)[0] == 202
    cloud.aio.wait_idle()
    host = cloud.server(sid)["OS-EXT-SRV-ATTR:host"]
    [(volume_id, device2, attachment_id)] = cloud.bdms(sid)
    assert (volume_id, device2) == (old, device) and attachment_id != old_attachment
    vol = cloud.volume(old)
    assert (vol["status"], vol["migration_status"]) == ("in-use", "success")
    assert [a["attachment_id"] for a in vol["attachments"]] == [attachment_id]
    assert cloud.live_attachments(old) == [(sid, "attached", host)]
    assert cloud.volume_api("GET", f"/volumes/{new}")[0] == 404
    assert cloud.domain(sid)["volumes"] == {new: device}


def test_a_failed_swap_leaves_the_old_volume_attached(cloud):
    sid = cloud.boot()
    old, new = cloud.new_volume(), cloud.new_volume()
    assert cloud.attach(sid, old)[0] == 200
    before = cloud.bdms(sid)
    _migrating(cloud, old, new)
    host = cloud.server(sid)["OS-EXT-SRV-ATTR:host"]
    simulated.inject_fault(host, "swap_volume", sid)

    assert _swap(cloud, sid, old, new)[0] == 202
    cloud.aio.wait_idle()
    assert cloud.bdms(sid) == before
    assert cloud.volume(old)["status"] == "in-use"
    assert cloud.live_attachments(old) == [(sid, "attached", host)]
    assert cloud.live_attachments(new) == []
    assert cloud.domain(sid)["volumes"] == {old: before[0][1]}
    assert cloud.volume(old)["migration_status"] == "error"
    assert host_operations.of_server(cloud.cell_db(), sid).get("swap_volume") is None
    assert cloud.server(sid)["status"] == "ACTIVE"


def test_update_delete_on_termination_from_2_85(cloud):
    sid = cloud.boot()
    vid = cloud.new_volume()
    assert cloud.attach(sid, vid)[0] == 200

    def put(body, version="2.85"):
        return cloud.compute("PUT", f"/servers/{sid}/os-volume_attachments/{vid}",
                             {"volumeAttachment": body}, version=version)

    assert put({"volumeId": vid, "delete_on_termination": True})[0] == 202
    status, body = cloud.compute("GET", f"/servers/{sid}/os-volume_attachments/{vid}",
                                 version="2.85")
    assert body["volumeAttachment"]["delete_on_termination"] is True
    # The device is not mutable; below 2.85 any PUT is a swap (the service's).
    assert put({"volumeId": vid, "device": "/dev/vdz"})[0] == 400
    assert put({"volumeId": vid, "delete_on_termination": False},
               version="2.84")[0] == 400  # not in the 2.84 schema
    assert put({"volumeId": vid}, version="2.84")[0] == 409  # a swap: not migrating
    status, body = cloud.compute("GET", f"/servers/{sid}/os-volume_attachments/{vid}",
                                 version="2.85")
    assert body["volumeAttachment"]["delete_on_termination"] is True


def test_assisted_volume_snapshots(cloud):
    sid = cloud.boot()
    vid = cloud.new_volume()
    assert cloud.attach(sid, vid)[0] == 200
    body = {"snapshot": {"volume_id": vid, "create_info": {
        "snapshot_id": "421752a6-acf6-4b2d-bc7a-119f9148cd8c", "type": "qcow2",
        "new_file": "new_file", "id": "421752a6-acf6-4b2d-bc7a-119f9148cd8c"}}}
    # The service role (or an administrator) only.
    status, _ = cloud.compute("POST", "/os-assisted-volume-snapshots", body,
                              headers={"X-Roles": "member"})
    assert status == 403
    status, resp = cloud.compute("POST", "/os-assisted-volume-snapshots", body,
                                 headers=SERVICE)
    assert status == 200, resp
    assert resp == {"snapshot": {"id": body["snapshot"]["create_info"]["id"],
                                 "volumeId": vid}}
    cloud.aio.wait_idle()
    assert cloud.domain(sid)["volume_snapshots"] == {
        "421752a6-acf6-4b2d-bc7a-119f9148cd8c": {
            "volume_id": vid, "type": "qcow2", "new_file": "new_file",
            "id": "421752a6-acf6-4b2d-bc7a-119f9148cd8c"}}
    # A volume no server has, and a bad create_info: 400.
    other = dict(body["snapshot"], volume_id=cloud.new_volume())
    assert cloud.compute("POST", "/os-assisted-volume-snapshots", {"snapshot": other},
                         headers=SERVICE)[0] == 400
    bad = {"snapshot": {"volume_id": vid, "create_info": {"snapshot_id": "x",
                                                          "type": "raw", "new_file": "f"}}}
    assert cloud.compute("POST", "/os-assisted-volume-snapshots", bad,
                         headers=SERVICE)[0] == 400

    delete = ("/os-assisted-volume-snapshots/421752a6-acf6-4b2d-bc7a-119f9148cd8c"
              "?delete_info=" + json.dumps({"volume_id": vid}).replace(" ", ""))
    assert cloud.compute("DELETE", "/os-assisted-volume-snapshots/x", headers=SERVICE)[0] == 400
    assert cloud.compute("DELETE", delete, headers=SERVICE)[0] == 204
    cloud.aio.wait_idle()
    assert cloud.domain(sid)["volume_snapshots"] == {}


def test_multiattach_volume_type(cloud):
    status, body = cloud.volume_api("GET", "/types")
    assert [t["name"] for t in body["volume_types"]] == ["__DEFAULT__", "multiattach"]
    status, body = cloud.volume_api("POST", "/volumes", {"volume": {
        "size": 1, "volume_type": "multiattach"}})
    assert status == 202 and body["volume"]["multiattach"] is True
    assert body["volume"]["volume_type"] == "multiattach"
    assert cloud.volume_api("POST", "/volumes", {"volume": {
        "size": 1, "volume_type": "gold"}})[0] == 404
    # Two servers share it.
    vid = body["volume"]["id"]
    first, second = cloud.boot(), cloud.boot()
    assert cloud.attach(first, vid)[0] == 200 and cloud.attach(second, vid)[0] == 200
    assert sorted(a[0] for a in cloud.live_attachments(vid)) == sorted([first, second])


def test_deleting_an_offloaded_server_frees_a_volume_attached_while_offloaded(cloud):
    sid = cloud.boot()
    vid = cloud.new_volume()
    _offload(cloud, sid)
    assert cloud.attach(sid, vid)[0] == 200
    assert cloud.volume(vid)["status"] == "in-use"
    assert cloud.compute("DELETE", f"/servers/{sid}")[0] == 204
    cloud.aio.wait_idle()
    assert cloud.volume(vid)["status"] == "available" and cloud.live_attachments(vid) == []
