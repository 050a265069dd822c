import hashlib
import os

import pytest
import sqlalchemy as sa

from novella.image import api, models


@pytest.fixture
def images(db_url, tmp_path):
    return api.ImageAPI(db_url, str(tmp_path / "images"))


def row(images, image_id):
    with images.db.session() as s:
        return s.get(models.Image, image_id)


def test_create_upload_download(images, ctxt, tmp_path):
    image = images.create(ctxt, name="cirros", disk_format="qcow2", container_format="bare",
                          hw_disk_bus="virtio")
    assert image["status"] == "queued" and image["owner"] == "p1"
    assert image["properties"] == {"hw_disk_bus": "virtio"}
    data = b"x" * 3000
    active = images.upload(ctxt, image["id"], data)
    assert active["status"] == "active" and active["size"] == 3000
    assert active["checksum"] == hashlib.md5(data).hexdigest()
    assert active["os_hash_value"] == hashlib.sha512(data).hexdigest()
    with open(images.data_path(image["id"]), "rb") as f:
        assert f.read() == data
    assert images.download(ctxt, image["id"]) == data
    dest = images.download(ctxt, image["id"], str(tmp_path / "copy"))
    with open(dest, "rb") as f:
        assert f.read() == data
    assert [f for f in os.listdir(images.data_dir)] == [image["id"]]


def test_upload_from_path_and_only_once(images, ctxt, tmp_path):
    src = tmp_path / "disk.img"
    src.write_bytes(b"disk" * 100)
    image = images.create(ctxt, name="from-file")
    assert images.upload(ctxt, image["id"], str(src))["size"] == 400
    with pytest.raises(api.ImageConflict):
        images.upload(ctxt, image["id"], b"again")
    assert row(images, image["id"]).size == 400


def test_failed_upload_leaves_image_queued_without_file(images, ctxt):
    class Broken:
        def read(self, n):
            raise OSError("read error")

    image = images.create(ctxt, name="broken")
    with pytest.raises(OSError):
        images.upload(ctxt, image["id"], Broken())
    assert row(images, image["id"]).status == "queued"
    assert os.listdir(images.data_dir) == []
    with pytest.raises(api.ImageConflict):
        images.download(ctxt, image["id"])


def test_update_properties(images, ctxt):
    image = images.create(ctxt, name="a", properties={"os_distro": "cirros", "x": "1"})
    updated = images.update(ctxt, image["id"], properties={"hw_machine_type": "q35"},
                            remove_properties=["x"], name="b", min_ram=64)
    assert updated["name"] == "b" and updated["min_ram"] == 64
    assert row(images, image["id"]).properties == {"os_distro": "cirros", "hw_machine_type": "q35"}
    with pytest.raises(api.ImageError):
        images.update(ctxt, image["id"], status="active")


def test_delete_removes_data_and_hides_image(images, ctxt):
    image = images.create(ctxt, name="gone")
    images.upload(ctxt, image["id"], b"bytes")
    images.delete(ctxt, image["id"])
    r = row(images, image["id"])
    assert r.status == "deleted" and r.deleted and r.deleted_at is not None
    assert not os.path.exists(images.data_path(image["id"]))
    with pytest.raises(api.ImageNotFound):
        images.get(ctxt, image["id"])
    assert images.get(ctxt, image["id"], include_deleted=True)["status"] == "deleted"
    assert images.list(ctxt) == []


def test_protected_image_cannot_be_deleted(images, ctxt):
    image = images.create(ctxt, name="keep", protected=True)
    with pytest.raises(api.ImageProtected):
        images.delete(ctxt, image["id"])
    assert row(images, image["id"]).status == "queued"


def test_snapshot_records_its_server(images, ctxt):
    base = images.create(ctxt, name="base")
    snap = images.create_snapshot(ctxt, "inst-1", "snap-1", base_image_ref=base["id"],
                                  properties={"hw_disk_bus": "scsi"})
    assert snap["status"] == "queued" and snap["visibility"] == "private"
    assert snap["properties"] == {"hw_disk_bus": "scsi", "image_type": "snapshot",
                                  "instance_uuid": "inst-1", "base_image_ref": base["id"]}
    images.upload(ctxt, snap["id"], b"disk state")
    assert [i["id"] for i in images.list(ctxt, {"instance_uuid": "inst-1"})] == [snap["id"]]
    assert [i["id"] for i in images.list(ctxt, {"image_type": "snapshot", "status": "active"})] == [snap["id"]]


def test_list_respects_visibility(images, ctxt, admin):
    from novella.context import RequestContext
    other = RequestContext(user_id="u2", project_id="p2")
    images.create(ctxt, name="mine")
    images.create(other, name="theirs")
    images.create(other, name="public", visibility="public")
    assert sorted(i["name"] for i in images.list(ctxt)) == ["mine", "public"]
    assert len(images.list(admin)) == 3
    with images.db.session() as s:
        assert s.scalar(sa.select(sa.func.count()).select_from(models.Image)) == 3


def test_private_image_of_another_project_is_not_found(images, ctxt, admin):
    from novella.context import RequestContext
    other = RequestContext(user_id="u2", project_id="p2")
    private = images.create(other, name="private", visibility="private")
    public = images.create(other, name="public", visibility="public")
    with pytest.raises(api.ImageNotFound):
        images.get(ctxt, private["id"])
    assert images.get(ctxt, public["id"])["name"] == "public"
    assert images.get(admin, private["id"])["owner"] == "p2"
    assert images.get(None, private["id"])["owner"] == "p2"
