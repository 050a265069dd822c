"""/os-volumes: the Compute API's proxy to the volume service (before 2.36)."""
import pytest
import sqlalchemy as sa

from novella.context import RequestContext
from novella.volume import models as vm
from novella.volume.api import VolumeAPI
from tests.schemas import synced

ALICE = RequestContext(user_id="alice", project_id="project-a", roles=["member"])


@pytest.fixture
def vol_cloud(cloud, tmp_path):
    cloud.volume_api = VolumeAPI(synced(f"sqlite:///{tmp_path}/volume.db", "volume"))
    cloud.build_app()
    return cloud


def _rows(cloud):
    with cloud.volume_api.db.session() as s:
        return {v.id: (v.size, v.volume_metadata, v.deleted)
                for v in s.scalars(sa.select(vm.Volume))}


def test_create_show_list_delete(vol_cloud):
    cloud = vol_cloud
    resp = cloud.user.post("/os-volumes", {"volume": {
        "size": 1, "display_name": "v1", "metadata": {"Type": "work"}}})
    assert resp.status_int == 200, resp.body
    vol = resp.json["volume"]
    assert (vol["displayName"], vol["size"], vol["metadata"], vol["attachments"]) == \
        ("v1", 1, {"Type": "work"}, [{}])
    assert resp.headers["Location"].endswith("/os-volumes/" + vol["id"])
    assert _rows(cloud) == {vol["id"]: (1, {"Type": "work"}, False)}
    assert cloud.reader.get(f"/os-volumes/{vol['id']}").json["volume"]["volumeType"] == \
        "__DEFAULT__"
    assert [v["id"] for v in cloud.user.get("/os-volumes/detail").json["volumes"]] == [vol["id"]]
    assert cloud.other.get("/os-volumes").json["volumes"] == []
    assert cloud.other.delete(f"/os-volumes/{vol['id']}").status_int == 404
    # Attached: shown with its server, and it cannot be deleted.
    a = cloud.volume_api.attachment_create(ALICE, vol["id"], "server-1",
                                           connector={"host": "h1"}, mountpoint="/dev/vdb")
    cloud.volume_api.attachment_complete(ALICE, a["id"])
    shown = cloud.user.get(f"/os-volumes/{vol['id']}").json["volume"]
    assert shown["attachments"] == [{"id": vol["id"], "volumeId": vol["id"],
                                     "serverId": "server-1", "device": "/dev/vdb"}]
    assert cloud.user.delete(f"/os-volumes/{vol['id']}").status_int == 400
    cloud.volume_api.attachment_delete(ALICE, a["id"])
    assert cloud.user.delete(f"/os-volumes/{vol['id']}").status_int == 202
    assert _rows(cloud)[vol["id"]][2] is True
    assert cloud.user.get(f"/os-volumes/{vol['id']}").status_int == 404
    assert cloud.user.get("/os-volumes", version="2.36").status_int == 404


def test_bad_input_creates_nothing(vol_cloud):
    cloud = vol_cloud
    for body in ({"volume": {"size": 0}}, {"volume": {"size": "abc"}}, {"volume": {}},
                 {"volume": {"size": 1, "bogus": 1}}, {"size": 1}):
        resp = cloud.user.post("/os-volumes", body)
        assert resp.status_int == 400, body
        assert "badRequest" in resp.json
    assert cloud.user.post("/os-volumes", {"volume": {
        "size": 1, "snapshot_id": "x"}}).status_int == 404
    assert cloud.reader.post("/os-volumes", {"volume": {"size": 1}}).status_int == 403
    assert cloud.user.get("/os-volumes/").status_int == 404
    assert _rows(cloud) == {}


def test_snapshots(vol_cloud):
    cloud = vol_cloud
    vol = cloud.user.post("/os-volumes", {"volume": {"size": 2}}).json["volume"]
    resp = cloud.user.post("/os-snapshots", {"snapshot": {
        "volume_id": vol["id"], "display_name": "snap"}})
    assert resp.status_int == 200, resp.body
    snap = resp.json["snapshot"]
    assert (snap["volumeId"], snap["size"], snap["status"], snap["displayName"]) == \
        (vol["id"], 2, "available", "snap")
    with cloud.volume_api.db.session() as s:
        assert [(r.volume_id, r.deleted) for r in s.scalars(sa.select(vm.Snapshot))] == \
            [(vol["id"], False)]
    assert [x["id"] for x in cloud.reader.get("/os-snapshots/detail").json["snapshots"]] == \
        [snap["id"]]
    assert cloud.other.get(f"/os-snapshots/{snap['id']}").status_int == 404
    # A volume with a snapshot cannot be deleted; bad input changes nothing.
    assert cloud.user.delete(f"/os-volumes/{vol['id']}").status_int == 400
    assert cloud.user.post("/os-snapshots", {"snapshot": {}}).status_int == 400
    assert cloud.user.post("/os-snapshots", {"snapshot": {
        "volume_id": "6ba7b810-9dad-11d1-80b4-00c04fd430c8"}}).status_int == 404
    assert cloud.user.delete(f"/os-snapshots/{snap['id']}").status_int == 202
    assert cloud.user.get(f"/os-snapshots/{snap['id']}").status_int == 404
    assert cloud.user.get("/os-snapshots").json["snapshots"] == []
    assert cloud.user.delete(f"/os-volumes/{vol['id']}").status_int == 202
