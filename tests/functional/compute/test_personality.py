"""Personality (files injected into the guest, before 2.57), through the Compute API
of an all-in-one: the files in the simulated guest after a create and a rebuild;
the injected-file quotas; bad input gets the reference's error and makes nothing."""
import base64

import pytest

from tests.functional.moves.conftest import make_cloud  # noqa: F401 - fixture

V = "2.56"


@pytest.fixture
def cloud(make_cloud):  # noqa: F811
    return make_cloud(hosts=1)


def _b64(text):
    return base64.b64encode(text.encode()).decode()


def _create(cloud, personality, version=V, **extra):
    server = {"name": "p", "flavorRef": "1", "imageRef": cloud.aio.demo_image["id"],
              "networks": "auto", "personality": personality, **extra}
    return cloud.api("POST", "/servers", {"server": server}, version=version)


def _files(cloud, sid):
    driver = cloud.aio.computes[cloud.server(sid)["OS-EXT-SRV-ATTR:host"]].driver
    return {path: base64.b64decode(data).decode()
            for path, data in driver._load(sid).get("injected_files", {}).items()}


def _servers(cloud):
    status, body = cloud.api("GET", "/servers")
    assert status == 200, body
    return body["servers"]


def test_files_are_written_into_the_guest_and_rebuild_writes_its_own(cloud):
    status, body = _create(cloud, [{"path": "/etc/motd", "contents": _b64("hello\n")},
                                   {"path": "/root/.ssh/x", "contents": _b64("key")}])
    assert status == 202, body
    sid = body["server"]["id"]
    cloud.aio.wait_idle()
    assert cloud.server(sid)["status"] == "ACTIVE"
    assert _files(cloud, sid) == {"/etc/motd": "hello\n", "/root/.ssh/x": "key"}
    status, body = cloud.action(sid, {"rebuild": {
        "imageRef": cloud.aio.demo_image["id"],
        "personality": [{"path": "rebuild.txt", "contents": _b64("Test server rebuild.")}]}},
        version=V)
    assert status == 202, body
    cloud.aio.wait_idle()
    assert cloud.server(sid)["status"] == "ACTIVE"
    # The root disk was made anew: only the rebuild's files are in it.
    assert _files(cloud, sid) == {"rebuild.txt": "Test server rebuild."}
    # A rebuild without files leaves none.
    status, body = cloud.action(sid, {"rebuild": {"imageRef": cloud.aio.demo_image["id"]}},
                                version=V)
    assert status == 202, body
    cloud.aio.wait_idle()
    assert _files(cloud, sid) == {}


def test_every_server_of_a_multiple_create_gets_the_files(cloud):
    status, body = _create(cloud, [{"path": "/a", "contents": _b64("A")}], min_count=2)
    assert status == 202, body
    cloud.aio.wait_idle()
    servers = _servers(cloud)
    assert len(servers) == 2
    for s in servers:
        assert _files(cloud, s["id"]) == {"/a": "A"}


def test_the_quotas_on_injected_files_refuse_and_make_nothing(cloud):
    limits = cloud.api("GET", "/limits", version=V)[1]["limits"]["absolute"]
    assert (limits["maxPersonality"], limits["maxPersonalitySize"]) == (5, 10240)
    six = [{"path": f"/f{i}", "contents": _b64("x")} for i in range(6)]
    status, body = _create(cloud, six)
    assert status == 403 and body["forbidden"]["message"] == "Personality file limit exceeded"
    status, body = _create(cloud, [{"path": "/" + "p" * 255, "contents": _b64("x")}])
    assert status == 403 and "path exceeds maximum 255" in body["forbidden"]["message"]
    status, body = _create(cloud, [{"path": "/big", "contents": _b64("x" * 8000)}])
    assert status == 403 and "content exceeds maximum 10240" in body["forbidden"]["message"]
    assert _servers(cloud) == []
    # Five is the limit, and is allowed.
    status, body = _create(cloud, six[:5])
    assert status == 202, body
    cloud.aio.wait_idle()
    assert len(_files(cloud, body["server"]["id"])) == 5
    # The project's quota for injected files, raised, lets six in.
    status, body = cloud.api("PUT", "/os-quota-sets/admin", {"quota_set": {"injected_files": 6}},
                             version=V)
    assert status == 200, body
    status, body = _create(cloud, six)
    assert status == 202, body
    cloud.aio.wait_idle()
    assert len(_files(cloud, body["server"]["id"])) == 6


def test_contents_not_base64_and_personality_after_2_56_are_bad_requests(cloud):
    status, body = _create(cloud, [{"path": "/etc/testfile.txt",
                                    "contents": "This is a test file."}])
    assert status == 400 and "is not a 'base64'" in body["badRequest"]["message"], body
    status, body = _create(cloud, [{"path": "/a", "contents": _b64("A")}], version="2.57")
    assert status == 400 and "personality" in body["badRequest"]["message"], body
    status, body = _create(cloud, [{"path": "/a", "contents": _b64("A"), "mode": "0644"}])
    assert status == 400, body
    assert _servers(cloud) == []


def test_a_rebuild_over_the_quota_is_refused_and_changes_nothing(cloud):
    status, body = _create(cloud, [{"path": "/a", "contents": _b64("A")}])
    sid = body["server"]["id"]
    cloud.aio.wait_idle()
    six = [{"path": f"/f{i}", "contents": _b64("x")} for i in range(6)]
    status, body = cloud.action(sid, {"rebuild": {"imageRef": cloud.aio.demo_image["id"],
                                                  "personality": six}}, version=V)
    assert status == 403, body
    server = cloud.server(sid)
    assert (server["status"], server["OS-EXT-STS:task_state"]) == ("ACTIVE", None)
    assert _files(cloud, sid) == {"/a": "A"}
