"""Cross-cell moves of real guests (QEMU driver, TCG): the snapshot-and-spawn path
carries the guest's disk to the other cell, also when the conductor dies once the
disk is copied. An all-in-one of two cells of its own: one all-in-one runs in a
process at a time (its transports are the process's)."""
import pytest

from novella.conductor import journal
from novella.conductor.manager import ConductorManager
from novella.conf import CONF
from tests.functional.moves import test_compute_crash_recovery as host_harness
from tests.functional.moves import test_crash_recovery as harness
from tests.real_guest.test_crash_moves import dies_once_copied, snapshot_leftovers
from tests.real_guest.test_live_migration import qemu_processes
from tests.real_guest.test_moves import TINY, delete, read_mark, resources, write_mark

SMALL = {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 2}

pytestmark = pytest.mark.real_guest


def test_cross_cell_resize_carries_the_disk_confirm_and_a_cold_migration_reverted(
        qemu_cells_cloud):
    cloud = qemu_cells_cloud
    server_id = cloud.boot(name="vm-cross-cell")
    boot_id = cloud.wait_boot(server_id)
    write_mark(cloud, server_id)
    source = cloud.host_of(server_id)
    source_driver = cloud.aio.computes[source].driver

    cloud.action(server_id, {"resize": {"flavorRef": "2"}})  # m1.small: 512 MiB, 2 GiB
    server = cloud.server(server_id)
    assert server["status"] == "VERIFY_RESIZE", server.get("fault")
    dest = server["OS-EXT-SRV-ATTR:host"]
    assert cloud.cell_of_host(dest).name != cloud.cell_of_host(source).name
    (migration,) = cloud.migrations(server_id)
    assert migration["migration_type"] == "resize" and migration["status"] == "finished"
    resized = cloud.wait_boot(server_id, seen={boot_id})
    probe = cloud.probe(server_id)
    assert probe.check("cat /root/mark").strip() == "before-the-move"
    assert probe.check("cat /sys/block/vda/size").strip() == str((2 << 30) // 512)
    assert int(probe.check("df -k / | awk 'NR == 2 {print $2}'")) > 1 << 20  # grown into it
    # The source keeps its guest, powered off, for a revert.
    assert source_driver.list_instances() == [server_id]
    assert source_driver.guest({"uuid": server_id}).pid() is None

    cloud.action(server_id, {"confirmResize": None}, expect=204)
    assert cloud.server(server_id)["status"] == "ACTIVE"
    assert source_driver.list_disks() == [] and source_driver.list_instances() == []
    assert resources(cloud, server_id) == {dest: SMALL}
    assert [s for s in cloud.snapshots(server_id) if s[1] != "deleted"] == []

    # A cold migration across the cells, reverted: the guest runs on its host again.
    cloud.action(server_id, {"migrate": None})
    server = cloud.server(server_id)
    assert (server["status"], server["OS-EXT-SRV-ATTR:host"]) == ("VERIFY_RESIZE", source), \
        server.get("fault")
    migrated = cloud.wait_boot(server_id, seen={boot_id, resized})
    assert read_mark(cloud, server_id) == "before-the-move"
    cloud.action(server_id, {"revertResize": None})
    server = cloud.server(server_id)
    assert (server["status"], server["OS-EXT-SRV-ATTR:host"]) == ("ACTIVE", dest)
    cloud.wait_boot(server_id, seen={boot_id, resized, migrated})
    assert read_mark(cloud, server_id) == "before-the-move"
    assert source_driver.list_disks() == []
    assert resources(cloud, server_id) == {dest: SMALL}
    delete(cloud, server_id)


def test_conductor_killed_once_the_source_copied_the_disk(qemu_cells_cloud, monkeypatch):
    """The conductor dies when the source has powered the guest off and copied its root
    disk into the snapshot, before it recorded so (as when it dies waiting for the
    copy). A fresh conductor takes the move over: after it, one running copy of the
    guest, with its file, and the books of the host it runs on."""
    cloud = qemu_cells_cloud
    server_id = cloud.boot(name="vm-cross-cell-crash")
    boot_id = cloud.wait_boot(server_id)
    write_mark(cloud, server_id)
    source = cloud.host_of(server_id)

    crash = harness.arm_crashes(cloud, monkeypatch)
    boundary = crash.boundary

    def once_copied(real, tasks, index, task, status):
        if task.name == "PrepResizeAtSourceTask" and crash.at == "copied":
            crash.at = (index, "done")  # it acted, and nothing says so
        return boundary(real, tasks, index, task, status)
    crash.boundary = once_copied
    crash.arm(server_id, "copied")
    cloud.action(server_id, {"resize": {"flavorRef": "2"}})
    crash.wait(cloud)
    assert crash.reached.is_set(), "the conductor never reached the copy"
    assert qemu_processes(server_id) == 0  # powered off for the copy
    crash.arm(None, None)

    fresh = ConductorManager(CONF, cloud.aio.api_db, cloud.aio.placement,
                             network_api=cloud.aio.network_api,
                             volume_api=cloud.aio.volume_api, image_api=cloud.aio.image_api)
    journal.expire_others(cloud.aio.api_db, fresh.owner)  # the dead one's lease ran out
    assert fresh.recover_operations()
    cloud.aio.wait_idle()

    server = cloud.server(server_id)
    (migration,) = cloud.migrations(server_id)
    if server["status"] == "ACTIVE":  # undone: back on the source
        assert server["OS-EXT-SRV-ATTR:host"] == source
        assert migration["status"] == "error"
        assert resources(cloud, server_id) == {source: TINY}
        assert cloud.allocations(migration["uuid"]) == {}
        assert [s for s in cloud.snapshots(server_id) if s[1] != "deleted"] == []
    else:  # finished: resized on the destination, the source held for a revert
        assert server["status"] == "VERIFY_RESIZE", server.get("fault")
        assert resources(cloud, server_id) == {server["OS-EXT-SRV-ATTR:host"]: SMALL}
        assert resources(cloud, migration["uuid"]) == {source: TINY}
    assert server["OS-EXT-STS:task_state"] is None
    cloud.wait_boot(server_id, seen={boot_id})
    assert qemu_processes(server_id) == 1  # one running copy
    assert read_mark(cloud, server_id) == "before-the-move"  # the disk intact
    delete(cloud, server_id)
    assert qemu_processes(server_id) == 0
    assert all(cloud.aio.computes[h].driver.list_disks() == [] for h in cloud.aio.computes)


def test_source_compute_killed_copying_the_disk(qemu_cells_cloud, monkeypatch):
    """The source's compute service dies while it copies the powered-off guest's root
    disk into the snapshot. The conductor undoes the move; the source, started again,
    takes its part: the half-made copy removed, the guest running again from its own
    disk, one copy of it, the books the source's."""
    cloud = qemu_cells_cloud
    server_id = cloud.boot(name="vm-cross-cell-copy")
    boot_id = cloud.wait_boot(server_id)
    write_mark(cloud, server_id)
    source = cloud.host_of(server_id)
    source_driver = cloud.aio.computes[source].driver

    death = dies_once_copied(cloud, monkeypatch, source)

    cloud.action(server_id, {"resize": {"flavorRef": "2"}})
    assert death.reached.is_set(), "the disk copy never ran"
    assert qemu_processes(server_id) == 0  # powered off for the copy
    assert snapshot_leftovers(source_driver)

    host_harness._restart(cloud, death, source)
    cloud.aio.wait_idle()
    source_driver = cloud.aio.computes[source].driver
    server = cloud.server(server_id)
    assert (server["status"], server["OS-EXT-STS:task_state"],
            server["OS-EXT-SRV-ATTR:host"]) == ("ACTIVE", None, source), server.get("fault")
    (migration,) = cloud.migrations(server_id)
    assert migration["status"] == "error"
    assert resources(cloud, server_id) == {source: TINY}
    assert cloud.allocations(migration["uuid"]) == {}
    assert [s for s in cloud.snapshots(server_id) if s[1] != "deleted"] == []
    assert snapshot_leftovers(source_driver) == []
    cloud.wait_boot(server_id, seen={boot_id})
    assert qemu_processes(server_id) == 1  # one running copy, on the source
    assert read_mark(cloud, server_id) == "before-the-move"
    assert all(cloud.aio.computes[h].driver.list_disks() == [] for h in cloud.aio.computes
               if h != source)
    delete(cloud, server_id)
