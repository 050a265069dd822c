"""Cross-cell moves of real guests (QEMU driver, TCG): the snapshot-and-spawn path
carries the guest's disk to the other cell. An all-in-one of two cells of its own:
one all-in-one runs in a process at a time (its transports are the process's)."""
import pytest

from tests.real_guest.test_moves import delete, read_mark, resources, write_mark

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
    assert resources(cloud, server_id) == {dest: {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 2}}
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
    assert resources(cloud, server_id) == {dest: {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 2}}
    delete(cloud, server_id)
