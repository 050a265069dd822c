"""Volume actions through python-cinderclient on an all-in-one: os-extend of an
available volume, and of an attached one from 3.42 with the volume-extended
event the Compute API takes for the server's host; transfers; backups."""
import os

import pytest
from cinderclient import api_versions, exceptions as cinder_exc
from cinderclient.v3 import client as cinder_client
from keystoneauth1 import session as ks_session, token_endpoint
from wsgi_intercept.interceptor import RequestsInterceptor

from novella.api.volume.app import make_app
from novella.volume.api import VolumeAPI
from tests.functional.api_services.test_service_apis import noauth_conf
from tests.functional.api_services.test_volume_attachments import ADMIN, _call, aio  # noqa: F401
from tests.schemas import synced


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



@pytest.fixture
def volumes_dir_cinder(tmp_path):
    """A volume API over a service that keeps each volume as a file (``volumes``)."""
    volume_api = VolumeAPI(synced(f"sqlite:///{tmp_path}/volume.db", "volume"),
                           volumes_dir=str(tmp_path / "volumes"))
    app = make_app(noauth_conf(), volume_api)
    with RequestsInterceptor(lambda: app, host="volume.test", port=8776):
        yield _cinder, volume_api


def test_backup_and_restore_keep_the_data(volumes_dir_cinder):
    """The backup holds the volume's bytes; a restore writes them back, to the
    volume or to a new one."""
    cinder, volume_api = volumes_dir_cinder
    c = cinder("3.0")
    vol = c.volumes.create(1, name="data")
    path = os.path.join(volume_api.volumes_dir, vol.id)
    os.makedirs(volume_api.volumes_dir, exist_ok=True)
    with open(path, "wb") as f:
        f.write(b"first")
        f.truncate(1 << 30)
    backup = c.backups.create(vol.id, name="b1")
    assert [b.id for b in c.backups.list()] == [backup.id]
    shown = c.backups.get(backup.id)
    assert (shown.status, shown.size, shown.volume_id) == ("available", 1, vol.id)
    assert cinder("3.0", "bob:p2", "p2").backups.list() == []
    with pytest.raises(cinder_exc.NotFound):
        cinder("3.0", "bob:p2", "p2").backups.get(backup.id)

    with open(path, "r+b") as f:
        f.write(b"later")
    assert c.restores.restore(backup.id, vol.id).volume_id == vol.id
    with open(path, "rb") as f:
        assert f.read(5) == b"first"
    new = c.restores.restore(backup.id)
    assert new.volume_id != vol.id and volume_api.get(None, new.volume_id)["size"] == 1
    with open(os.path.join(volume_api.volumes_dir, new.volume_id), "rb") as f:
        assert f.read(5) == b"first"

    # A volume offered for transfer is not restored to; a missing backup is 404.
    c.transfers.create(vol.id)
    with pytest.raises(cinder_exc.BadRequest):
        c.restores.restore(backup.id, vol.id)
    with pytest.raises(cinder_exc.NotFound):
        c.restores.restore("00000000-0000-4000-8000-000000000000")
    assert len(volume_api.list(None)) == 2
    c.backups.delete(backup.id)
    assert c.backups.list() == [] and volume_api.list_backups(None) == []
    assert not os.path.exists(os.path.join(volume_api.volumes_dir, "backups", backup.id))
    with pytest.raises(cinder_exc.NotFound):
        c.backups.get(backup.id)


def test_backup_interrupted_after_the_copy_records_nothing(volumes_dir_cinder, monkeypatch):
    """A crash once the data is copied but before the backup is recorded leaves no
    backup and the volume as it was; the backup made again is whole."""
    cinder, volume_api = volumes_dir_cinder
    c = cinder("3.0")
    vol = c.volumes.create(1)
    os.makedirs(volume_api.volumes_dir, exist_ok=True)
    with open(os.path.join(volume_api.volumes_dir, vol.id), "wb") as f:
        f.write(b"bytes")
    from novella.volume import api as volume_mod
    copy = volume_mod.shutil.copyfile

    def copy_then_die(src, dst):
        copy(src, dst)
        raise KeyboardInterrupt   # the process ends here

    monkeypatch.setattr(volume_mod.shutil, "copyfile", copy_then_die)
    with pytest.raises(KeyboardInterrupt):
        volume_api.create_backup(None, vol.id)
    monkeypatch.setattr(volume_mod.shutil, "copyfile", copy)
    assert volume_api.list_backups(None) == []
    assert volume_api.get(None, vol.id)["status"] == "available"
    backup = c.backups.create(vol.id)
    assert [b["id"] for b in volume_api.list_backups(None)] == [backup.id]
    with open(os.path.join(volume_api.volumes_dir, "backups", backup.id), "rb") as f:
        assert f.read() == b"bytes"
