"""Server actions on the guest, through the Compute API of an all-in-one: the
server's states, the guest on its host (power state, disks, console), its
Placement allocation, the images in the image service; bad input gets the
reference's error and changes nothing."""
import os

import pytest

from novella.compute.states import power_state
from novella.virt import simulated
from tests.functional.moves.conftest import make_cloud  # noqa: F401 - fixture


@pytest.fixture
def cloud(make_cloud):  # noqa: F811
    return make_cloud(hosts=1)


def _guest(cloud, sid):
    """(the domain the host's hypervisor keeps, the guest's directory)."""
    host = cloud.host_of(sid)
    driver = cloud.aio.computes[host].driver
    return driver._load(sid), driver.instance_dir(sid)


def _act(cloud, sid, body, expect=202, **kw):
    status, resp = cloud.action(sid, body, **kw)
    assert status == expect, resp
    cloud.aio.wait_idle()
    return resp


def _state(cloud, sid):
    s = cloud.server(sid)
    return s["status"], s["OS-EXT-STS:vm_state"], s["OS-EXT-STS:task_state"]


def _books(cloud, sid):
    """The server's allocations and every provider's usages."""
    return cloud.books(sid)


def test_pause_unpause_suspend_resume(cloud):
    sid = cloud.boot()
    books = _books(cloud, sid)
    _act(cloud, sid, {"pause": None})
    assert _state(cloud, sid) == ("PAUSED", "paused", None)
    assert _guest(cloud, sid)[0]["power_state"] == power_state.PAUSED
    assert cloud.server(sid)["OS-EXT-STS:power_state"] == power_state.PAUSED
    # Bad input: pausing a paused server, suspending it; nothing changes.
    for body in ({"pause": None}, {"suspend": None}, {"resume": None}):
        status, resp = cloud.action(sid, body)
        assert status == 409 and "vm_state paused" in resp["conflictingRequest"]["message"]
    assert _guest(cloud, sid)[0]["power_state"] == power_state.PAUSED
    _act(cloud, sid, {"unpause": {}})
    assert _state(cloud, sid) == ("ACTIVE", "active", None)
    assert _guest(cloud, sid)[0]["power_state"] == power_state.RUNNING

    _act(cloud, sid, {"suspend": None})
    assert _state(cloud, sid) == ("SUSPENDED", "suspended", None)
    assert _guest(cloud, sid)[0]["power_state"] == power_state.SUSPENDED
    _act(cloud, sid, {"resume": None})
    assert _state(cloud, sid) == ("ACTIVE", "active", None)
    assert _guest(cloud, sid)[0]["power_state"] == power_state.RUNNING
    assert _books(cloud, sid) == books
    assert cloud.events(sid, "pause") == {"compute_pause_instance": "Success"}
    assert cloud.events(sid, "resume") == {"compute_resume_instance": "Success"}


def test_a_failing_hypervisor_leaves_the_server_as_it_was_with_a_fault(cloud):
    sid = cloud.boot()
    simulated.inject_fault(cloud.host_of(sid), "pause", sid)
    _act(cloud, sid, {"pause": None})
    assert _state(cloud, sid) == ("ACTIVE", "active", None)
    assert _guest(cloud, sid)[0]["power_state"] == power_state.RUNNING
    assert "injected fault in pause" in cloud.fault(sid)
    assert cloud.events(sid, "pause") == {"compute_pause_instance": "Error"}


def test_lock_keeps_other_users_out_until_unlocked(cloud):
    owner = "carol:carol"
    sid = cloud.boot(token=owner)
    _act(cloud, sid, {"lock": {"locked_reason": "maintenance"}}, version="2.73")
    status, body = cloud.api("GET", f"/servers/{sid}", version="2.73")
    assert (body["server"]["locked"], body["server"]["locked_reason"]) == (True, "maintenance")
    # The owner cannot act on a server an administrator locked.
    for action in ({"os-stop": None}, {"pause": None}, {"rebuild": {
            "imageRef": cloud.aio.demo_image["id"]}}):
        status, resp = cloud.action(sid, action, token=owner)
        assert status == 409, resp
        assert resp["conflictingRequest"]["message"] == f"Instance {sid} is locked"
    assert cloud.api("DELETE", f"/servers/{sid}", token=owner)[0] == 409
    status, resp = cloud.action(sid, {"unlock": None}, token=owner)
    assert status == 403, resp  # an administrator's lock: unlock_override
    assert _state(cloud, sid) == ("ACTIVE", "active", None)
    # From 2.73 the body's value is checked.
    status, resp = cloud.action(sid, {"lock": {"locked_reason": ""}}, version="2.73")
    assert status == 400, resp
    _act(cloud, sid, {"unlock": None})
    status, body = cloud.api("GET", f"/servers/{sid}", version="2.73")
    assert (body["server"]["locked"], body["server"]["locked_reason"]) == (False, None)
    _act(cloud, sid, {"os-stop": None}, token=owner)
    assert _state(cloud, sid)[0] == "SHUTOFF"
    # The owner's own lock: the owner unlocks it.
    _act(cloud, sid, {"lock": None}, token=owner)
    assert cloud.server(sid)["locked"] is True
    _act(cloud, sid, {"unlock": None}, token=owner)
    assert cloud.server(sid)["locked"] is False
    assert cloud.events(sid, "lock") == {"api_lock": "Success"}


def test_rescue_boots_from_the_rescue_image_and_unrescue_from_its_own_disk(cloud):
    sid = cloud.boot()
    books = _books(cloud, sid)
    status, resp = cloud.action(sid, {"rescue": {"rescue_image_ref": "0" * 8 + "-0000-4000-8000-"
                                                 + "0" * 12}})
    assert status == 400 and "is not supported" in resp["badRequest"]["message"]
    assert _state(cloud, sid) == ("ACTIVE", "active", None)
    resp = _act(cloud, sid, {"rescue": {"adminPass": "s3cret"}}, expect=200)
    assert resp == {"adminPass": "s3cret"}
    assert _state(cloud, sid) == ("RESCUE", "rescued", None)
    domain, inst_dir = _guest(cloud, sid)
    assert domain["rescued"] and domain["power_state"] == power_state.RUNNING
    head, content = simulated.read_disk(os.path.join(inst_dir, simulated.RESCUE_DISK))
    assert head["image"] == cloud.aio.demo_image["id"]
    assert content == cloud.aio.image_api.download(None, cloud.aio.demo_image["id"])
    status, resp = cloud.action(sid, {"rescue": None})
    assert status == 409, resp
    _act(cloud, sid, {"unrescue": None})
    assert _state(cloud, sid) == ("ACTIVE", "active", None)
    domain, inst_dir = _guest(cloud, sid)
    assert not domain["rescued"]
    assert not os.path.exists(os.path.join(inst_dir, simulated.RESCUE_DISK))
    assert _books(cloud, sid) == books


def _second_image(cloud, data=b"another image\n" * 32):
    api = cloud.aio.image_api
    image = api.create(None, name="other", visibility="public", disk_format="qcow2",
                       container_format="bare")
    api.upload(None, image["id"], data)
    return image["id"]


def test_rebuild_onto_another_image_on_the_same_host(cloud):
    sid = cloud.boot()
    host = cloud.host_of(sid)
    books = _books(cloud, sid)
    other = _second_image(cloud)
    status, resp = cloud.action(sid, {"rebuild": {
        "imageRef": other, "name": "rebuilt", "metadata": {"k": "v"}, "key_name": None,
        "user_data": "aGVsbG8=", "adminPass": "pw"}}, version="2.57")
    assert status == 202, resp
    assert resp["server"]["adminPass"] == "pw" and resp["server"]["user_data"] == "aGVsbG8="
    assert resp["server"]["key_name"] is None
    assert "OS-EXT-SRV-ATTR:user_data" not in resp["server"]
    cloud.aio.wait_idle()
    server = cloud.server(sid)
    assert (server["status"], server["name"], server["image"]["id"], server["metadata"]) == \
        ("ACTIVE", "rebuilt", other, {"k": "v"})
    assert cloud.host_of(sid) == host and _books(cloud, sid) == books
    domain, inst_dir = _guest(cloud, sid)
    head, content = simulated.read_disk(os.path.join(inst_dir, "disk"))
    assert (head["image"], content) == (other, b"another image\n" * 32)
    assert domain["power_state"] == power_state.RUNNING
    assert cloud.events(sid, "rebuild") == {"compute_rebuild_instance": "Success"}


def test_rebuild_of_a_stopped_server_keeps_it_stopped(cloud):
    sid = cloud.boot()
    _act(cloud, sid, {"os-stop": None})
    _act(cloud, sid, {"rebuild": {"imageRef": cloud.aio.demo_image["id"]}})
    assert _state(cloud, sid) == ("SHUTOFF", "stopped", None)
    assert _guest(cloud, sid)[0]["power_state"] == power_state.SHUTDOWN


@pytest.mark.parametrize("body, version, message", [
    ({"imageRef": "00000000-0000-4000-8000-000000000000"}, "2.79",
     "Cannot find image for rebuild"),
    ({"imageRef": "IMAGE", "key_name": "nope"}, "2.54", "Invalid key_name provided."),
    ({"imageRef": "IMAGE", "key_name": None}, "2.53", "Additional properties"),
    ({"imageRef": "IMAGE", "user_data": "not base64!"}, "2.57", "user_data"),
    ({"imageRef": "IMAGE", "hostname": "a_b"}, "2.90", "hostname"),
    ({}, "2.79", "'imageRef' is a required property"),
    ({"imageRef": "not-a-uuid"}, "2.79", "imageRef"),
    ({"imageRef": "IMAGE", "name": " padded"}, "2.79", "name"),
])
def test_bad_rebuild_changes_nothing(cloud, body, version, message):
    sid = cloud.boot()
    before = cloud.server(sid)
    body = {k: cloud.aio.demo_image["id"] if v == "IMAGE" else v for k, v in body.items()}
    status, resp = cloud.action(sid, {"rebuild": body}, version=version)
    assert status == 400 and message in resp["badRequest"]["message"], resp
    cloud.aio.wait_idle()
    after = cloud.server(sid)
    assert (after["status"], after["image"], after["updated"]) == \
        (before["status"], before["image"], before["updated"])


def test_create_image_uploads_the_root_disk(cloud):
    sid = cloud.boot()
    _act(cloud, sid, {"pause": None})
    resp = _act(cloud, sid, {"createImage": {"name": "snap", "metadata": {"a": "b"}}},
                version="2.45")
    image = cloud.aio.image_api.get(None, resp["image_id"])
    _head, disk = simulated.read_disk(os.path.join(_guest(cloud, sid)[1], "disk"))
    assert (image["status"], image["name"], image["properties"]["a"],
            image["properties"]["instance_uuid"], image["properties"]["image_type"]) == \
        ("active", "snap", "b", sid, "snapshot")
    assert cloud.aio.image_api.download(None, image["id"]) == disk
    assert _state(cloud, sid) == ("PAUSED", "paused", None)
    # Before 2.45: no body, the image's URL in the Location header.
    import webob
    req = webob.Request.blank(f"/v2.1/servers/{sid}/action", method="POST")
    req.headers.update({"X-Auth-Token": "admin:admin",
                        "OpenStack-API-Version": "compute 2.44"})
    req.json_body = {"createImage": {"name": "old"}}
    req.content_type = "application/json"
    answer = req.get_response(cloud.aio.compute_api_app)
    assert answer.status_int == 202 and not answer.body
    old_id = answer.headers["Location"].rsplit("/", 1)[-1]
    cloud.aio.wait_idle()
    assert cloud.aio.image_api.get(None, old_id)["status"] == "active"
    # Bad input: no name; a server being imaged: 409; nothing made.
    count = len(cloud.aio.image_api.list(None))
    status, resp = cloud.action(sid, {"createImage": {}})
    assert status == 400, resp
    assert len(cloud.aio.image_api.list(None)) == count


def test_a_failed_upload_deletes_the_image(cloud):
    sid = cloud.boot()
    simulated.inject_fault(cloud.host_of(sid), "snapshot", sid)
    resp = _act(cloud, sid, {"createImage": {"name": "snap"}}, version="2.45")
    assert cloud.aio.image_api.get(None, resp["image_id"], include_deleted=True)["deleted"]
    assert _state(cloud, sid) == ("ACTIVE", "active", None)


def test_create_backup_rotates_older_backups_away(cloud):
    sid = cloud.boot()
    ids = [_act(cloud, sid, {"createBackup": {"name": f"b{i}", "backup_type": "daily",
                                              "rotation": 2}}, version="2.45")["image_id"]
           for i in range(3)]
    live = {i["id"] for i in cloud.aio.image_api.list(None, {
        "instance_uuid": sid, "image_type": "backup"})}
    assert live == set(ids[1:])
    status, resp = cloud.action(sid, {"createBackup": {"name": "x", "backup_type": "daily",
                                                       "rotation": -1}})
    assert status == 400, resp
    assert _state(cloud, sid) == ("ACTIVE", "active", None)


def test_console_output_and_crash_dump(cloud):
    sid = cloud.boot()
    _act(cloud, sid, {"reboot": {"type": "HARD"}})
    resp = _act(cloud, sid, {"os-getConsoleOutput": {"length": 3}}, expect=200)
    assert len(resp["output"].split("\n")) == 3
    full = _act(cloud, sid, {"os-getConsoleOutput": {}}, expect=200)["output"]
    assert len(full.split("\n")) > 3 and "hard reboot" in full
    assert _act(cloud, sid, {"os-getConsoleOutput": {"length": -1}}, expect=200)["output"] == full
    status, resp = cloud.action(sid, {"os-getConsoleOutput": {"length": -2}})
    assert status == 400, resp
    status, resp = cloud.action(sid, {"trigger_crash_dump": None}, version="2.16")
    assert status == 400 and "no such action" in resp["badRequest"]["message"]
    _act(cloud, sid, {"trigger_crash_dump": None}, version="2.17")
    assert _guest(cloud, sid)[0]["crash_dumps"] == 1
    # The log ends with a newline: its last two "lines" are the last line and "".
    out = _act(cloud, sid, {"os-getConsoleOutput": {"length": 2}}, expect=200)["output"]
    assert "Kernel panic" in out


def test_change_password(cloud):
    import hashlib
    sid = cloud.boot()
    _act(cloud, sid, {"changePassword": {"adminPass": "n3w"}})
    assert _guest(cloud, sid)[0]["admin_password"] == hashlib.sha256(b"n3w").hexdigest()
    assert _state(cloud, sid) == ("ACTIVE", "active", None)
    simulated.inject_fault(cloud.host_of(sid), "set_admin_password", sid,
                           exc=NotImplementedError)
    status, resp = cloud.action(sid, {"changePassword": {"adminPass": "x"}})
    assert status == 501, resp
    simulated.inject_fault(cloud.host_of(sid), "set_admin_password", sid)
    status, resp = cloud.action(sid, {"changePassword": {"adminPass": "x"}})
    assert status == 409, resp
    assert _guest(cloud, sid)[0]["admin_password"] == hashlib.sha256(b"n3w").hexdigest()
    assert _state(cloud, sid) == ("ACTIVE", "active", None)


def test_soft_delete_restore_force_delete_and_reclaim(make_cloud):  # noqa: F811
    cloud = make_cloud(hosts=1, DEFAULT={"reclaim_instance_interval": 3600})
    sid = cloud.boot()
    books = _books(cloud, sid)
    assert cloud.api("DELETE", f"/servers/{sid}")[0] == 204
    cloud.aio.wait_idle()
    assert _state(cloud, sid) == ("SOFT_DELETED", "soft-delete", None)
    assert _guest(cloud, sid)[0]["power_state"] == power_state.SHUTDOWN
    assert _books(cloud, sid) == books  # kept until reclaimed
    _act(cloud, sid, {"restore": None})
    assert _state(cloud, sid) == ("ACTIVE", "active", None)
    assert _guest(cloud, sid)[0]["power_state"] == power_state.RUNNING
    status, resp = cloud.action(sid, {"restore": None})
    assert status == 409, resp

    assert cloud.api("DELETE", f"/servers/{sid}")[0] == 204
    cloud.aio.wait_idle()
    _act(cloud, sid, {"forceDelete": None})
    assert cloud.api("GET", f"/servers/{sid}")[0] == 404
    assert cloud.allocations(sid) == {}

    other = cloud.boot()
    host = cloud.host_of(other)
    assert cloud.api("DELETE", f"/servers/{other}")[0] == 204
    cloud.aio.wait_idle()
    compute = cloud.aio.computes[host]
    assert compute.reclaim_queued_deletes() == []  # not an hour old yet
    compute.conf.set_override("reclaim_instance_interval", 1)
    try:
        import time
        time.sleep(1.1)
        assert compute.reclaim_queued_deletes() == [other]
    finally:
        compute.conf.set_override("reclaim_instance_interval", 3600)
    assert cloud.api("GET", f"/servers/{other}")[0] == 404
    assert cloud.allocations(other) == {}
    assert not os.path.exists(compute.driver.instance_dir(other))


def test_image_proxy_shows_a_servers_snapshot_until_2_36(cloud):
    sid = cloud.boot()
    image_id = _act(cloud, sid, {"createImage": {"name": "snap", "metadata": {"a": "b"}}},
                    version="2.45")["image_id"]
    status, body = cloud.api("GET", f"/images/{image_id}", version="2.35")
    assert status == 200, body
    image = body["image"]
    assert (image["status"], image["progress"], image["server"]["id"], image["metadata"]["a"]) \
        == ("ACTIVE", 100, sid, "b")
    status, body = cloud.api("GET", f"/images/detail?server={sid}", version="2.35")
    assert [i["id"] for i in body["images"]] == [image_id]
    assert cloud.api("GET", f"/images/{image_id}", version="2.36")[0] == 404
    status, body = cloud.api("PUT", f"/images/{image_id}/metadata/k", {"meta": {"k": "v"}},
                             version="2.35")
    assert (status, body) == (200, {"meta": {"k": "v"}})
    assert cloud.aio.image_api.get(None, image_id)["properties"]["k"] == "v"
    status, body = cloud.api("PUT", f"/images/{image_id}/metadata/k", {"meta": {"x": "v"}},
                             version="2.35")
    assert status == 400, body
    # Another project's private image: not found; deleting it changes nothing.
    assert cloud.api("DELETE", f"/images/{image_id}", token="eve:eve",
                     version="2.35")[0] == 404
    assert cloud.api("DELETE", f"/images/{image_id}", version="2.35")[0] == 204
    assert cloud.aio.image_api.get(None, image_id, include_deleted=True)["deleted"]
    assert cloud.api("GET", f"/images/{image_id}", version="2.35")[0] == 404


def test_notifications_have_the_reference_event_types_and_payloads(cloud):
    from novella.rpc.notifier import FakeNotifications
    from tests.conformance import test_notifications as reference
    sid = cloud.boot()
    notes = FakeNotifications(cloud.aio.transport)
    bodies = [{"pause": None}, {"unpause": None}, {"suspend": None}, {"resume": None},
              {"rescue": None}, {"unrescue": None}, {"createImage": {"name": "i"}},
              {"trigger_crash_dump": None}, {"lock": None}, {"unlock": None},
              {"rebuild": {"imageRef": cloud.aio.demo_image["id"]}}]
    for body in bodies:
        assert cloud.action(sid, body)[0] in (200, 202), body
        cloud.aio.wait_idle()
    pairs = reference._pairs
    assert reference._check(notes, sid) == (
        pairs("pause") + pairs("unpause") + pairs("suspend") + pairs("resume")
        + pairs("rescue") + pairs("unrescue") + pairs("snapshot")
        + pairs("trigger_crash_dump") + [("instance.lock", reference.API),
                                         ("instance.unlock", reference.API)]
        + pairs("rebuild"))


def test_rebuild_of_a_server_in_error_whose_guest_is_gone_makes_it_anew(cloud):
    sid = cloud.boot()
    _act(cloud, sid, {"os-resetState": {"state": "error"}})
    driver = cloud.aio.computes[cloud.host_of(sid)].driver
    driver.destroy(None, {"uuid": sid})
    _act(cloud, sid, {"rebuild": {"imageRef": cloud.aio.demo_image["id"]}})
    assert _state(cloud, sid) == ("ACTIVE", "active", None)
    assert driver.get_info({"uuid": sid})["state"] == power_state.RUNNING


def test_a_paused_server_arrives_paused_after_a_live_migration(make_cloud):  # noqa: F811
    cloud = make_cloud(hosts=2)
    sid = cloud.boot()
    source = cloud.host_of(sid)
    _act(cloud, sid, {"pause": None})
    _act(cloud, sid, {"os-migrateLive": {"host": None, "block_migration": "auto"}},
         version="2.30")
    assert cloud.host_of(sid) != source
    assert _state(cloud, sid) == ("PAUSED", "paused", None)
    assert _guest(cloud, sid)[0]["power_state"] == power_state.PAUSED


def test_soft_deleted_servers_are_not_listed(make_cloud):  # noqa: F811
    cloud = make_cloud(hosts=1, DEFAULT={"reclaim_instance_interval": 3600})
    kept, gone = cloud.boot(name="kept"), cloud.boot(name="gone")
    assert cloud.api("DELETE", f"/servers/{gone}")[0] == 204
    cloud.aio.wait_idle()
    status, body = cloud.api("GET", "/servers")
    assert [s["id"] for s in body["servers"]] == [kept]
    assert cloud.server(gone)["status"] == "SOFT_DELETED"  # still shown by id


def test_a_locked_server_refuses_volume_attach_and_detach_to_its_owner(cloud):
    owner = "carol:carol"
    sid = cloud.boot(token=owner)
    volume = cloud.aio.volume_api.create(None, 1, name="v")
    _act(cloud, sid, {"lock": None})  # an administrator's lock
    status, resp = cloud.api("POST", f"/servers/{sid}/os-volume_attachments",
                             {"volumeAttachment": {"volumeId": volume["id"]}}, token=owner)
    assert status == 409 and "is locked" in resp["conflictingRequest"]["message"], resp
    assert cloud.aio.volume_api.get(None, volume["id"])["status"] == "available"


@pytest.mark.parametrize("preserve", [True, False])
def test_rebuild_keeps_the_ephemeral_disk_only_when_asked(cloud, preserve):
    flavor = cloud.flavor("eph", 1, 512, 1, **{"OS-FLV-EXT-DATA:ephemeral": 1})
    sid = cloud.boot(flavor=flavor)
    inst_dir = _guest(cloud, sid)[1]
    before = simulated.read_disk(os.path.join(inst_dir, "disk.local"))[1]
    _act(cloud, sid, {"rebuild": {"imageRef": cloud.aio.demo_image["id"],
                                  "preserve_ephemeral": preserve}})
    assert _state(cloud, sid) == ("ACTIVE", "active", None)
    after = simulated.read_disk(os.path.join(inst_dir, "disk.local"))[1]
    assert (after == before) is preserve
