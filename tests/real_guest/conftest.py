"""Real guests under TCG: the guest image built once per test process.

The QEMU and image-building tools come from README.md's Debian packages. When
they are missing these tests skip with the reason, and fail when ``CI=true``
(tests/backends.py).
"""
import os
import shutil

import pytest

from novella.virt import guest_image
from tests.backends import _unavailable


def require_tools():
    missing = guest_image.missing_tools() + [
        t for t in ("qemu-system-x86_64", "xorriso") if shutil.which(t) is None]
    try:
        guest_image.find_kernel()
    except guest_image.GuestImageError as exc:
        missing.append(str(exc))
    if missing:
        _unavailable("QEMU and the guest image's tools", "missing " + ", ".join(missing))


@pytest.fixture(scope="session")
def built_guest(tmp_path_factory):
    require_tools()
    return guest_image.build(str(tmp_path_factory.mktemp("guest-image")))


@pytest.fixture
def qemu_hosts(tmp_path, built_guest):
    """make(name) -> a Host with its own instances directory under tmp_path; every
    guest of every host made is destroyed at the end, also when the test failed."""
    from novella.virt.qemu.process import Host
    hosts = []

    def make(name):
        host = Host(str(tmp_path / name))
        hosts.append(host)
        return host

    yield make
    for host in hosts:
        for name in os.listdir(host.instances_path):
            if name != "_base":
                host.guest(name).destroy()
        shutil.rmtree(host.run_dir, ignore_errors=True)


def guest_spec(host, image, name, memory_mib=256, extra_disks=()):
    """The spec of guest ``name`` on ``host``: the image cached there, its root disk a
    qcow2 overlay (made the first time, reused after: the guest's persistent root)."""
    from novella.virt.qemu.process import Disk, GuestSpec
    cached = {key: host.cache_image(key, lambda p, s=src: shutil.copyfile(s, p))
              for key, src in (("kernel", image.kernel), ("ramdisk", image.ramdisk),
                               ("root", image.root))}
    root = os.path.join(host.guest_dir(name), "disk")
    disk = Disk(root) if os.path.exists(root) else host.create_overlay(name, "disk",
                                                                       cached["root"])
    return GuestSpec(name, memory_mib, 1, (disk, *extra_disks), cached["kernel"],
                     cached["ramdisk"], image.command_line)
