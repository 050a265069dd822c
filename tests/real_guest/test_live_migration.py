"""Live migration of real guests through the Compute API (os-migrateLive): the guest's
memory and disk copied between two QEMU hosts while it runs, checked from inside the
guest (the same boot counting on, a file kept) and on the books."""
import base64
import os
import threading
import time

import pytest

from novella.compute import teardown
from novella.conf import CONF
from novella.context import get_admin_context
from novella.virt.driver import LiveMigrationSteering
from tests.functional.moves import test_compute_crash_recovery as harness
from tests.real_guest.conftest import COUNTER

pytestmark = pytest.mark.real_guest

FIGURES = ("memory_total_bytes", "memory_processed_bytes", "memory_remaining_bytes",
           "disk_total_bytes", "disk_processed_bytes", "disk_remaining_bytes")


@pytest.fixture
def bandwidth():
    """set(MiB/s): [libvirt] live_migration_bandwidth for the test (a slow copy can be
    watched, aborted and forced)."""
    yield lambda mib: CONF.set_override("live_migration_bandwidth", mib, group="libvirt")
    CONF.clear_override("live_migration_bandwidth", group="libvirt")


def start_live_migration(cloud, server_id):
    status, body = cloud.api("POST", f"/servers/{server_id}/action",
                             {"os-migrateLive": {"host": None, "block_migration": "auto"}})
    assert status == 202, body


def in_progress(cloud, server_id):
    """The server's live migrations in progress (GET /servers/{id}/migrations)."""
    status, body = cloud.api("GET", f"/servers/{server_id}/migrations", version="2.80")
    assert status == 200, body
    return body["migrations"]


def watch_copy(cloud, server_id, until, timeout=300):
    """Every in-progress migration seen until ``until(migration)`` holds for one."""
    seen, deadline = [], time.monotonic() + timeout
    while True:
        now = in_progress(cloud, server_id)
        seen += now
        if any(until(m) for m in now):
            return seen
        assert time.monotonic() < deadline, seen[-3:]
        time.sleep(0.2)


def copying(m):
    return m["status"] == "running" and (m["memory_processed_bytes"] or 0) > 0


def counts_on(cloud, server_id, boot_id, after, timeout=120):
    """The guest's counter goes past ``after`` in the same boot; -> the console's boot ids."""
    deadline = time.monotonic() + timeout
    while True:
        counters = COUNTER.findall(cloud.guest(server_id).console_output())
        if counters and counters[-1] == (boot_id, counters[-1][1]) and \
                int(counters[-1][1]) > after:
            return {b for b, _ in counters}
        assert time.monotonic() < deadline, cloud.guest(server_id).console_output()[-1000:]
        time.sleep(0.5)


def migrations(cloud, server_id):
    """The server's migrations (os-migrations)."""
    status, body = cloud.api("GET", f"/os-migrations?instance_uuid={server_id}", version="2.59")
    assert status == 200, body
    return body["migrations"]


def books(cloud, server_id, migration_uuid):
    """{consumer: [hosts]} of the instance's and the migration's allocations."""
    names = {mgr.rt.provider_uuid: host for host, mgr in cloud.aio.computes.items()}
    return {who: sorted(names[rp] for rp in cloud.allocations(consumer))
            for who, consumer in (("instance", server_id), ("migration", migration_uuid))}


def booted(cloud, name):
    """A new server whose guest counts: (server id, boot id, its host, the other host)."""
    server_id = cloud.boot(name=name)
    boot_id = cloud.wait_boot(server_id)
    source = cloud.server(server_id)["OS-EXT-SRV-ATTR:host"]
    return server_id, boot_id, source, next(h for h in cloud.aio.computes if h != source)


def test_live_migration_moves_the_running_guest(qemu_cloud, bandwidth):
    cloud = qemu_cloud
    bandwidth(16)  # long enough a copy to be seen in GET /servers/{id}/migrations
    # A config drive with a file injected (2.56): the destination's has it too.
    status, body = cloud.api("POST", "/servers", {"server": {
        "name": "vm-live", "flavorRef": "1", "imageRef": cloud.aio.demo_image["id"],
        "networks": "auto", "config_drive": True, "personality": [
            {"path": "/root/injected",
             "contents": base64.b64encode(b"injected-before-the-move").decode()}]}},
        version="2.56")
    assert status == 202, body
    cloud.aio.wait_idle()
    server_id = body["server"]["id"]
    boot_id = cloud.wait_boot(server_id)
    source = cloud.server(server_id)["OS-EXT-SRV-ATTR:host"]
    source_guest = cloud.guest(server_id)
    cloud.probe(server_id).check("echo before-the-live-migration > /root/mark && sync")
    _, before = cloud.count(server_id)

    start_live_migration(cloud, server_id)
    seen = watch_copy(cloud, server_id, copying)
    while now := in_progress(cloud, server_id):  # until it ends
        seen += now
        time.sleep(0.2)
    cloud.aio.wait_idle()

    server = cloud.server(server_id)
    assert server["status"] == "ACTIVE", server.get("fault")
    dest = server["OS-EXT-SRV-ATTR:host"]
    assert dest != source
    running = [m for m in seen if m["status"] == "running" and m["memory_total_bytes"]]
    assert running, seen
    for m in running:
        assert m["memory_total_bytes"] >= 256 << 20, running
        assert m["memory_remaining_bytes"] <= m["memory_total_bytes"], running
    # The root disk copied too (the hosts do not share it), its figures beside the memory's.
    assert any(m["disk_total_bytes"] >= 1 << 30 for m in running), running
    (migration,) = [m for m in migrations(cloud, server_id)
                    if m["migration_type"] == "live-migration"]
    assert migration["status"] == "completed"

    # The same boot counting on, the file there: no reboot, the disk came along.
    assert cloud.probe(server_id).check("cat /root/mark").strip() == "before-the-live-migration"
    with open(os.path.join(cloud.guest(server_id).dir, "disk.config"), "rb") as f:
        assert b"injected-before-the-move" in f.read()
    assert counts_on(cloud, server_id, boot_id, before) == {boot_id}
    assert cloud.guest(server_id).status() == "running"
    # The source's QEMU and files are gone; the books hold the destination only.
    assert source_guest.pid() is None
    assert cloud.aio.computes[source].driver.list_disks() == []
    assert books(cloud, server_id, migration["uuid"]) == {"instance": [dest], "migration": []}
    cloud.api("DELETE", f"/servers/{server_id}")
    cloud.aio.wait_idle()
    assert cloud.allocations(server_id) == {}


def test_abort_keeps_the_guest_on_the_source_force_complete_finishes(qemu_cloud, bandwidth):
    cloud = qemu_cloud
    bandwidth(1)  # a copy of minutes: only an abort or a forced completion ends it
    server_id, boot_id, source, dest = booted(cloud, "vm-steer")
    dest_driver = cloud.aio.computes[dest].driver

    # Abort (2.24): the guest runs on on the source, nothing of it on the destination.
    _, before = cloud.count(server_id)
    start_live_migration(cloud, server_id)
    running = watch_copy(cloud, server_id, copying)[-1]
    assert dest_driver.list_instances() == [server_id]  # the destination's QEMU waits
    status, body = cloud.api("DELETE", f"/servers/{server_id}/migrations/{running['id']}",
                             version="2.24")
    assert status == 202, body
    cloud.aio.wait_idle()
    server = cloud.server(server_id)
    assert (server["status"], server["OS-EXT-SRV-ATTR:host"]) == ("ACTIVE", source)
    (aborted,) = [m for m in migrations(cloud, server_id) if m["id"] == running["id"]]
    assert aborted["status"] == "cancelled"
    assert dest_driver.list_disks() == []
    assert dest_driver.guest({"uuid": server_id}).pid() is None
    assert cloud.guest(server_id).status() == "running"
    assert counts_on(cloud, server_id, boot_id, before) == {boot_id}
    assert books(cloud, server_id, aborted["uuid"]) == {"instance": [source], "migration": []}

    # Force complete (2.22): the guest paused on the source so that the copy ends at
    # once; it runs on the destination, the same boot.
    _, before = cloud.count(server_id)
    start_live_migration(cloud, server_id)
    running = watch_copy(cloud, server_id, copying)[-1]
    status, body = cloud.api("POST", f"/servers/{server_id}/migrations/{running['id']}/action",
                             {"force_complete": None}, version="2.22")
    assert status == 202, body
    cloud.aio.wait_idle()
    server = cloud.server(server_id)
    assert (server["status"], server["OS-EXT-SRV-ATTR:host"]) == ("ACTIVE", dest), \
        server.get("fault")
    (forced,) = [m for m in migrations(cloud, server_id) if m["id"] == running["id"]]
    assert forced["status"] == "completed"
    assert cloud.guest(server_id).status() == "running"
    assert counts_on(cloud, server_id, boot_id, before) == {boot_id}
    assert cloud.aio.computes[source].driver.list_disks() == []
    assert books(cloud, server_id, forced["uuid"]) == {"instance": [dest], "migration": []}

    cloud.api("DELETE", f"/servers/{server_id}")
    cloud.aio.wait_idle()
    assert cloud.allocations(server_id) == {}


def live_migrated(cloud, server_id, source):
    """Live-migrate the server to the other host and wait for the move's end; -> its
    migration (completed), the server running there."""
    start_live_migration(cloud, server_id)
    cloud.aio.wait_idle()
    server = cloud.server(server_id)
    assert server["status"] == "ACTIVE", server.get("fault")
    assert server["OS-EXT-SRV-ATTR:host"] != source
    (migration,) = [m for m in migrations(cloud, server_id)
                    if m["migration_type"] == "live-migration"]
    assert migration["status"] == "completed", migration
    return migration


def volume_file(cloud, volume_id):
    with open(os.path.join(cloud.aio.volume_api.volumes_dir, volume_id), "rb") as f:
        return f.read()


def test_live_migration_beside_a_volume_copies_the_local_disks_only(qemu_cloud):
    """The root disk (the hosts' own) is mirrored to the destination; the volume, the
    same file on both hosts, is not copied: what the guest wrote there before is read
    after, and what it writes after lands in the same file."""
    cloud = qemu_cloud
    server_id, boot_id, source, dest = booted(cloud, "vm-live-volume")
    volume = cloud.aio.volume_api.create(get_admin_context(), 1, name="data")
    status, body = cloud.api("POST", f"/servers/{server_id}/os-volume_attachments",
                             {"volumeAttachment": {"volumeId": volume["id"]}})
    assert status == 200, body
    cloud.aio.wait_idle()
    probe = cloud.probe(server_id)
    deadline = time.monotonic() + 120
    while probe.run("test -b /dev/vdb")[0] != 0:
        assert time.monotonic() < deadline, "the volume did not appear in the guest"
        time.sleep(0.5)
    probe.check("echo on-the-volume | dd of=/dev/vdb conv=fsync 2>/dev/null")
    probe.check("echo on-the-root-disk > /root/mark && sync")
    _, before = cloud.count(server_id)

    migration = live_migrated(cloud, server_id, source)

    # Read from the disks, not from the guest's cache (which came with its memory).
    probe = cloud.probe(server_id)
    probe.check("sync && echo 3 > /proc/sys/vm/drop_caches")
    assert probe.check("head -c 13 /dev/vdb") == "on-the-volume"
    assert probe.check("cat /root/mark").strip() == "on-the-root-disk"
    with open(os.path.join(cloud.guest(server_id).dir, "disk"), "rb") as f:
        assert b"on-the-root-disk" in f.read()  # in the destination's overlay
    assert counts_on(cloud, server_id, boot_id, before) == {boot_id}
    probe.check("echo after-the-move | dd of=/dev/vdb bs=1 seek=4096 conv=fsync 2>/dev/null")
    assert volume_file(cloud, volume["id"])[4096:4110] == b"after-the-move"
    assert cloud.aio.computes[source].driver.list_disks() == []
    assert qemu_processes(server_id) == 1
    assert books(cloud, server_id, migration["uuid"]) == {"instance": [dest], "migration": []}
    assert [v["id"] for v in cloud.server(server_id)["os-extended-volumes:volumes_attached"]] \
        == [volume["id"]]
    cloud.api("DELETE", f"/servers/{server_id}")
    cloud.aio.wait_idle()
    assert cloud.allocations(server_id) == {} and qemu_processes(server_id) == 0


def test_live_migration_of_a_server_booted_from_a_volume(qemu_cloud):
    cloud = qemu_cloud
    status, body = cloud.api("POST", "/servers", {"server": {
        "name": "vm-live-bfv", "flavorRef": "1", "networks": "auto",
        "block_device_mapping_v2": [{
            "source_type": "image", "destination_type": "volume", "boot_index": 0,
            "uuid": cloud.aio.demo_image["id"], "volume_size": 2,
            "delete_on_termination": True}]}})
    assert status == 202, body
    cloud.aio.wait_idle()
    server_id = body["server"]["id"]
    server = cloud.server(server_id)
    assert server["status"] == "ACTIVE", server.get("fault")
    (attached,) = server["os-extended-volumes:volumes_attached"]
    boot_id = cloud.wait_boot(server_id)
    source = server["OS-EXT-SRV-ATTR:host"]
    cloud.probe(server_id).check("echo on-the-root-volume > /root/mark && sync")
    _, before = cloud.count(server_id)

    migration = live_migrated(cloud, server_id, source)
    dest = cloud.server(server_id)["OS-EXT-SRV-ATTR:host"]

    assert cloud.probe(server_id).check("cat /root/mark").strip() == "on-the-root-volume"
    assert counts_on(cloud, server_id, boot_id, before) == {boot_id}
    assert b"on-the-root-volume" in volume_file(cloud, attached["id"])
    assert not os.path.exists(os.path.join(cloud.guest(server_id).dir, "disk"))
    assert cloud.aio.computes[source].driver.list_disks() == []
    assert qemu_processes(server_id) == 1
    assert books(cloud, server_id, migration["uuid"]) == {"instance": [dest], "migration": []}
    cloud.api("DELETE", f"/servers/{server_id}")
    cloud.aio.wait_idle()
    assert cloud.allocations(server_id) == {} and qemu_processes(server_id) == 0


def qemu_processes(server_id):
    """How many QEMU processes of this machine run the server's guest."""
    found = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                found += f"guest={server_id}".encode() in f.read().split(b"\0")
        except OSError:
            pass
    return found


# When the source's compute service dies: (the copy's bandwidth in MiB/s, the figures it
# dies at, QEMU's migration status then, what the restarted service does with it).
DEATHS = {
    # QEMU goes on copying: the restarted service cancels the copy.
    "copying": (1, lambda p: p.status == "active" and p.memory_processed > 0, "active",
                "cancelled"),
    # QEMU completed the copy, the service had not answered yet: the destination's
    # QEMU holds the guest stopped; the restarted service runs it on here.
    "copied": (0, lambda p: p.status == "completed", "completed", "completed"),
}


@pytest.fixture
def host_deaths(qemu_cloud, monkeypatch):
    """The cloud's compute services may die (tests/functional/moves/
    test_compute_crash_recovery.py); after the test their methods are their own again."""
    yield harness.arm_host_deaths(qemu_cloud, monkeypatch)
    for compute in qemu_cloud.aio.computes.values():
        for name in harness.COMPUTE_METHODS:
            compute.__dict__.pop(name, None)


@pytest.mark.parametrize("when", sorted(DEATHS))
def test_source_service_killed_during_the_copy(qemu_cloud, bandwidth, host_deaths,
                                               monkeypatch, when):
    """The source's compute service dies during the copy (QEMU runs on). The conductor
    rolls the move back; the destination's part waits until the source's service has
    started again, so that the fresh service finds QEMU's migration as the service
    left it. One copy of the guest runs after, on the source, the same boot."""
    cloud = qemu_cloud
    mib, dies_at, status_then, status_after = DEATHS[when]
    bandwidth(mib)
    server_id, boot_id, source, dest = booted(cloud, "vm-crash")
    source_driver = cloud.aio.computes[source].driver
    _, before = cloud.count(server_id)

    death = host_deaths
    report = LiveMigrationSteering.report

    def dies_while_copying(steering, figures):
        report(steering, figures)
        if dies_at(figures):  # the service's thread never runs another statement
            death.dead, death.dead_thread = source, threading.current_thread()
            death.reached.set()
            threading.Event().wait()
    monkeypatch.setattr(LiveMigrationSteering, "report", dies_while_copying)
    restarted = threading.Event()
    dest_compute = cloud.aio.computes[dest]
    rollback = dest_compute.rollback_live_migration_at_destination

    def after_the_restart(*args, **kwargs):
        assert restarted.wait(300)
        return rollback(*args, **kwargs)
    dest_compute.rollback_live_migration_at_destination = after_the_restart

    start_live_migration(cloud, server_id)
    assert death.reached.wait(300), "the copy never started"
    left = source_driver.guest({"uuid": server_id}).migration()
    assert left.status == status_then, left
    assert qemu_processes(server_id) == 2  # the source's guest and the destination's QEMU
    if when == "copied":  # held stopped on both hosts
        assert cloud.guest(server_id).status() == "postmigrate"
        assert cloud.aio.computes[dest].driver.guest({"uuid": server_id}).status() == "paused"

    harness._restart(cloud, death, source)  # init_host
    restarted.set()
    assert source_driver.guest({"uuid": server_id}).migration().status == status_after
    cloud.aio.wait_idle()

    server = cloud.server(server_id)
    assert (server["status"], server["OS-EXT-STS:task_state"],
            server["OS-EXT-SRV-ATTR:host"]) == ("ACTIVE", None, source)
    (migration,) = [m for m in migrations(cloud, server_id)
                    if m["migration_type"] == "live-migration"]
    assert migration["status"] in ("error", "failed"), migration
    # One running copy of the guest, on the source, the same boot counting on.
    assert qemu_processes(server_id) == 1
    assert cloud.guest(server_id).status() == "running"
    assert counts_on(cloud, server_id, boot_id, before) == {boot_id}
    assert cloud.aio.computes[dest].driver.list_disks() == []
    assert "outgoing" not in source_driver._load(server_id)
    assert books(cloud, server_id, migration["uuid"]) == {"instance": [source], "migration": []}

    cloud.api("DELETE", f"/servers/{server_id}")
    cloud.aio.wait_idle()
    assert cloud.allocations(server_id) == {} and qemu_processes(server_id) == 0


# When the destination's compute service dies once QEMU completed the copy: (where,
# the host whose copy runs after).
DEST_DEATHS = {
    # Before its step (the driver's, which runs the guest there): the move is undone.
    "before-running-it": "source",
    # Once the server's records are its own (its guest runs): the move goes forward.
    "after-taking-the-server": "dest",
}


@pytest.mark.parametrize("when", sorted(DEST_DEATHS))
def test_destination_service_killed_after_the_copy(qemu_cloud, host_deaths, monkeypatch,
                                                   when):
    """QEMU completed the copy (the guest stopped on the source, held stopped on the
    destination) and the destination's compute service dies. Its records say which
    copy runs: still the source's, the conductor undoes the move, the source's copy
    runs on (the same boot, from where it stopped) and the destination's held copy goes
    when its service starts again; already the destination's, the move goes forward.
    One running copy of the guest after, the same boot."""
    cloud = qemu_cloud
    server_id, boot_id, source, dest = booted(cloud, "vm-dest-crash")
    source_driver = cloud.aio.computes[source].driver
    dest_driver = cloud.aio.computes[dest].driver
    _, before = cloud.count(server_id)
    death = host_deaths

    def die():
        death.dead, death.dead_thread = dest, threading.current_thread()
        death.reached.set()
        threading.Event().wait()  # the service's thread never runs another statement
    if when == "before-running-it":
        monkeypatch.setattr(dest_driver, "post_live_migration_at_destination",
                            lambda *a, **kw: die())
    else:
        give_back, dying = teardown.give_back, [True]

        def dies_giving_back_its_claim(compute, *args, **kwargs):
            # once: the service started again gives the claim back at its start
            if compute.host == dest and kwargs.get("claim") == teardown.MOVE_CLAIM and dying:
                dying.clear()
                die()
            return give_back(compute, *args, **kwargs)
        monkeypatch.setattr(teardown, "give_back", dies_giving_back_its_claim)

    start_live_migration(cloud, server_id)
    assert death.reached.wait(300), "the copy never completed"
    cloud.aio.wait_idle()  # the conductor's undo or end, the destination not answering

    runs_on = {"source": source, "dest": dest}[DEST_DEATHS[when]]
    server = cloud.server(server_id)
    assert (server["status"], server["OS-EXT-STS:task_state"],
            server["OS-EXT-SRV-ATTR:host"]) == ("ACTIVE", None, runs_on), server.get("fault")
    (migration,) = [m for m in migrations(cloud, server_id)
                    if m["migration_type"] == "live-migration"]
    assert migration["status"] == ("error" if runs_on == source else "completed"), migration
    assert cloud.guest(server_id).status() == "running"
    if runs_on == source:  # the destination's copy waits, held stopped, for its service
        assert dest_driver.guest({"uuid": server_id}).status() == "paused"
        assert not {"outgoing", "handed_over"} & set(source_driver._load(server_id))
    else:  # the source's copy went with the move's end
        assert source_driver.list_disks() == []
    assert counts_on(cloud, server_id, boot_id, before) == {boot_id}

    harness._restart(cloud, death, dest)  # init_host: what arrived for an undone move goes
    cloud.aio.wait_idle()
    assert qemu_processes(server_id) == 1
    other = source if runs_on == dest else dest
    assert cloud.aio.computes[other].driver.list_disks() == []
    _, after = cloud.count(server_id)
    assert counts_on(cloud, server_id, boot_id, after) == {boot_id}
    server = cloud.server(server_id)
    assert (server["OS-EXT-SRV-ATTR:host"], server["OS-EXT-STS:power_state"]) == (runs_on, 1)
    assert books(cloud, server_id, migration["uuid"]) == {"instance": [runs_on],
                                                          "migration": []}

    cloud.api("DELETE", f"/servers/{server_id}")
    cloud.aio.wait_idle()
    assert cloud.allocations(server_id) == {} and qemu_processes(server_id) == 0
