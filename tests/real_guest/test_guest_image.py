"""The guest image: built from the installed packages, uploaded with real bytes."""
import gzip
import os
import subprocess

import pytest

from novella.context import get_admin_context
from novella.image.api import ImageAPI
from novella.virt import guest_image
from tests.schemas import synced

pytestmark = pytest.mark.real_guest


def test_build_makes_kernel_ramdisk_and_ext4_root(built_guest):
    assert os.path.getsize(built_guest.kernel) > 1 << 20
    with gzip.open(built_guest.ramdisk) as f:
        cpio = f.read()
    assert b"virtio_blk.ko" in cpio and b"switch_root" in cpio
    info = subprocess.run(["qemu-img", "info", built_guest.root], capture_output=True,
                          text=True, check=True).stdout
    assert "file format: qcow2" in info
    assert f"virtual size: {guest_image.ROOT_SIZE_MIB} MiB" in info


def test_ensure_guest_image_uploads_once_with_kernel_and_ramdisk(tmp_path, built_guest):
    images = ImageAPI(synced(f"sqlite:///{tmp_path}/image.db", "image"), str(tmp_path / "data"))
    build_dir = os.path.dirname(built_guest.root)  # already built: reused, not rebuilt
    root, created = guest_image.ensure_guest_image(images, build_dir)
    assert created and root["status"] == "active" and root["disk_format"] == "qcow2"
    assert root["size"] == os.path.getsize(built_guest.root)
    ctxt = get_admin_context()
    kernel = images.get(ctxt, root["properties"]["kernel_id"])
    ramdisk = images.get(ctxt, root["properties"]["ramdisk_id"])
    assert (kernel["disk_format"], kernel["size"]) == ("aki", os.path.getsize(built_guest.kernel))
    assert (ramdisk["disk_format"], ramdisk["status"]) == ("ari", "active")
    assert root["properties"]["os_command_line"] == built_guest.command_line
    with open(images.data_path(root["id"]), "rb") as stored, open(built_guest.root, "rb") as f:
        assert stored.read() == f.read()
    again, created = guest_image.ensure_guest_image(images, build_dir)
    assert not created and again["id"] == root["id"]
