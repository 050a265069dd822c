"""The QEMU driver through the Compute API: real guests booted, driven and deleted by
an all-in-one, checked from inside the guest and on the books."""
import base64
import os

import pytest


pytestmark = pytest.mark.real_guest

USER_DATA = "#!/bin/sh\necho ran-from-user-data > /root/user-data\n"


def test_boot_console_guest_and_delete(qemu_cloud):
    cloud = qemu_cloud
    server_id = cloud.boot(name="vm-one", config_drive=True,
                           user_data=base64.b64encode(USER_DATA.encode()).decode())
    server = cloud.server(server_id)
    assert server["status"] == "ACTIVE", server
    boot_id = cloud.wait_boot(server_id)
    console = cloud.console(server_id)
    assert f"novella-boot {boot_id} hostname=vm-one source=config-drive" in console
    assert "novella-user-data exit=0" in console
    probe = cloud.probe(server_id)
    assert probe.check("hostname").strip() == "vm-one"
    assert probe.check("cat /root/user-data").strip() == "ran-from-user-data"
    assert probe.check("cat /sys/block/vda/size").strip() == str((1 << 30) // 512)  # m1.tiny
    allocations = cloud.allocations(server_id)
    assert [a["resources"] for a in allocations.values()] == [
        {"VCPU": 1, "MEMORY_MB": 256, "DISK_GB": 1}]

    guest = cloud.guest(server_id)
    assert guest.pid() is not None
    driver = cloud.driver(server_id)
    for console in (driver.get_serial_console(None, {"uuid": server_id}),
                    driver.get_vnc_console(None, {"uuid": server_id})):
        assert os.path.exists(console["unix_socket"])
    status, _ = cloud.api("DELETE", f"/servers/{server_id}")
    assert status == 204
    cloud.aio.wait_idle()
    assert guest.pid() is None and not os.path.exists(guest.dir)
    assert cloud.allocations(server_id) == {}
