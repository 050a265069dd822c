"""Volume actions through python-cinderclient on an all-in-one: os-extend of an
available volume, and of an attached one from 3.42 with the volume-extended
event the Compute API takes for the server's host."""
import pytest
from cinderclient import api_versions, exceptions as cinder_exc
from cinderclient.v3 import client as cinder_client
from keystoneauth1 import session as ks_session, token_endpoint
from wsgi_intercept.interceptor import RequestsInterceptor

from tests.functional.api_services.test_volume_attachments import ADMIN, _call, aio  # noqa: F401


def _cinder(version, token="alice:p1", project="p1"):
    auth = token_endpoint.Token(f"http://volume.test:8776/v3/{project}", token)
    return cinder_client.Client(session=ks_session.Session(auth=auth),
                                api_version=api_versions.APIVersion(version))


@pytest.fixture
def cinder(aio):  # noqa: F811
    with RequestsInterceptor(lambda: aio.volume_api_app, host="volume.test", port=8776):
        yield _cinder


def _server_with_volume(aio, cinder):  # noqa: F811
    status, body = _call(aio.compute_api_app, "POST", "/v2.1/servers", {"server": {
        "name": "vm", "flavorRef": "1", "imageRef": aio.demo_image["id"],
        "networks": "auto"}}, headers={"OpenStack-API-Version": "compute 2.79"})
    assert status == 202, body
    sid = body["server"]["id"]
    aio.wait_idle()
    vol = cinder("3.0", ADMIN, "admin").volumes.create(1, name="data")
    status, body = _call(aio.compute_api_app, "POST", f"/v2.1/servers/{sid}/os-volume_attachments",
                         {"volumeAttachment": {"volumeId": vol.id}})
    assert status == 200, body
    aio.wait_idle()
    return sid, vol.id


def test_extend_available_and_bad_sizes(aio, cinder):  # noqa: F811
    c = cinder("3.0")
    vol = c.volumes.create(1, name="v")
    c.volumes.extend(vol, 3)
    assert c.volumes.get(vol.id).size == 3
    assert aio.volume_api.get(None, vol.id)["size"] == 3
    for bad in (3, 2, "big"):
        with pytest.raises(cinder_exc.BadRequest):
            c.volumes.extend(vol, bad)
    assert aio.volume_api.get(None, vol.id)["size"] == 3
    # Another project's volume is not found, and stays as it was.
    with pytest.raises(cinder_exc.NotFound):
        cinder("3.0", "bob:p2", "p2").volumes.extend(vol, 5)
    assert aio.volume_api.get(None, vol.id)["size"] == 3


def test_extend_in_use_from_3_42_sends_volume_extended(aio, cinder):  # noqa: F811
    sid, vid = _server_with_volume(aio, cinder)
    admin = cinder("3.41", ADMIN, "admin")
    assert admin.volumes.get(vid).status == "in-use"
    with pytest.raises(cinder_exc.BadRequest):
        admin.volumes.extend(vid, 2)
    assert aio.volume_api.get(None, vid)["size"] == 1

    sent, send = [], aio.volume_api.compute_events
    aio.volume_api.compute_events = lambda events: sent.append((events, send(events)))
    cinder("3.42", ADMIN, "admin").volumes.extend(vid, 2)
    v = aio.volume_api.get(None, vid)
    assert (v["size"], v["status"]) == (2, "in-use")
    assert [a["server_id"] for a in v["attachments"]] == [sid]
    # The Compute API took the event for the server the volume is attached to.
    [(events, answer)] = sent
    assert events == [{"name": "volume-extended", "server_uuid": sid, "tag": vid}]
    assert [(e["server_uuid"], e["tag"], e["code"]) for e in answer["events"]] == \
        [(sid, vid, 200)]


def test_transfer_between_projects(aio, cinder):  # noqa: F811
    alice, bob = cinder("3.0"), cinder("3.0", "bob:p2", "p2")
    vol = alice.volumes.create(1, name="moving")
    alice.volume_snapshots.create(vol.id, name="snap")
    t = alice.transfers.create(vol.id, name="to-bob")
    assert t.auth_key and t.volume_id == vol.id
    assert alice.volumes.get(vol.id).status == "awaiting-transfer"
    assert [x.id for x in alice.transfers.list()] == [t.id]
    assert bob.transfers.list() == []
    # The wrong key is refused and changes nothing.
    with pytest.raises(cinder_exc.BadRequest):
        bob.transfers.accept(t.id, "wrong")
    v = aio.volume_api.get(None, vol.id)
    assert (v["project_id"], v["status"]) == ("p1", "awaiting-transfer")
    accepted = bob.transfers.accept(t.id, t.auth_key)
    assert accepted.volume_id == vol.id
    v = aio.volume_api.get(None, vol.id)
    assert (v["project_id"], v["status"]) == ("p2", "available")
    assert [s["project_id"] for s in aio.volume_api.list_snapshots(None)] == ["p2"]
    assert bob.volumes.get(vol.id).name == "moving"
    with pytest.raises(cinder_exc.NotFound):
        alice.volumes.get(vol.id)
    assert alice.transfers.list() == [] and aio.volume_api.list_transfers(None) == []
    with pytest.raises(cinder_exc.NotFound):
        alice.transfers.accept(t.id, t.auth_key)

    # A transfer deleted gives the volume back; an attached volume cannot be offered.
    t2 = bob.transfers.create(vol.id)
    bob.transfers.delete(t2.id)
    assert aio.volume_api.get(None, vol.id)["status"] == "available"
    assert aio.volume_api.list_transfers(None) == []
    sid, attached = _server_with_volume(aio, cinder)
    with pytest.raises(cinder_exc.BadRequest):
        cinder("3.0", ADMIN, "admin").transfers.create(attached)
    assert aio.volume_api.list_transfers(None) == []
    # The 3.55 path serves the same transfers.
    t3 = cinder("3.55", "bob:p2", "p2").transfers.create(vol.id)
    assert [x.id for x in cinder("3.57", "bob:p2", "p2").transfers.list()] == [t3.id]
