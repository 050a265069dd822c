"""A volume of the multiattach type attached to two servers on an all-in-one:
both attachments are listed, detaching one keeps the other, and a server with
the shared volume resizes."""
import pytest

from novella.allinone import AllInOne
from tests.functional.api_services.test_volume_attachments import ADMIN, _call


@pytest.fixture
def aio(tmp_path):
    cloud = AllInOne(str(tmp_path / "data"), cells=1, hosts_per_cell=2, log=None).start()
    yield cloud
    cloud.stop()


def _compute(aio, method, path, body=None, version="2.79"):  # noqa: F811
    return _call(aio.compute_api_app, method, "/v2.1" + path, body, ADMIN,
                 {"OpenStack-API-Version": f"compute {version}"})


def _volume(aio, vid):  # noqa: F811
    return _call(aio.volume_api_app, "GET", f"/v3/volumes/{vid}")[1]["volume"]


def _server(aio, name):  # noqa: F811
    status, body = _compute(aio, "POST", "/servers", {"server": {
        "name": name, "flavorRef": "1", "imageRef": aio.demo_image["id"], "networks": "none"}})
    assert status == 202, body
    return body["server"]["id"]


def test_multiattach_volume_on_two_servers(aio):  # noqa: F811
    s1, s2 = _server(aio, "a"), _server(aio, "b")
    aio.wait_idle()
    status, body = _call(aio.volume_api_app, "POST", "/v3/volumes", {
        "volume": {"size": 1, "name": "shared", "volume_type": "multiattach"}})
    assert status == 202 and body["volume"]["multiattach"] is True, body
    vid = body["volume"]["id"]
    for sid in (s1, s2):
        status, body = _compute(aio, "POST", f"/servers/{sid}/os-volume_attachments",
                                {"volumeAttachment": {"volumeId": vid}}, version="2.60")
        assert status == 200, body
        aio.wait_idle()
    v = _volume(aio, vid)
    assert v["status"] == "in-use"
    assert sorted(a["server_id"] for a in v["attachments"]) == sorted([s1, s2])
    for sid in (s1, s2):
        [att] = _compute(aio, "GET", f"/servers/{sid}/os-volume_attachments")[1][
            "volumeAttachments"]
        assert att["volumeId"] == vid

    # Resizing a server with the shared volume keeps both attachments.
    status, body = _compute(aio, "POST", f"/servers/{s1}/action", {"resize": {"flavorRef": "2"}})
    assert status == 202, body
    aio.wait_idle()
    server = _compute(aio, "GET", f"/servers/{s1}")[1]["server"]
    assert server["status"] == "VERIFY_RESIZE", server
    assert _compute(aio, "POST", f"/servers/{s1}/action", {"confirmResize": None})[0] == 204
    aio.wait_idle()
    server = _compute(aio, "GET", f"/servers/{s1}")[1]["server"]
    assert (server["status"], server["flavor"]["original_name"]) == ("ACTIVE", "m1.small"), server
    v = _volume(aio, vid)
    assert sorted(a["server_id"] for a in v["attachments"]) == sorted([s1, s2])
    assert [a["host_name"] for a in v["attachments"] if a["server_id"] == s1] == \
        [server["OS-EXT-SRV-ATTR:host"]]

    # Detaching one keeps the other.
    assert _compute(aio, "DELETE", f"/servers/{s1}/os-volume_attachments/{vid}")[0] == 202
    aio.wait_idle()
    v = _volume(aio, vid)
    assert (v["status"], [a["server_id"] for a in v["attachments"]]) == ("in-use", [s2])
    assert _compute(aio, "GET", f"/servers/{s1}/os-volume_attachments")[1] == \
        {"volumeAttachments": []}
    assert _compute(aio, "DELETE", f"/servers/{s2}/os-volume_attachments/{vid}")[0] == 202
    aio.wait_idle()
    assert (_volume(aio, vid)["status"], _volume(aio, vid)["attachments"]) == ("available", [])
