"""Real guests over QMP: boot, check from inside, power off, boot again from the same
disk; live-migrate between two hosts of this machine with the disk copied."""
import re
import time

import pytest

from novella.virt import guest_image
from novella.virt.guest_probe import GuestProbe
from novella.virt.qemu.process import Disk
from tests.real_guest.conftest import guest_spec

pytestmark = pytest.mark.real_guest

COUNTER = re.compile(r"novella-counter (\S+) (\d+)")


def counters(guest):
    return [(boot, int(n)) for boot, n in COUNTER.findall(guest.console_output())]


def wait_counter(guest, not_boot=None, timeout=180):
    """The guest's last counter line (boot id, count) once it prints one of a boot other
    than ``not_boot`` (its console log keeps earlier boots' lines)."""
    deadline = time.monotonic() + timeout
    while not [c for c in counters(guest) if c[0] != not_boot]:
        assert time.monotonic() < deadline, guest.console_output()[-2000:] or guest.log_tail()
        time.sleep(0.2)
    return counters(guest)[-1]


def test_boot_config_drive_probe_and_a_file_that_survives_power_off(tmp_path, qemu_hosts,
                                                                     built_guest):
    host = qemu_hosts("host1")
    drive = guest_image.build_config_drive(
        str(tmp_path / "config.iso"), {"uuid": "vm1", "hostname": "vm-one"},
        "#!/bin/sh\necho from-user-data > /root/user-data-ran\n")
    config = Disk(drive, format="raw", readonly=True)
    guest = host.start(guest_spec(host, built_guest, "vm1", extra_disks=(config,)))
    boot_id, _ = wait_counter(guest)
    assert "source=config-drive" in guest.console_output()
    probe = GuestProbe(guest.probe_socket)
    assert probe.check("hostname").strip() == "vm-one"
    assert probe.check("cat /root/user-data-ran").strip() == "from-user-data"
    assert probe.run("exit 3") == (3, "")
    probe.check("echo kept-on-disk > /root/mark && sync")
    guest.pause()
    assert guest.status() == "paused"
    guest.resume()
    assert guest.status() == "running"

    assert guest.power_off(timeout=60), "the guest did not power off on the ACPI button"
    assert guest.status() == "shutoff"

    guest = host.start(guest_spec(host, built_guest, "vm1"))
    second_boot, _ = wait_counter(guest, not_boot=boot_id)
    assert second_boot != boot_id
    assert GuestProbe(guest.probe_socket).check("cat /root/mark").strip() == "kept-on-disk"


def test_live_migration_between_two_hosts_keeps_the_guest_running(qemu_hosts, built_guest):
    source_host, dest_host = qemu_hosts("src"), qemu_hosts("dest")
    source = source_host.start(guest_spec(source_host, built_guest, "vm2"))
    boot_id, _ = wait_counter(source)
    GuestProbe(source.probe_socket).check("echo before-migration > /root/mark && sync")
    before = counters(source)[-1][1]

    dest = dest_host.start(guest_spec(dest_host, built_guest, "vm2"), incoming="defer")
    assert dest.status() == "inmigrate"
    uri = f"unix:{dest.run_dir}/migrate.sock"
    dest.migrate_incoming(uri)
    seen = []
    source.migrate(uri, copy_disks=True)
    done = source.wait_migration(timeout=120, interval=0.05, progress=seen.append)

    assert done.status == "completed", done.error
    assert done.memory_total >= 256 << 20 and done.memory_remaining == 0
    assert any(p.memory_total and p.disk_total for p in seen)  # figures while it ran
    assert (source.status(), dest.status()) == ("postmigrate", "running")
    # The same boot, counting on, on the destination; the disk came along.
    assert GuestProbe(dest.probe_socket).check("cat /root/mark").strip() == "before-migration"
    deadline = time.monotonic() + 30
    while not counters(dest) or counters(dest)[-1][1] <= before:
        assert time.monotonic() < deadline, dest.console_output()[-1000:]
        time.sleep(0.2)
    assert {boot for boot, _ in counters(dest)} == {boot_id}
    source.destroy()
    assert source.status() == "shutoff" and dest.status() == "running"
