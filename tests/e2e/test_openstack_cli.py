"""Real OpenStack clients against `novella up`, with nothing but its clouds.yaml.

`novella up` runs as a subprocess on free ports; the `openstack` command
(python-openstackclient with osc-placement) is driven with `--os-cloud` and
`-f json`, then openstacksdk repeats the flows. Every step checks what the
output says (status, flavor, host, allocations), not only the exit code.
Waits are bounded; everything listens on 127.0.0.1 only.
"""
import concurrent.futures
import json
import os
import shutil
import socket
import subprocess
import sys
import time

import pytest
import requests

OPENSTACK = shutil.which("openstack") or os.path.join(os.path.dirname(sys.executable), "openstack")
if not os.path.exists(OPENSTACK):
    pytest.skip("the openstack command (python-openstackclient) is not installed",
                allow_module_level=True)
openstack_sdk = pytest.importorskip("openstack")

N_PORTS = 6          # identity, compute, placement, image, network, volume
DEADLINE = 60        # seconds any one wait may take
CLI_TIMEOUT = 90     # seconds any one command may take


def _free_port_base():
    """The first of N_PORTS consecutive free ports."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + N_PORTS >= 65535:
            continue
        socks = []
        try:
            for p in range(base, base + N_PORTS):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", p))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free port range")


def _wait(what, fn, timeout=DEADLINE, interval=0.3):
    end = time.monotonic() + timeout
    last = None
    while time.monotonic() < end:
        last = fn()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


class Cloud:
    """A running `novella up` and the means to drive it."""

    def __init__(self, data_dir, port_base, proc):
        self.data_dir = data_dir
        self.port_base = port_base
        self.proc = proc
        self.clouds_yaml = os.path.join(data_dir, "clouds.yaml")
        self.env = dict(os.environ, OS_CLIENT_CONFIG_FILE=self.clouds_yaml)
        for key in [k for k in self.env if k.startswith("OS_") and k != "OS_CLIENT_CONFIG_FILE"]:
            del self.env[key]

    def run(self, *args, cloud="novella-admin", fmt=True):
        """``openstack --os-cloud CLOUD ARGS [-f json]`` -> CompletedProcess."""
        cmd = [OPENSTACK, "--os-cloud", cloud, *args]
        if fmt:
            cmd += ["-f", "json"]
        return subprocess.run(cmd, env=self.env, capture_output=True, text=True,
                              timeout=CLI_TIMEOUT)

    def osc(self, *args, cloud="novella-admin", fmt=True):
        """Run a command that must succeed; its JSON output (or text without -f json)."""
        res = self.run(*args, cloud=cloud, fmt=fmt)
        assert res.returncode == 0, f"openstack {' '.join(args)} failed:\n{res.stderr}"
        return json.loads(res.stdout) if fmt and res.stdout.strip() else res.stdout

    def parallel(self, *commands):
        """Several independent commands at once: [(args...), ...] -> their outputs."""
        with concurrent.futures.ThreadPoolExecutor(len(commands)) as pool:
            return list(pool.map(lambda c: self.osc(*c), commands))

    def connect(self, cloud="novella-admin"):
        from openstack import config, connection
        region = config.OpenStackConfig(config_files=[self.clouds_yaml],
                                        load_envvars=False).get_one(cloud=cloud)
        return connection.Connection(config=region)


@pytest.fixture(scope="module")
def cloud(tmp_path_factory):
    data_dir = str(tmp_path_factory.mktemp("novella-up"))
    port_base = _free_port_base()
    log = open(os.path.join(data_dir, "novella-up.log"), "w")
    proc = subprocess.Popen([sys.executable, "-m", "novella.cmd.main", "up", "--data-dir", data_dir,
                             "--port-base", str(port_base), "--host", "127.0.0.1"],
                            stdout=log, stderr=subprocess.STDOUT,
                            cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    c = Cloud(data_dir, port_base, proc)
    try:
        def ready():
            if proc.poll() is not None:
                raise AssertionError(f"novella up exited: {open(log.name).read()[-3000:]}")
            if not os.path.exists(c.clouds_yaml):
                return False
            try:
                return requests.get(f"http://127.0.0.1:{port_base + 5}/", timeout=2).status_code
            except requests.RequestException:
                return False
        _wait("novella up", ready, timeout=90)
        yield c
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        log.close()


def _server_status(conn, server_id, status):
    def check():
        s = conn.compute.get_server(server_id)
        assert s.status != "ERROR", f"server {server_id} went to ERROR: {s.fault}"
        return s if s.status == status and not s.task_state else None
    return _wait(f"server {server_id} {status}", check)


def _flavor_name(server_json):
    flavor = server_json["flavor"]
    return flavor["name"] if isinstance(flavor, dict) else flavor.split(" ")[0]


def _allocations(cloud, server_id):
    """{resource provider uuid: resources} of a consumer, from the CLI."""
    rows = cloud.osc("resource provider allocation show", server_id)
    return {r["resource_provider"]: r["resources"] for r in rows}


def test_openstack_cli(cloud):
    osc = cloud.osc
    admin = cloud.connect()

    # -- what is there: flavors, images, networks, resource providers ----------------
    flavors, images, networks, providers = cloud.parallel(
        ("flavor", "list"), ("image", "list"), ("network", "list"),
        ("resource", "provider", "list"))
    assert {"m1.tiny", "m1.small", "m1.medium"} <= {f["Name"] for f in flavors}
    assert [(i["Name"], i["Status"]) for i in images] == [("cirros", "active")]
    assert [n["Name"] for n in networks] == ["private"] and len(networks[0]["Subnets"]) == 1
    rps = {p["name"]: p["uuid"] for p in providers}
    assert sorted(rps) == ["cell1-host1", "cell1-host2", "cell2-host1", "cell2-host2"]

    flavor = osc("flavor", "create", "--ram", "256", "--vcpus", "1", "--disk", "1", "e2e.small")
    assert (flavor["name"], flavor["ram"], flavor["vcpus"], flavor["disk"]) == \
        ("e2e.small", 256, 1, 1)

    # -- a server: create, list, show, allocations -------------------------------------
    server = osc("server", "create", "--image", "cirros", "--network", "private",
                 "--flavor", "m1.tiny", "--wait", "e2e-vm")
    sid = server["id"]
    assert server["status"] == "ACTIVE" and _flavor_name(server) == "m1.tiny"
    host = server["OS-EXT-SRV-ATTR:host"]
    assert host in rps
    assert server["addresses"]["private"][0].startswith("10.0.0.")

    listed, shown, allocs, inventory = cloud.parallel(
        ("server", "list"), ("server", "show", sid),
        ("resource", "provider", "allocation", "show", sid),
        ("resource", "provider", "inventory", "list", rps[host]))
    assert [(s["Name"], s["Status"]) for s in listed] == [("e2e-vm", "ACTIVE")]
    assert shown["OS-EXT-SRV-ATTR:host"] == host and shown["status"] == "ACTIVE"
    assert [(a["resource_provider"], a["resources"]) for a in allocs] == \
        [(rps[host], {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1})]
    assert {i["resource_class"] for i in inventory} >= {"VCPU", "MEMORY_MB", "DISK_GB"}
    usage = {u["resource_class"]: u["usage"] for u in
             osc("resource", "provider", "usage", "show", rps[host])}
    assert usage["VCPU"] >= 1 and usage["MEMORY_MB"] >= 512

    # -- stop and start -----------------------------------------------------------------
    osc("server", "stop", sid, fmt=False)
    _server_status(admin, sid, "SHUTOFF")
    osc("server", "start", sid, fmt=False)
    _server_status(admin, sid, "ACTIVE")

    # -- resize + confirm -----------------------------------------------------------------
    osc("server", "resize", "--flavor", "m1.small", "--wait", sid, fmt=False)
    shown = osc("server", "show", sid)
    assert shown["status"] == "VERIFY_RESIZE" and _flavor_name(shown) == "m1.small"
    osc("server", "resize", "confirm", sid, fmt=False)
    _server_status(admin, sid, "ACTIVE")
    host = admin.compute.get_server(sid).compute_host
    allocs = _allocations(cloud, sid)
    assert allocs == {rps[host]: {"VCPU": 1, "MEMORY_MB": 2048, "DISK_GB": 20}}

    # -- resize + revert ----------------------------------------------------------------------
    osc("server", "resize", "--flavor", "m1.medium", "--wait", sid, fmt=False)
    assert admin.compute.get_server(sid).flavor.name == "m1.medium"
    osc("server", "resize", "revert", sid, fmt=False)
    reverted = _server_status(admin, sid, "ACTIVE")
    assert reverted.flavor.name == "m1.small" and reverted.compute_host == host
    assert _allocations(cloud, sid) == {rps[host]: {"VCPU": 1, "MEMORY_MB": 2048, "DISK_GB": 20}}

    # -- cold migrate to a chosen host (2.56) + confirm -------------------------------------
    cell = host.split("-")[0]
    target = next(h for h in rps if h.startswith(cell + "-") and h != host)
    osc("--os-compute-api-version", "2.56", "server", "migrate", "--host", target, "--wait",
        sid, fmt=False)
    shown = osc("server", "show", sid)
    assert shown["status"] == "VERIFY_RESIZE" and shown["OS-EXT-SRV-ATTR:host"] == target
    osc("server", "resize", "confirm", sid, fmt=False)
    migrated = _server_status(admin, sid, "ACTIVE")
    assert migrated.compute_host == target
    assert _allocations(cloud, sid) == {rps[target]: {"VCPU": 1, "MEMORY_MB": 2048,
                                                      "DISK_GB": 20}}

    migrations, events = cloud.parallel(
        ("--os-compute-api-version", "2.59", "server", "migration", "list", "--server", sid),
        ("server", "event", "list", sid))
    kinds = sorted((m["Type"], m["Status"]) for m in migrations)
    assert kinds == [("migration", "confirmed"), ("resize", "confirmed"), ("resize", "reverted")]
    assert {"create", "stop", "start", "resize", "confirmResize", "revertResize",
            "migrate"} <= {e["Action"] for e in events}

    # -- a volume attached to the server ------------------------------------------------------
    volume = osc("volume", "create", "--size", "1", "e2e-vol")
    assert volume["size"] == 1 and volume["status"] == "available"
    attached = osc("server", "add", "volume", sid, "e2e-vol")
    assert attached["Volume ID"] == volume["id"] and attached["Server ID"] == sid
    assert attached["Device"].startswith("/dev/vd")
    volume = osc("volume", "show", "e2e-vol")
    assert volume["status"] == "in-use"
    assert [(a["server_id"], a["host_name"]) for a in volume["attachments"]] == [(sid, target)]

    # -- a port ---------------------------------------------------------------------------------
    port = osc("port", "create", "--network", "private", "e2e-port")
    assert port["status"] == "DOWN" and port["binding_vif_type"] == "unbound"
    assert port["fixed_ips"][0]["ip_address"].startswith("10.0.0.")
    assert port["network_id"] == networks[0]["ID"]

    # -- a member: another project's server is 404, migrate is 403 ------------------------------
    demo = cloud.connect("novella-demo")
    image = demo.image.find_image("cirros")
    net = demo.network.find_network("private")
    own = demo.compute.create_server(name="demo-vm", flavor_id="1", image_id=image.id,
                                     networks=[{"uuid": net.id}])
    _server_status(demo, own.id, "ACTIVE")
    other, migrate = [cloud.run(*args, cloud="novella-demo", fmt=False) for args in (
        ("server", "show", sid),
        ("--os-compute-api-version", "2.56", "server", "migrate", own.id))]
    assert other.returncode != 0 and "No server with a name or ID" in other.stderr
    assert migrate.returncode != 0 and "403" in migrate.stderr
    assert demo.compute.get_server(own.id).status == "ACTIVE"
    assert [s.name for s in demo.compute.servers()] == ["demo-vm"]

    # -- delete --------------------------------------------------------------------------------------
    osc("server", "delete", "--wait", sid, fmt=False)
    assert [s["Name"] for s in osc("server", "list")] == []
    assert osc("resource", "provider", "allocation", "show", sid) == []
    volume = osc("volume", "show", "e2e-vol")
    assert volume["status"] == "available" and volume["attachments"] == []
    demo.compute.delete_server(own.id)
    _wait("demo server deleted", lambda: not list(demo.compute.servers()))


def test_openstacksdk(cloud):
    conn = cloud.connect()
    compute, placement = conn.compute, conn.placement

    assert "m1.tiny" in {f.name for f in compute.flavors()}
    providers = {p.name: p.id for p in placement.resource_providers()}
    assert len(providers) == 4
    image = conn.image.find_image("cirros")
    net = conn.network.find_network("private")
    assert image.status == "active" and net is not None

    server = compute.create_server(name="sdk-vm", flavor_id="1", image_id=image.id,
                                   networks=[{"uuid": net.id}])
    server = compute.wait_for_server(server, status="ACTIVE", wait=DEADLINE, interval=0.5)
    host = server.compute_host
    assert server.flavor.name == "m1.tiny" and host in providers

    inventories = {i.resource_class: i.total
                   for i in placement.resource_provider_inventories(providers[host])}
    assert {"VCPU", "MEMORY_MB", "DISK_GB"} <= set(inventories)

    def allocations():
        resp = placement.get(f"/allocations/{server.id}", microversion="1.28")
        return {rp: a["resources"] for rp, a in resp.json()["allocations"].items()}
    assert allocations() == {providers[host]: {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}}

    compute.stop_server(server)
    _server_status(conn, server.id, "SHUTOFF")
    compute.start_server(server)
    _server_status(conn, server.id, "ACTIVE")

    compute.resize_server(server, "2")
    resized = _server_status(conn, server.id, "VERIFY_RESIZE")
    assert resized.flavor.name == "m1.small"
    compute.confirm_server_resize(server)
    confirmed = _server_status(conn, server.id, "ACTIVE")
    assert confirmed.flavor.name == "m1.small"
    host = confirmed.compute_host
    assert allocations() == {providers[host]: {"VCPU": 1, "MEMORY_MB": 2048, "DISK_GB": 20}}

    compute.resize_server(server, "3")
    _server_status(conn, server.id, "VERIFY_RESIZE")
    compute.revert_server_resize(server)
    reverted = _server_status(conn, server.id, "ACTIVE")
    assert reverted.flavor.name == "m1.small" and reverted.compute_host == host

    cell = host.split("-")[0]
    target = next(h for h in providers if h.startswith(cell + "-") and h != host)
    compute.migrate_server(server, host=target)
    migrated = _server_status(conn, server.id, "VERIFY_RESIZE")
    assert migrated.compute_host == target
    compute.confirm_server_resize(server)
    assert _server_status(conn, server.id, "ACTIVE").compute_host == target
    assert allocations() == {providers[target]: {"VCPU": 1, "MEMORY_MB": 2048, "DISK_GB": 20}}

    migrations = sorted((m.migration_type, m.status)
                        for m in compute.migrations(instance_uuid=server.id))
    assert migrations == [("migration", "confirmed"), ("resize", "confirmed"),
                          ("resize", "reverted")]
    actions = {a.action for a in compute.server_actions(server)}
    assert {"create", "stop", "start", "resize", "migrate"} <= actions

    volume = conn.block_storage.create_volume(size=1, name="sdk-vol")
    conn.block_storage.wait_for_status(volume, "available", wait=DEADLINE, interval=0.5)
    compute.create_volume_attachment(server, volume_id=volume.id)
    assert conn.block_storage.get_volume(volume.id).status == "in-use"
    assert [a.volume_id for a in compute.volume_attachments(server)] == [volume.id]

    compute.delete_server(server)
    compute.wait_for_delete(server, wait=DEADLINE, interval=0.5)
    assert allocations() == {}
    assert conn.block_storage.get_volume(volume.id).status == "available"
