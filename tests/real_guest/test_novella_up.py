"""`novella up --driver qemu` (two cells of two hosts, cross-cell resizes allowed for
admins) driven by the openstack command: a real guest booted from the guest image it
builds, its console log read, moved every way with the guest itself checked after each
move, its serial console and noVNC opened through the proxies, and deleted."""
import glob
import os
import shutil
import signal
import subprocess
import sys

import pytest
import requests

from tests.e2e import processes
from tests.e2e.test_consoles import NOVNC_OFFSET, SERIAL_OFFSET
from tests.e2e.test_dashboard import _artifact_dir, browser  # noqa: F401 - fixture
from tests.e2e.test_openstack_cli import N_PORTS, Cloud, _wait
from tests.functional.consoles.test_serial_proxy import _open, _read_until
from tests.real_guest.conftest import COUNTER, require_tools

pytestmark = pytest.mark.real_guest


@pytest.fixture
def real_cloud(tmp_path):
    require_tools()
    data_dir = str(tmp_path / "novella-up")
    os.makedirs(data_dir)
    # Cross-cell resizes allowed for admins (docs/cross-cell.md); the scheduler keeps a
    # move in its cell while a host there fits.
    policy = tmp_path / "policy.yaml"
    policy.write_text('"compute:servers:resize:cross_cell": "rule:admin_api"\n')
    conf = tmp_path / "nova.conf"
    conf.write_text(f"[oslo_policy]\npolicy_file = {policy}\n")
    port_base = processes.free_port_base(N_PORTS)
    log_path = os.path.join(data_dir, "novella-up.log")
    with open(log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "novella.cmd.main", "up", "--driver", "qemu",
                                 "--cells", "2", "--hosts-per-cell", "2", "--data-dir", data_dir,
                                 "--port-base", str(port_base), "--host", "127.0.0.1",
                                 "--config-file", str(conf)],
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
        from novella.virt.qemu.process import Host
        for instances in glob.glob(os.path.join(data_dir, "instances", "*")):
            shutil.rmtree(Host(instances).run_dir, ignore_errors=True)


def _allocations(cloud, server_id):
    """{host: resources} of the server's allocations in placement, as the CLI shows them."""
    names = {p["uuid"]: p["name"]
             for p in cloud.osc("resource", "provider", "list")}
    return {names[a["resource_provider"]]: a["resources"]
            for a in cloud.osc("resource", "provider", "allocation", "show", server_id)}


def _host(cloud, server_id, status="ACTIVE"):
    server = cloud.osc("server", "show", server_id)
    assert server["status"] == status, server.get("fault")
    return server["OS-EXT-SRV-ATTR:host"]


def _probe(cloud, server_id):
    """The guest's command server, through its probe socket on the host it runs on (the
    QEMU layer's run directory of that host's instances directory), once it answers."""
    from novella.virt.guest_probe import GuestProbe
    from novella.virt.qemu.process import Host
    host = Host(os.path.join(cloud.data_dir, "instances", _host(cloud, server_id)))
    probe = GuestProbe(host.guest(server_id).probe_socket)
    probe.wait_ready(timeout=240)
    return probe


def _counters(cloud, server_id):
    """The guest's counter lines in its console log: [(boot id, count)]."""
    return [(boot, int(n)) for boot, n in COUNTER.findall(
        cloud.osc("console", "log", "show", server_id, fmt=False))]


def _last_counter(cloud, server_id):
    """(boot id, count) of the guest's last counter line, once it printed one."""
    return _wait("the guest's counter", lambda: (_counters(cloud, server_id) or [None])[-1],
                 timeout=120)


TINY = {"VCPU": 1, "MEMORY_MB": 256, "DISK_GB": 1}
SMALL = {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 2}
MEDIUM = {"VCPU": 2, "MEMORY_MB": 1024, "DISK_GB": 4}
GIB_SECTORS = (1 << 30) // 512


def test_openstack_cli_moves_a_real_guest_every_way_and_opens_its_consoles(
        real_cloud, browser, tmp_path):  # noqa: F811
    cloud = real_cloud
    terminal = open(cloud.log_path).read()
    assert "Building the guest image (once, cached in" in terminal
    assert "QEMU (qemu)" in terminal
    server_id = cloud.osc("server", "create", "--image", "novella-guest", "--flavor", "m1.tiny",
                          "--network", "private", "--availability-zone", "nova:cell1-host1",
                          "--wait", "mover")["id"]
    assert _host(cloud, server_id) == "cell1-host1"
    assert _allocations(cloud, server_id) == {"cell1-host1": TINY}
    probe = _probe(cloud, server_id)
    probe.check("echo written-at-boot > /root/mark && sync")
    assert probe.check("cat /sys/block/vda/size").strip() == str(GIB_SECTORS)
    log = cloud.osc("console", "log", "show", server_id, fmt=False)
    assert "hostname=mover source=config-drive" in log  # [DEFAULT] force_config_drive
    boot_id, before = _last_counter(cloud, server_id)

    # Live migration to the cell's other host: the same boot counts on, the file is there.
    cloud.osc("server", "migrate", "--live-migration", "--host", "cell1-host2", "--wait",
              server_id, fmt=False)
    assert _host(cloud, server_id) == "cell1-host2"
    assert _allocations(cloud, server_id) == {"cell1-host2": TINY}
    assert _probe(cloud, server_id).check("cat /root/mark").strip() == "written-at-boot"
    _wait("the counter going on after the live migration",
          lambda: _last_counter(cloud, server_id)[1] > before, timeout=120)
    assert {boot for boot, _ in _counters(cloud, server_id)} == {boot_id}

    # Resize in the cell, confirmed: the root disk is bigger and the guest grew into it.
    cloud.osc("server", "resize", "--flavor", "m1.small", "--wait", server_id, fmt=False)
    resized_on = _host(cloud, server_id, "VERIFY_RESIZE")
    assert resized_on == "cell1-host1"  # the cell's other host
    cloud.osc("server", "resize", "confirm", server_id, fmt=False)
    assert _host(cloud, server_id) == resized_on
    assert _allocations(cloud, server_id) == {resized_on: SMALL}
    probe = _probe(cloud, server_id)
    assert probe.check("cat /root/mark").strip() == "written-at-boot"
    assert probe.check("cat /sys/block/vda/size").strip() == str(2 * GIB_SECTORS)
    assert int(probe.check("df -k / | awk 'NR == 2 {print $2}'")) > 1 << 20

    # Shelve (offloaded at once: no host, no allocations) and unshelve.
    cloud.osc("server", "shelve", "--wait", server_id, fmt=False)
    assert _host(cloud, server_id, "SHELVED_OFFLOADED") is None
    assert _allocations(cloud, server_id) == {}
    cloud.osc("server", "unshelve", "--wait", server_id, fmt=False)
    unshelved_on = _host(cloud, server_id)
    assert unshelved_on.startswith("cell1-")
    assert _allocations(cloud, server_id) == {unshelved_on: SMALL}
    assert _probe(cloud, server_id).check("cat /root/mark").strip() == "written-at-boot"

    # Cross-cell resize: cell1's hosts take no new guests, so the resize leaves the cell.
    for host in ("cell1-host1", "cell1-host2"):
        cloud.osc("compute", "service", "set", "--disable", host, "nova-compute", fmt=False)
    cloud.osc("server", "resize", "--flavor", "m1.medium", "--wait", server_id, fmt=False)
    dest = _host(cloud, server_id, "VERIFY_RESIZE")
    assert dest.startswith("cell2-")
    cloud.osc("server", "resize", "confirm", server_id, fmt=False)
    assert _host(cloud, server_id) == dest
    assert _allocations(cloud, server_id) == {dest: MEDIUM}
    probe = _probe(cloud, server_id)
    assert probe.check("cat /root/mark").strip() == "written-at-boot"
    assert probe.check("cat /sys/block/vda/size").strip() == str(4 * GIB_SECTORS)
    assert server_id not in os.listdir(os.path.join(cloud.data_dir, "instances", unshelved_on))

    # The serial console through the proxy: what the guest prints now, its current boot.
    shown = cloud.osc("console", "url", "show", "--serial", server_id)
    assert shown["url"].startswith(f"ws://127.0.0.1:{cloud.port_base + SERIAL_OFFSET}/?token=")
    line = f"novella-counter {_last_counter(cloud, server_id)[0]} ".encode()
    ws = _open(shown["url"])
    try:
        printed = _read_until(ws, line, timeout=60)
    finally:
        ws.close()
    assert line in printed, printed

    # noVNC's page in Chromium, connected to the guest's display.
    url = cloud.osc("console", "url", "show", "--novnc", server_id)["url"]
    assert url.startswith(f"http://127.0.0.1:{cloud.port_base + NOVNC_OFFSET}/vnc_lite.html?")
    page = browser.new_page()
    try:
        page.goto(url, timeout=60000)
        page.wait_for_function("/^Connected to /.test("
                               "document.getElementById('status').textContent)", timeout=60000)
        screen = page.wait_for_function("""() => {
            const c = document.querySelector('#screen canvas');
            if (!c || !c.width || !c.height) return null;
            const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
            for (let i = 4; i < px.length; i += 4)
                if (px[i] !== px[0] || px[i + 1] !== px[1] || px[i + 2] !== px[2])
                    return [c.width, c.height];
            return null;
        }""", timeout=60000).json_value()
        shot = _artifact_dir(tmp_path) / "novnc-real-guest.png"
        page.screenshot(path=str(shot))
        print(f"noVNC screenshot ({screen[0]}x{screen[1]} guest screen): {shot}")
    finally:
        page.close()
    # The guest's VGA text screen, 80x25 characters of 9x16 pixels (QEMU's stand-in page
    # for a guest with no display adapter is 640x480).
    assert screen == [720, 400], screen

    cloud.osc("server", "delete", "--wait", server_id, fmt=False)
    assert not os.path.exists(os.path.join(cloud.data_dir, "instances", dest, server_id))
    assert _allocations(cloud, server_id) == {}
