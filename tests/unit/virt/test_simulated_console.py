"""A simulated guest's serial port: its console log over TCP, input echoed."""
import socket
import time
import uuid

import pytest

from novella.conf import CONF
from novella.virt import driver as driver_mod
from novella.virt import simulated

FLAVOR = {"flavorid": "1", "name": "m1.tiny", "memory_mb": 512, "vcpus": 1,
          "root_gb": 1, "ephemeral_gb": 0, "swap": 0, "extra_specs": {}}


@pytest.fixture
def guest(tmp_path):
    host = "sim-" + uuid.uuid4().hex[:8]
    drv = simulated.SimulatedDriver(host, conf=CONF, instances_path=str(tmp_path))
    drv.init_host(host)
    inst = {"uuid": str(uuid.uuid4()), "name": "vm", "flavor": dict(FLAVOR), "image_ref": None}
    drv.spawn(None, inst, {"id": None, "properties": {}})
    yield drv, inst
    drv.destroy(None, inst)
    simulated.clear_faults(host)


def _read_until(conn, marker, timeout=5):
    conn.settimeout(timeout)
    data = b""
    deadline = time.monotonic() + timeout
    while marker not in data and time.monotonic() < deadline:
        data += conn.recv(4096)
    return data


def test_serial_port_serves_the_console_log_and_echoes(guest):
    drv, inst = guest
    where = drv.get_serial_console(None, inst)
    assert where == {"host": "127.0.0.1", "port": where["port"], "unix_socket": None,
                     "internal_access_path": None}
    with socket.create_connection((where["host"], where["port"])) as conn:
        assert b"login:\r\n" in _read_until(conn, b"login:")
        conn.sendall(b"hello\r")
        assert b"hello\r" in _read_until(conn, b"hello\r")
        drv.reboot(None, inst, reboot_type="HARD")  # a line written while connected arrives
        assert b"hard reboot" in _read_until(conn, b"hard reboot")
    # the same port for every request while the guest lives
    assert drv.get_serial_console(None, inst)["port"] == where["port"]


def test_no_serial_port_when_not_running_and_gone_with_the_guest(guest):
    drv, inst = guest
    port = drv.get_serial_console(None, inst)["port"]
    drv.power_off(inst)
    with pytest.raises(driver_mod.ConsoleTypeUnavailable, match="Unavailable console type serial."):
        drv.get_serial_console(None, inst)
    with pytest.raises(driver_mod.ConsoleTypeUnavailable):
        drv.get_serial_console(None, inst, index=1)
    drv.destroy(None, inst)
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    with pytest.raises(simulated.InstanceNotFound):
        drv.get_serial_console(None, inst)


def test_no_vnc(guest):
    drv, inst = guest
    with pytest.raises(driver_mod.ConsoleTypeUnavailable, match="Unavailable console type vnc."):
        drv.get_vnc_console(None, inst)
