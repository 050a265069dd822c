"""`novella up --driver qemu` driven by the openstack command: a real guest booted from
the guest image it builds, its console log read, and deleted."""
import glob
import os
import signal
import subprocess
import sys
import time

import pytest
import requests

from tests.e2e import processes
from tests.e2e.test_openstack_cli import N_PORTS, Cloud, _wait
from tests.real_guest.conftest import require_tools

pytestmark = pytest.mark.real_guest


@pytest.fixture
def real_cloud(tmp_path):
    require_tools()
    data_dir = str(tmp_path / "novella-up")
    os.makedirs(data_dir)
    port_base = processes.free_port_base(N_PORTS)
    log_path = os.path.join(data_dir, "novella-up.log")
    with open(log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "novella.cmd.main", "up", "--driver", "qemu",
                                 "--cells", "1", "--hosts-per-cell", "1", "--data-dir", data_dir,
                                 "--port-base", str(port_base), "--host", "127.0.0.1"],
                                stdout=log, stderr=subprocess.STDOUT)
    cloud = Cloud(data_dir, port_base, proc)
    cloud.log_path = log_path
    try:
        def ready():
            assert proc.poll() is None, open(log_path).read()[-3000:]
            return os.path.exists(cloud.clouds_yaml) and requests.get(
                f"http://127.0.0.1:{port_base + 5}/", timeout=2).status_code
        _wait("novella up --driver qemu", ready, timeout=240)
        yield cloud
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        # Guests outlive their compute service, as with any hypervisor: stop what is left.
        for pid_file in glob.glob(os.path.join(data_dir, "instances", "*", "*", "qemu.pid")):
            with open(pid_file) as f:
                pid = int(f.read().strip() or 0)
            if pid and os.path.exists(f"/proc/{pid}"):
                os.kill(pid, signal.SIGKILL)


def test_openstack_cli_boots_a_real_guest(real_cloud):
    cloud = real_cloud
    terminal = open(cloud.log_path).read()
    assert "Building the guest image (once, cached in" in terminal
    assert "QEMU (qemu)" in terminal
    server = cloud.osc("server", "create", "--image", "novella-guest", "--flavor", "m1.tiny",
                       "--network", "private", "--wait", "vm1")
    assert server["status"] == "ACTIVE"
    host = server["OS-EXT-SRV-ATTR:host"]
    guest_dir = os.path.join(cloud.data_dir, "instances", host, server["id"])
    assert os.path.exists(os.path.join(guest_dir, "qemu.pid"))

    deadline = time.monotonic() + 240
    while "novella-boot" not in (log := cloud.osc("console", "log", "show", "vm1", fmt=False)):
        assert time.monotonic() < deadline, log[-2000:]
        time.sleep(2)
    assert "hostname=vm1 source=config-drive" in log  # [DEFAULT] force_config_drive

    allocations = cloud.osc("resource", "provider", "allocation", "show", server["id"])
    assert [a["resources"] for a in allocations] == [
        {"VCPU": 1, "MEMORY_MB": 256, "DISK_GB": 1}]
    cloud.osc("server", "delete", "--wait", "vm1", fmt=False)
    assert not os.path.exists(guest_dir)
    assert cloud.osc("resource", "provider", "allocation", "show", server["id"]) == []
