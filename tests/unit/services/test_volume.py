import pytest

from novella.image.api import ImageAPI
from novella.volume import api, models

CONNECTOR = {"host": "host1", "initiator": "iqn.2024-01.org.novella:host1"}


@pytest.fixture
def volumes(db_url):
    return api.VolumeAPI(db_url)


def state(volumes, volume_id):
    with volumes.db.session() as s:
        v = s.get(models.Volume, volume_id)
        atts = s.query(models.VolumeAttachment).filter_by(volume_id=volume_id).all()
        return v.status, v.attach_status, sorted((a.attach_status, a.deleted) for a in atts)


def test_create_get_list_delete(volumes, ctxt):
    v = volumes.create(ctxt, 2, name="data")
    assert v["status"] == "available" and v["attach_status"] == "detached"
    assert not v["bootable"] and v["project_id"] == "p1"
    assert [x["id"] for x in volumes.list(ctxt)] == [v["id"]]
    volumes.delete(ctxt, v["id"])
    with volumes.db.session() as s:
        row = s.get(models.Volume, v["id"])
        assert row.deleted and row.status == "deleted"
    with pytest.raises(api.VolumeNotFound):
        volumes.get(ctxt, v["id"])


def test_bootable_volume_from_image(db_url, tmp_path, ctxt):
    images = ImageAPI(db_url, str(tmp_path / "images"))
    image = images.create(ctxt, name="cirros", min_disk=1, hw_disk_bus="virtio")
    volumes = api.VolumeAPI(db_url, image_api=images)
    v = volumes.create(ctxt, 1, image_id=image["id"])
    assert v["bootable"]
    assert v["volume_image_metadata"]["image_id"] == image["id"]
    assert v["volume_image_metadata"]["hw_disk_bus"] == "virtio"


def test_attach_flow(volumes, ctxt):
    v = volumes.create(ctxt, 1)
    a = volumes.attachment_create(ctxt, v["id"], "inst-1")
    assert a["status"] == "reserved" and a["connection_info"] is None
    assert state(volumes, v["id"]) == ("reserved", "reserved", [("reserved", False)])
    a = volumes.attachment_update(ctxt, a["id"], CONNECTOR, mountpoint="/dev/vdb")
    assert a["attached_host"] == "host1"
    assert a["connection_info"]["data"]["volume_id"] == v["id"]
    assert state(volumes, v["id"]) == ("attaching", "attaching", [("attaching", False)])
    volumes.attachment_complete(ctxt, a["id"])
    assert state(volumes, v["id"]) == ("in-use", "attached", [("attached", False)])
    shown = volumes.get(ctxt, v["id"])
    assert shown["attachments"][0]["server_id"] == "inst-1"
    assert shown["attachments"][0]["host_name"] == "host1"
    with pytest.raises(api.InvalidVolume):
        volumes.delete(ctxt, v["id"])
    volumes.attachment_delete(ctxt, a["id"])
    assert state(volumes, v["id"]) == ("available", "detached", [("detached", True)])
    assert volumes.attachment_list(ctxt, volume_id=v["id"]) == []


def test_attachment_create_with_connector_connects(volumes, ctxt):
    v = volumes.create(ctxt, 1)
    a = volumes.attachment_create(ctxt, v["id"], "inst-1", connector=CONNECTOR)
    assert a["status"] == "attaching" and a["connection_info"]
    volumes.attachment_complete(ctxt, a["id"])
    assert state(volumes, v["id"])[0] == "in-use"


def test_complete_without_a_connector_attaches_on_no_host(volumes, ctxt):
    """As for a shelved-offloaded server: in-use at once, connected to a host later."""
    v = volumes.create(ctxt, 1)
    a = volumes.attachment_create(ctxt, v["id"], "inst-1")
    done = volumes.attachment_complete(ctxt, a["id"])
    assert (done["status"], done["attached_host"]) == ("attached", None)
    assert state(volumes, v["id"]) == ("in-use", "attached", [("attached", False)])
    connected = volumes.attachment_update(ctxt, a["id"], CONNECTOR, mountpoint="/dev/vdb")
    assert (connected["status"], connected["attached_host"]) == ("attached", "host1")
    assert connected["connection_info"]["data"]["target_host"] == "host1"
    volumes.attachment_delete(ctxt, a["id"])
    assert state(volumes, v["id"]) == ("available", "detached", [("detached", True)])


def _attached(volumes, ctxt, size=1):
    v = volumes.create(ctxt, size)
    a = volumes.attachment_create(ctxt, v["id"], "inst-1", connector=CONNECTOR)
    volumes.attachment_complete(ctxt, a["id"])
    return v["id"], a["id"]


def test_migration_completion_keeps_the_source_id(volumes, ctxt):
    old, old_att = _attached(volumes, ctxt)
    new = volumes.create(ctxt, 2)["id"]
    with pytest.raises(api.InvalidVolume):  # the destination is not the source's target
        volumes.reset_status(ctxt, old, migration_status="migrating")
        volumes.migrate_volume_completion(ctxt, old, new)
    volumes.reset_status(ctxt, new, migration_status=f"target:{old}")
    volumes.begin_detaching(ctxt, old)
    new_att = volumes.attachment_create(ctxt, new, "inst-1", connector=CONNECTOR)["id"]
    volumes.attachment_complete(ctxt, new_att)
    volumes.attachment_delete(ctxt, old_att)
    assert volumes.migrate_volume_completion(ctxt, old, new) == {"save_volume_id": old}
    v = volumes.get(ctxt, old)
    assert (v["status"], v["migration_status"], v["size"]) == ("in-use", "success", 2)
    assert [a["attachment_id"] for a in v["attachments"]] == [new_att]
    with pytest.raises(api.VolumeNotFound):
        volumes.get(ctxt, new)
    # Asked again once it ended: the same answer, nothing changes.
    assert volumes.migrate_volume_completion(ctxt, old, new) == {"save_volume_id": old}
    assert volumes.get(ctxt, old)["attachments"] == v["attachments"]


def test_migration_completion_in_error_and_between_two_volumes(volumes, ctxt):
    old, _ = _attached(volumes, ctxt)
    new = volumes.create(ctxt, 1)["id"]
    # Neither migrating: a swap between two volumes keeps the new one.
    assert volumes.migrate_volume_completion(ctxt, old, new) == {"save_volume_id": new}
    volumes.reset_status(ctxt, old, migration_status="migrating")
    volumes.reset_status(ctxt, new, migration_status=f"target:{old}")
    volumes.attachment_create(ctxt, new, "inst-1")
    assert volumes.migrate_volume_completion(ctxt, old, new, error=True) == \
        {"save_volume_id": old}
    v = volumes.get(ctxt, old)
    assert (v["status"], v["migration_status"]) == ("in-use", "error")
    with pytest.raises(api.VolumeNotFound):
        volumes.get(ctxt, new)
    volumes.reset_status(ctxt, old, migration_status="none")
    assert volumes.get(ctxt, old)["migration_status"] is None


def test_other_server_cannot_attach_unless_multiattach(volumes, ctxt):
    v = volumes.create(ctxt, 1)
    volumes.attachment_create(ctxt, v["id"], "inst-1", connector=CONNECTOR)
    with pytest.raises(api.VolumeConflict):
        volumes.attachment_create(ctxt, v["id"], "inst-2")
    assert len(volumes.attachment_list(ctxt, volume_id=v["id"])) == 1
    shared = volumes.create(ctxt, 1, multiattach=True)
    volumes.attachment_create(ctxt, shared["id"], "inst-1")
    volumes.attachment_create(ctxt, shared["id"], "inst-2")
    assert len(volumes.attachment_list(ctxt, volume_id=shared["id"])) == 2


def test_move_keeps_volume_in_use_across_two_attachments(volumes, ctxt):
    """Source attachment stays attached while the destination's is built; confirm drops the old."""
    v = volumes.create(ctxt, 1)
    src = volumes.attachment_create(ctxt, v["id"], "inst-1", connector=CONNECTOR)
    volumes.attachment_complete(ctxt, src["id"])
    dst = volumes.attachment_create(ctxt, v["id"], "inst-1")
    assert state(volumes, v["id"]) == ("in-use", "attached", [("attached", False), ("reserved", False)])
    volumes.attachment_update(ctxt, dst["id"], {"host": "host2"})
    volumes.attachment_complete(ctxt, dst["id"])
    volumes.attachment_delete(ctxt, src["id"])
    assert state(volumes, v["id"]) == ("in-use", "attached", [("attached", False), ("detached", True)])
    [live] = volumes.attachment_list(ctxt, instance_uuid="inst-1")
    assert live["id"] == dst["id"] and live["attached_host"] == "host2"


def test_revert_deletes_the_destination_attachment(volumes, ctxt):
    v = volumes.create(ctxt, 1)
    src = volumes.attachment_create(ctxt, v["id"], "inst-1", connector=CONNECTOR)
    volumes.attachment_complete(ctxt, src["id"])
    dst = volumes.attachment_create(ctxt, v["id"], "inst-1", connector={"host": "host2"})
    volumes.attachment_delete(ctxt, dst["id"])
    assert state(volumes, v["id"])[:2] == ("in-use", "attached")
    assert [a["id"] for a in volumes.attachment_list(ctxt, volume_id=v["id"])] == [src["id"]]


def test_detaching_round_trip(volumes, ctxt):
    v = volumes.create(ctxt, 1)
    a = volumes.attachment_create(ctxt, v["id"], "inst-1", connector=CONNECTOR)
    volumes.attachment_complete(ctxt, a["id"])
    volumes.begin_detaching(ctxt, v["id"])
    assert state(volumes, v["id"])[0] == "detaching"
    volumes.roll_detaching(ctxt, v["id"])
    assert state(volumes, v["id"])[0] == "in-use"
    volumes.begin_detaching(ctxt, v["id"])
    volumes.attachment_delete(ctxt, a["id"])
    assert state(volumes, v["id"])[:2] == ("available", "detached")


def test_other_projects_volume_is_not_found(volumes, ctxt, admin):
    from novella.context import RequestContext
    v = volumes.create(RequestContext(user_id="u2", project_id="p2"), 1)
    with pytest.raises(api.VolumeNotFound):
        volumes.get(ctxt, v["id"])
    assert volumes.get(admin, v["id"])["project_id"] == "p2"


def _qcow2_image(images, ctxt, tmp_path, data, size=1 << 20):
    """An image whose bytes are a qcow2 disk of ``size`` bytes starting with ``data``."""
    import shutil
    import subprocess
    from tests.backends import _unavailable
    if shutil.which("qemu-img") is None:
        _unavailable("qemu-img", "not installed (qemu-utils)")
    raw = tmp_path / "disk.raw"
    with open(raw, "wb") as f:
        f.write(data)
        f.truncate(size)
    subprocess.run(["qemu-img", "convert", "-q", "-f", "raw", "-O", "qcow2", str(raw),
                    str(tmp_path / "disk.qcow2")], check=True)
    image = images.create(ctxt, name="disk", disk_format="qcow2", container_format="bare")
    images.upload(ctxt, image["id"], str(tmp_path / "disk.qcow2"))
    return image


def test_a_volume_made_from_an_image_holds_its_bytes_as_raw(db_url, tmp_path, ctxt):
    images = ImageAPI(db_url, str(tmp_path / "images"))
    image = _qcow2_image(images, ctxt, tmp_path, b"the image's first bytes")
    volumes = api.VolumeAPI(db_url, image_api=images, volumes_dir=str(tmp_path / "volumes"))
    v = volumes.create(ctxt, 1, image_id=image["id"])
    path = tmp_path / "volumes" / v["id"]
    assert path.stat().st_size == 1 << 30  # grown to the volume's size
    with open(path, "rb") as f:
        assert f.read(23) == b"the image's first bytes"  # raw: the disk's own bytes
    blank = volumes.create(ctxt, 1)
    assert not (tmp_path / "volumes" / blank["id"]).exists()  # made at its first connection
    with pytest.raises(api.VolumeError, match="larger than the volume"):
        big = tmp_path / "big"
        big.mkdir()
        volumes.create(ctxt, 1, image_id=_qcow2_image(images, ctxt, big, b"", (1 << 30) + 512)["id"])


def test_a_create_that_dies_writing_the_image_leaves_no_volume_and_runs_again(
        db_url, tmp_path, ctxt, monkeypatch):
    """The process dies while the image is converted: no record and no volume file
    (the bytes are written beside the file and renamed into place); the same create
    again (the caller chose and noted the id) makes the volume whole."""
    import threading
    images = ImageAPI(db_url, str(tmp_path / "images"))
    image = _qcow2_image(images, ctxt, tmp_path, b"whole")
    volumes = api.VolumeAPI(db_url, image_api=images, volumes_dir=str(tmp_path / "volumes"))
    convert, reached = api.to_raw, threading.Event()

    def dies_half_way(src, dest):
        with open(dest, "wb") as f:
            f.write(b"who")
        reached.set()
        threading.Event().wait()  # this thread never runs another statement
    monkeypatch.setattr(api, "to_raw", dies_half_way)
    threading.Thread(target=volumes.create, args=(ctxt, 1), daemon=True,
                     kwargs={"image_id": image["id"], "id": "vol-1"}).start()
    assert reached.wait(30)
    assert volumes.list(ctxt) == [] and not (tmp_path / "volumes" / "vol-1").exists()

    monkeypatch.setattr(api, "to_raw", convert)
    assert volumes.create(ctxt, 1, image_id=image["id"], id="vol-1")["bootable"]
    with open(tmp_path / "volumes" / "vol-1", "rb") as f:
        assert f.read(5) == b"whole"
