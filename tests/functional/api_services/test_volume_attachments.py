"""Attach and detach through the Compute API's os-volume_attachments, on an all-in-one.

The volume comes from the volume HTTP API; the compute host connects it,
plugs it into the (simulated) guest and records the block device mapping.
"""
import json

import pytest
import webob

from novella.allinone import AllInOne

ADMIN = "admin:admin"


def _call(app, method, path, body=None, token=ADMIN, headers=None):
    req = webob.Request.blank(path, method=method)
    req.headers["X-Auth-Token"] = token
    for k, v in (headers or {}).items():
        req.headers[k] = v
    if body is not None:
        req.body = json.dumps(body).encode()
        req.content_type = "application/json"
    resp = req.get_response(app)
    return resp.status_int, (json.loads(resp.body) if resp.body else None)


@pytest.fixture
def aio(tmp_path):
    cloud = AllInOne(str(tmp_path / "data"), cells=1, hosts_per_cell=1, log=None).start()
    yield cloud
    cloud.stop()


def test_attach_list_detach(aio):
    def compute(method, path, body=None, token=ADMIN, version="2.79"):
        return _call(aio.compute_api_app, method, "/v2.1" + path, body, token,
                     {"OpenStack-API-Version": f"compute {version}"})

    def volume(vid):
        return _call(aio.volume_api_app, "GET", f"/v3/volumes/{vid}")[1]["volume"]

    status, body = compute("POST", "/servers", {"server": {
        "name": "vm", "flavorRef": "1", "imageRef": aio.demo_image["id"], "networks": "auto"}})
    assert status == 202, body
    sid = body["server"]["id"]
    aio.wait_idle()
    host = compute("GET", f"/servers/{sid}")[1]["server"]["OS-EXT-SRV-ATTR:host"]

    status, body = _call(aio.volume_api_app, "POST", "/v3/volumes",
                         {"volume": {"size": 1, "name": "data"}})
    assert status == 202
    vid = body["volume"]["id"]

    attach = {"volumeAttachment": {"volumeId": vid, "delete_on_termination": True}}
    status, body = compute("POST", f"/servers/{sid}/os-volume_attachments", attach)
    assert status == 200, body
    assert body["volumeAttachment"] == {"id": vid, "serverId": sid, "volumeId": vid,
                                        "device": "/dev/vdb", "tag": None,
                                        "delete_on_termination": True}
    v = volume(vid)
    assert v["status"] == "in-use"
    assert [(a["server_id"], a["host_name"], a["device"]) for a in v["attachments"]] == \
        [(sid, host, "/dev/vdb")]
    assert compute("GET", f"/servers/{sid}")[1]["server"][
        "os-extended-volumes:volumes_attached"] == [{"id": vid, "delete_on_termination": True}]

    # Listing and showing; 2.89 names the attachment and the mapping.
    status, body = compute("GET", f"/servers/{sid}/os-volume_attachments", version="2.89")
    assert status == 200
    [att] = body["volumeAttachments"]
    assert att["volumeId"] == vid and "id" not in att
    assert att["attachment_id"] == v["attachments"][0]["attachment_id"] and att["bdm_uuid"]
    assert compute("GET", f"/servers/{sid}/os-volume_attachments/{vid}")[0] == 200

    # Twice is refused; another project sees no server; a missing volume is 404.
    assert compute("POST", f"/servers/{sid}/os-volume_attachments", attach)[0] == 400
    assert compute("GET", f"/servers/{sid}/os-volume_attachments", token="bob:p2")[0] == 404
    missing = {"volumeAttachment": {"volumeId": "00000000-0000-4000-8000-000000000000"}}
    assert compute("POST", f"/servers/{sid}/os-volume_attachments", missing)[0] == 404

    # Detach: the volume is available again and the server lists no volume.
    assert compute("DELETE", f"/servers/{sid}/os-volume_attachments/{vid}")[0] == 202
    aio.wait_idle()
    v = volume(vid)
    assert (v["status"], v["attachments"]) == ("available", [])
    assert compute("GET", f"/servers/{sid}/os-volume_attachments")[1] == {"volumeAttachments": []}
    assert compute("DELETE", f"/servers/{sid}/os-volume_attachments/{vid}")[0] == 404

    status, body = compute("GET", f"/servers/{sid}/os-instance-actions")
    actions = [a["action"] for a in body["instanceActions"]]
    assert actions[:2] == ["detach_volume", "attach_volume"]
    for action in body["instanceActions"][:2]:
        status, detail = compute("GET", f"/servers/{sid}/os-instance-actions/{action['request_id']}")
        assert [(e["event"], e["result"]) for e in detail["instanceAction"]["events"]] == \
            [(f"compute_{action['action']}", "Success")]
