"""Real guests under TCG: the guest image built once per test process.

The QEMU and image-building tools come from README.md's Debian packages. When
they are missing these tests skip with the reason, and fail when ``CI=true``
(tests/backends.py).
"""
import contextlib
import os
import re
import shutil
import time

import pytest

from novella.virt import guest_image
from tests.backends import _unavailable

COUNTER = re.compile(r"novella-counter (\S+) (\d+)")


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


@pytest.fixture(scope="module")
def qemu_cloud(tmp_path_factory, built_guest):
    """An all-in-one (one cell, two hosts) whose hosts run real guests with the QEMU
    driver (TCG), the guest image built once for the session as its default image.
    Every guest left at the end is destroyed, also when a test failed."""
    with qemu_all_in_one(tmp_path_factory, built_guest, cells=1, hosts_per_cell=2) as cloud:
        yield cloud


@pytest.fixture(scope="module")
def qemu_cells_cloud(tmp_path_factory, built_guest):
    """The same with two cells of one host each, cross-cell moves allowed (admins)."""
    with qemu_all_in_one(tmp_path_factory, built_guest, cells=2, hosts_per_cell=1) as cloud:
        cloud.allow_cross_cell()
        yield cloud


@contextlib.contextmanager
def qemu_all_in_one(tmp_path_factory, built_guest, cells, hosts_per_cell, **groups):
    """``groups``: further {group: {option: value}} overrides."""
    from novella.allinone import AllInOne
    from novella.conf import CONF
    data = tmp_path_factory.mktemp("qemu-cloud")
    shutil.copytree(os.path.dirname(built_guest.root), data / "guest-image")
    # No periodic heartbeats without HTTP listeners: the hosts stay up for the module.
    overrides = {None: {"compute_driver": "qemu.QEMUDriver", "service_down_time": 3600},
                 "libvirt": {"virt_type": "qemu"}, **groups}
    aio = AllInOne(str(data), cells=cells, hosts_per_cell=hosts_per_cell, log=None,
                   config_overrides=overrides).start()
    try:
        yield RealCloud(aio)
    finally:
        for mgr in aio.computes.values():
            for uuid in mgr.driver.list_instances():
                mgr.driver.guest({"uuid": uuid}).destroy()
            shutil.rmtree(mgr.driver.hypervisor.run_dir, ignore_errors=True)
        aio.stop()
        for group, values in overrides.items():
            for key in values:
                CONF.clear_override(key, group=group)


class RealCloud:
    """The Compute API of a QEMU all-in-one, and its guests seen from outside and inside."""

    def __init__(self, aio):
        from tests.functional.cross_cell.conftest import CrossCellCloud
        self.aio, self.api_cloud = aio, CrossCellCloud(aio)

    def __getattr__(self, name):
        return getattr(self.api_cloud, name)

    def driver(self, server_id):
        return self.aio.computes[self.server(server_id)["OS-EXT-SRV-ATTR:host"]].driver

    def guest(self, server_id):
        """The server's QEMU guest: its process, console log and probe socket."""
        return self.driver(server_id).guest({"uuid": server_id})

    def probe(self, server_id):
        from novella.virt.guest_probe import GuestProbe
        return GuestProbe(self.guest(server_id).probe_socket)

    def action(self, server_id, body, expect=202):
        status, out = self.api("POST", f"/servers/{server_id}/action", body)
        assert status == expect, out
        self.aio.wait_idle()
        return out

    def console(self, server_id):
        return self.action(server_id, {"os-getConsoleOutput": {}}, expect=200)["output"]

    def wait_boot(self, server_id, seen=(), timeout=240):
        """The boot id of the server's guest once it prints its counter for a boot not
        ``seen`` before (read through os-getConsoleOutput: the log keeps every boot)."""
        deadline = time.monotonic() + timeout
        while True:
            new = [b for b, _ in COUNTER.findall(self.console(server_id)) if b not in seen]
            if new:
                return new[-1]
            assert time.monotonic() < deadline, self.console(server_id)[-2000:]
            time.sleep(1)

    def count(self, server_id):
        """The guest's last counter line: (boot id, count)."""
        boot, n = COUNTER.findall(self.guest(server_id).console_output())[-1]
        return boot, int(n)
