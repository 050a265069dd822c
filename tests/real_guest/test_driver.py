"""The QEMU driver through the Compute API: real guests booted, driven and deleted by
an all-in-one, checked from inside the guest and on the books."""
import base64
import os
import subprocess
import time

import pytest

from novella.virt.power import power_state
from novella.conf import CONF
from novella.context import get_admin_context
from novella.virt.qemu.driver import QEMUDriver

pytestmark = pytest.mark.real_guest

USER_DATA = "#!/bin/sh\necho ran-from-user-data > /root/user-data\n"


def _b64(text):
    return base64.b64encode(text.encode()).decode()


def test_boot_console_guest_and_delete(qemu_cloud):
    cloud = qemu_cloud
    # personality (up to 2.56): its files are on the config drive, written by the guest
    status, body = cloud.api("POST", "/servers", {"server": {
        "name": "vm-one", "flavorRef": "1", "imageRef": cloud.aio.demo_image["id"],
        "networks": "auto", "config_drive": True, "user_data": _b64(USER_DATA),
        "personality": [{"path": "/root/injected", "contents": _b64("injected-by-personality\n")},
                        {"path": "/etc/novella/two", "contents": _b64("second")}]}},
        version="2.56")
    assert status == 202, body
    cloud.aio.wait_idle()
    server_id = body["server"]["id"]
    server = cloud.server(server_id)
    assert server["status"] == "ACTIVE", server
    boot_id = cloud.wait_boot(server_id)
    console = cloud.console(server_id)
    assert f"novella-boot {boot_id} hostname=vm-one source=config-drive" in console
    assert "novella-user-data exit=0" in console
    probe = cloud.probe(server_id)
    assert probe.check("hostname").strip() == "vm-one"
    assert probe.check("cat /root/user-data").strip() == "ran-from-user-data"
    assert probe.check("cat /root/injected") == "injected-by-personality"
    assert probe.check("wc -c < /root/injected").strip() == "24"   # byte for byte
    assert probe.check("cat /etc/novella/two") == "second"
    assert probe.check("cat /sys/block/vda/size").strip() == str((1 << 30) // 512)  # m1.tiny
    allocations = cloud.allocations(server_id)
    assert [a["resources"] for a in allocations.values()] == [
        {"VCPU": 1, "MEMORY_MB": 256, "DISK_GB": 1}]

    guest = cloud.guest(server_id)
    assert guest.pid() is not None
    # A compute service started again finds its running guests (their records and pids).
    host = cloud.server(server_id)["OS-EXT-SRV-ATTR:host"]
    restarted = QEMUDriver(host, CONF)
    assert restarted.list_instances() == [server_id]
    assert restarted.get_info({"uuid": server_id})["state"] == power_state.RUNNING
    driver = cloud.driver(server_id)
    for console in (driver.get_serial_console(None, {"uuid": server_id}),
                    driver.get_vnc_console(None, {"uuid": server_id})):
        assert os.path.exists(console["unix_socket"])
    status, _ = cloud.api("DELETE", f"/servers/{server_id}")
    assert status == 204
    cloud.aio.wait_idle()
    assert guest.pid() is None and not os.path.exists(guest.dir)
    assert cloud.allocations(server_id) == {}


def wait_for(check, what, timeout=120):
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.5)


def test_stop_start_reboot_pause_suspend(qemu_cloud):
    cloud = qemu_cloud
    server_id = cloud.boot(name="vm-power")
    boot_id = cloud.wait_boot(server_id)
    cloud.probe(server_id).check("echo kept-on-disk > /root/mark && sync")

    cloud.action(server_id, {"os-stop": None})
    server = cloud.server(server_id)
    assert (server["status"], server["OS-EXT-STS:power_state"]) == ("SHUTOFF", 4)
    assert cloud.guest(server_id).pid() is None
    cloud.action(server_id, {"os-start": None})
    started = cloud.wait_boot(server_id, seen={boot_id})
    assert cloud.probe(server_id).check("cat /root/mark").strip() == "kept-on-disk"

    boots = [boot_id, started]
    for kind in ("SOFT", "HARD"):
        cloud.action(server_id, {"reboot": {"type": kind}})
        assert cloud.server(server_id)["status"] == "ACTIVE"
        boots.append(cloud.wait_boot(server_id, seen=boots))
    assert len(set(boots)) == 4  # each boot its own boot id

    cloud.action(server_id, {"pause": None})
    assert cloud.server(server_id)["status"] == "PAUSED"
    paused_at = cloud.count(server_id)
    time.sleep(3)
    assert cloud.count(server_id) == paused_at  # the counter stopped
    cloud.action(server_id, {"unpause": None})
    wait_for(lambda: cloud.count(server_id)[1] > paused_at[1], "the counter did not resume")
    assert cloud.count(server_id)[0] == boots[-1]

    cloud.action(server_id, {"suspend": None})
    server = cloud.server(server_id)
    assert (server["status"], server["OS-EXT-STS:power_state"]) == ("SUSPENDED", 7)
    assert cloud.guest(server_id).pid() is None
    suspended_at = cloud.count(server_id)
    cloud.action(server_id, {"resume": None})
    assert cloud.server(server_id)["status"] == "ACTIVE"
    wait_for(lambda: cloud.count(server_id)[1] > suspended_at[1], "the counter did not go on")
    assert cloud.count(server_id)[0] == boots[-1]  # the same boot, resumed
    cloud.api("DELETE", f"/servers/{server_id}")
    cloud.aio.wait_idle()


def test_rescue_snapshot_rebuild(qemu_cloud, tmp_path):
    cloud = qemu_cloud
    server_id = cloud.boot(name="vm-rescue")
    boot_id = cloud.wait_boot(server_id)
    cloud.probe(server_id).check("echo kept-on-disk > /root/mark && sync")

    cloud.action(server_id, {"rescue": {}}, expect=200)
    assert cloud.server(server_id)["status"] == "RESCUE"
    rescue_boot = cloud.wait_boot(server_id, seen={boot_id})
    probe = cloud.probe(server_id)
    assert probe.run("cat /root/mark")[0] != 0  # booted from the rescue image
    assert probe.check("mkdir -p /mnt/own && mount /dev/vdb /mnt/own && cat /mnt/own/root/mark "
                       "&& umount /mnt/own").strip() == "kept-on-disk"
    cloud.action(server_id, {"unrescue": None})
    unrescued = cloud.wait_boot(server_id, seen={boot_id, rescue_boot})
    assert cloud.probe(server_id).check("cat /root/mark").strip() == "kept-on-disk"

    out = cloud.action(server_id, {"createImage": {"name": "vm-rescue-snap"}})
    image_id = out["image_id"] if out else None
    image = cloud.aio.image_api.get(get_admin_context(), image_id)
    assert image["status"] == "active" and image["size"] > 0
    raw = tmp_path / "snap.raw"
    subprocess.run(["qemu-img", "convert", "-O", "raw",
                    cloud.aio.image_api.data_path(image_id), str(raw)], check=True)
    assert b"kept-on-disk" in raw.read_bytes()  # the root disk's bytes, flattened

    cloud.action(server_id, {"rebuild": {"imageRef": cloud.aio.demo_image["id"]}})
    assert cloud.server(server_id)["status"] == "ACTIVE"
    cloud.wait_boot(server_id, seen={boot_id, rescue_boot, unrescued})
    assert cloud.probe(server_id).run("cat /root/mark")[0] != 0  # a new root disk
    cloud.api("DELETE", f"/servers/{server_id}")
    cloud.aio.wait_idle()


def test_volume_written_in_one_guest_is_read_in_another(qemu_cloud):
    cloud = qemu_cloud
    first, second = cloud.boot(name="vm-a"), cloud.boot(name="vm-b")
    for server_id in (first, second):
        assert cloud.server(server_id)["status"] == "ACTIVE", cloud.server(server_id).get("fault")
        cloud.wait_boot(server_id)
    volume = cloud.aio.volume_api.create(get_admin_context(), 1, name="data")
    attach = {"volumeAttachment": {"volumeId": volume["id"]}}

    def has_disk(server_id):
        return cloud.probe(server_id).run("test -b /dev/vdb")[0] == 0

    status, body = cloud.api("POST", f"/servers/{first}/os-volume_attachments", attach)
    assert status == 200, body
    cloud.aio.wait_idle()
    wait_for(lambda: has_disk(first), "the volume did not appear in the first guest")
    cloud.probe(first).check("echo written-by-vm-a | dd of=/dev/vdb conv=fsync 2>/dev/null")
    status, _ = cloud.api("DELETE", f"/servers/{first}/os-volume_attachments/{volume['id']}")
    assert status == 202
    cloud.aio.wait_idle()
    assert not has_disk(first)  # unplugged while the guest runs

    status, body = cloud.api("POST", f"/servers/{second}/os-volume_attachments", attach)
    assert status == 200, body
    cloud.aio.wait_idle()
    wait_for(lambda: has_disk(second), "the volume did not appear in the second guest")
    assert cloud.probe(second).check("head -c 15 /dev/vdb") == "written-by-vm-a"
    assert cloud.aio.volume_api.get(get_admin_context(), volume["id"])["status"] == "in-use"

    for server_id in (first, second):
        guest = cloud.guest(server_id)
        cloud.api("DELETE", f"/servers/{server_id}")
        cloud.aio.wait_idle()
        assert guest.pid() is None and not os.path.exists(guest.dir)
        assert cloud.allocations(server_id) == {}


def test_resize_grows_the_root_disk_and_keeps_the_file_revert_brings_it_back(qemu_cloud):
    cloud = qemu_cloud
    server_id = cloud.boot(name="vm-resize")
    boot_id = cloud.wait_boot(server_id)
    source = cloud.server(server_id)["OS-EXT-SRV-ATTR:host"]
    cloud.probe(server_id).check("echo before-the-move > /root/mark && sync")

    cloud.action(server_id, {"resize": {"flavorRef": "2"}})  # m1.small: 512 MiB, 2 GiB
    server = cloud.server(server_id)
    assert server["status"] == "VERIFY_RESIZE", server.get("fault")
    assert server["OS-EXT-SRV-ATTR:host"] != source
    resized = cloud.wait_boot(server_id, seen={boot_id})
    probe = cloud.probe(server_id)
    assert probe.check("cat /root/mark").strip() == "before-the-move"
    assert probe.check("cat /sys/block/vda/size").strip() == str((2 << 30) // 512)
    blocks = int(probe.check("df -k / | awk 'NR == 2 {print $2}'"))
    assert blocks > 1 << 20  # the filesystem grew into the 2 GiB disk at boot
    cloud.action(server_id, {"confirmResize": None}, expect=204)
    assert cloud.server(server_id)["status"] == "ACTIVE"
    source_driver = cloud.aio.computes[source].driver
    assert source_driver.list_disks() == []  # the source's copy is gone
    allocations = cloud.allocations(server_id)
    assert [a["resources"] for a in allocations.values()] == [
        {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 2}]

    # A cold migration reverted: the guest runs on its host again, the file there.
    host = cloud.server(server_id)["OS-EXT-SRV-ATTR:host"]
    cloud.action(server_id, {"migrate": None})
    assert cloud.server(server_id)["status"] == "VERIFY_RESIZE"
    cloud.action(server_id, {"revertResize": None})
    server = cloud.server(server_id)
    assert (server["status"], server["OS-EXT-SRV-ATTR:host"]) == ("ACTIVE", host)
    cloud.wait_boot(server_id, seen={boot_id, resized})
    assert cloud.probe(server_id).check("cat /root/mark").strip() == "before-the-move"
    assert cloud.aio.computes[source].driver.list_disks() == []
    cloud.api("DELETE", f"/servers/{server_id}")
    cloud.aio.wait_idle()
    assert cloud.allocations(server_id) == {}
