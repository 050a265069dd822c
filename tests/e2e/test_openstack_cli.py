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
import subprocess
import sys
import time

import pytest
import requests

from tests.e2e import processes

OPENSTACK = shutil.which("openstack") or os.path.join(os.path.dirname(sys.executable), "openstack")
if not os.path.exists(OPENSTACK):
    pytest.skip("the openstack command (python-openstackclient) is not installed",
                allow_module_level=True)
openstack_sdk = pytest.importorskip("openstack")

N_PORTS = 9          # identity, compute, ... optimize, novncproxy, serialproxy
DEADLINE = 60        # seconds any one wait may take
CLI_TIMEOUT = 90     # seconds any one command may take




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
        t0 = time.monotonic()
        res = self.run(*args, cloud=cloud, fmt=fmt)
        print(f"{time.monotonic() - t0:6.1f}s openstack {' '.join(args)}")
        assert res.returncode == 0, f"openstack {' '.join(args)} failed:\n{res.stderr}"
        return json.loads(res.stdout) if fmt and res.stdout.strip() else res.stdout

    def parallel(self, *commands):
        """Several independent commands at once: [(args...), ...] -> their outputs."""
        with concurrent.futures.ThreadPoolExecutor(min(len(commands), 4)) as pool:
            return list(pool.map(lambda c: self.osc(*c), commands))

    def connect(self, cloud="novella-admin"):
        from openstack import config, connection
        region = config.OpenStackConfig(config_files=[self.clouds_yaml],
                                        load_envvars=False).get_one(cloud=cloud)
        return connection.Connection(config=region)


@pytest.fixture(scope="module")
def cloud(tmp_path_factory):
    data_dir = str(tmp_path_factory.mktemp("novella-up"))
    port_base = processes.free_port_base(N_PORTS)
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


def _allocations(conn, consumer):
    """{resource provider uuid: resources} of a consumer, read through openstacksdk."""
    resp = conn.placement.get(f"/allocations/{consumer}", microversion="1.28")
    assert resp.status_code == 200, resp.text
    return {rp: a["resources"] for rp, a in resp.json()["allocations"].items()}


def test_openstack_cli(cloud):
    """Each CLI invocation costs a process start: independent ones run side by side,
    and waits and re-reads between them go through openstacksdk."""
    osc = cloud.osc
    admin = cloud.connect()
    demo = cloud.connect("novella-demo")

    # -- what is there: flavors, images, networks, resource providers ----------------
    flavors, images, networks, providers, flavor = cloud.parallel(
        ("flavor", "list"), ("image", "list"), ("network", "list"),
        ("resource", "provider", "list"),
        ("flavor", "create", "--ram", "256", "--vcpus", "1", "--disk", "1", "e2e.small"))
    assert {"m1.tiny", "m1.small", "m1.medium"} <= {f["Name"] for f in flavors}
    assert [(i["Name"], i["Status"]) for i in images] == [("cirros", "active")]
    # The demo's shared network, the external network floating IPs come from, and the
    # administrators' network on physnet1 (docs/qos.md).
    assert [n["Name"] for n in networks] == ["private", "public", "physnet1-net"]
    assert len(networks[0]["Subnets"]) == 1
    rps = {p["name"]: p["uuid"] for p in providers if ":" not in p["name"]}
    assert sorted(rps) == ["cell1-host1", "cell1-host2", "cell2-host1", "cell2-host2"]
    # Each host's simulated network agents: Open vSwitch's, with bandwidth on physnet1
    # and the tunnel; SR-IOV's, with bandwidth on its two NICs (docs/qos.md).
    assert sorted(p["name"] for p in providers if ":" in p["name"]) == sorted(
        [f"{h}:Open vSwitch agent{suffix}" for h in rps
         for suffix in ("", ":physnet1", ":tunnel")] +
        [f"{h}:NIC Switch agent{suffix}" for h in rps for suffix in ("", ":ens1", ":ens2")])
    assert (flavor["name"], flavor["ram"], flavor["vcpus"], flavor["disk"]) == \
        ("e2e.small", 256, 1, 1)

    # A server of the demo project, for the policy checks at the end.
    own = demo.compute.create_server(name="demo-vm", flavor_id="1",
                                     image_id=demo.image.find_image("cirros").id,
                                     networks=[{"uuid": demo.network.find_network("private").id}])

    # -- a server: create, list, show, allocations; a volume and a port -----------------
    server = osc("server", "create", "--image", "cirros", "--network", "private",
                 "--flavor", "m1.tiny", "e2e-vm")
    sid = server["id"]
    # The CLI shows the server as it reads it back after the POST: a fast
    # build may already be done by then.
    assert server["status"] in ("BUILD", "ACTIVE") and _flavor_name(server) == "m1.tiny"
    host = _server_status(admin, sid, "ACTIVE").compute_host
    assert host in rps

    listed, shown, allocs, inventory, usage, volume, port = cloud.parallel(
        ("server", "list"), ("server", "show", sid),
        ("resource", "provider", "allocation", "show", sid),
        ("resource", "provider", "inventory", "list", rps[host]),
        ("resource", "provider", "usage", "show", rps[host]),
        ("volume", "create", "--size", "1", "e2e-vol"),
        ("port", "create", "--network", "private", "e2e-port"))
    assert sorted((s["Name"], s["Status"]) for s in listed) == [("e2e-vm", "ACTIVE")]
    assert shown["OS-EXT-SRV-ATTR:host"] == host and shown["status"] == "ACTIVE"
    assert shown["addresses"]["private"][0].startswith("10.0.0.")
    assert [(a["resource_provider"], a["resources"]) for a in allocs] == \
        [(rps[host], {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1})]
    assert {i["resource_class"] for i in inventory} >= {"VCPU", "MEMORY_MB", "DISK_GB"}
    usage = {u["resource_class"]: u["usage"] for u in usage}
    assert usage["VCPU"] >= 1 and usage["MEMORY_MB"] >= 512
    assert volume["size"] == 1 and volume["status"] == "available" and volume["name"] == "e2e-vol"
    assert port["status"] == "DOWN" and port["binding_vif_type"] == "unbound"
    assert port["fixed_ips"][0]["ip_address"].startswith("10.0.0.")
    assert port["network_id"] == networks[0]["ID"] and port["name"] == "e2e-port"

    # -- stop and start -----------------------------------------------------------------
    osc("server", "stop", sid, fmt=False)
    assert _server_status(admin, sid, "SHUTOFF").power_state == 4
    osc("server", "start", sid, fmt=False)
    assert _server_status(admin, sid, "ACTIVE").power_state == 1

    # -- resize + confirm -----------------------------------------------------------------
    osc("server", "resize", "--flavor", "m1.small", sid, fmt=False)
    resized = _server_status(admin, sid, "VERIFY_RESIZE")
    assert resized.flavor.name == "m1.small"
    osc("server", "resize", "confirm", sid, fmt=False)
    confirmed = _server_status(admin, sid, "ACTIVE")
    host = confirmed.compute_host
    assert confirmed.flavor.name == "m1.small"
    assert _allocations(admin, sid) == {rps[host]: {"VCPU": 1, "MEMORY_MB": 2048, "DISK_GB": 20}}

    # -- resize + revert ----------------------------------------------------------------------
    osc("server", "resize", "--flavor", "m1.medium", sid, fmt=False)
    assert _server_status(admin, sid, "VERIFY_RESIZE").flavor.name == "m1.medium"
    osc("server", "resize", "revert", sid, fmt=False)
    reverted = _server_status(admin, sid, "ACTIVE")
    assert reverted.flavor.name == "m1.small" and reverted.compute_host == host
    assert _allocations(admin, sid) == {rps[host]: {"VCPU": 1, "MEMORY_MB": 2048, "DISK_GB": 20}}

    # -- cold migrate to a chosen host (2.56) + confirm -------------------------------------
    cell = host.split("-")[0]
    target = next(h for h in rps if h.startswith(cell + "-") and h != host)
    osc("--os-compute-api-version", "2.56", "server", "migrate", "--host", target, sid,
        fmt=False)
    assert _server_status(admin, sid, "VERIFY_RESIZE").compute_host == target
    osc("server", "resize", "confirm", sid, fmt=False)
    assert _server_status(admin, sid, "ACTIVE").compute_host == target
    assert _allocations(admin, sid) == {rps[target]: {"VCPU": 1, "MEMORY_MB": 2048,
                                                      "DISK_GB": 20}}

    # -- history; the volume attached; a member's view ------------------------------------
    _server_status(demo, own.id, "ACTIVE")
    migrations, events, attached = cloud.parallel(
        ("--os-compute-api-version", "2.59", "server", "migration", "list", "--server", sid),
        ("server", "event", "list", sid),
        ("server", "add", "volume", sid, "e2e-vol"))
    kinds = sorted((m["Type"], m["Status"]) for m in migrations)
    assert kinds == [("migration", "confirmed"), ("resize", "confirmed"), ("resize", "reverted")]
    assert all(m["Server UUID"] == sid for m in migrations)
    assert {"create", "stop", "start", "resize", "confirmResize", "revertResize",
            "migrate"} <= {e["Action"] for e in events}
    assert attached["Volume ID"] == volume["id"] and attached["Server ID"] == sid
    assert attached["Device"].startswith("/dev/vd")
    vol = admin.block_storage.get_volume(volume["id"])
    assert vol.status == "in-use"
    assert [(a["server_id"], a["host_name"]) for a in vol.attachments] == [(sid, target)]

    # -- live migration back to the first host, the volume with it --------------------------
    osc("--os-compute-api-version", "2.30", "server", "migrate", "--live-migration",
        "--host", host, sid, fmt=False)
    live = _wait("live migration", lambda: (lambda srv: srv if srv.status == "ACTIVE" and
                                           not srv.task_state and srv.compute_host == host
                                           else None)(admin.compute.get_server(sid)))
    assert live.power_state == 1
    assert _allocations(admin, sid) == {rps[host]: {"VCPU": 1, "MEMORY_MB": 2048, "DISK_GB": 20}}
    vol = admin.block_storage.get_volume(volume["id"])
    assert [(a["server_id"], a["host_name"]) for a in vol.attachments] == [(sid, host)]
    live_migrations = osc("--os-compute-api-version", "2.59", "server", "migration", "list",
                          "--server", sid, "--type", "live-migration")
    assert [(m["Status"], m["Source Compute"], m["Dest Compute"]) for m in live_migrations] \
        == [("completed", target, host)]

    # -- shelve (offloaded at once) and unshelve, the volume kept -------------------------
    osc("server", "shelve", sid, fmt=False)
    _server_status(admin, sid, "SHELVED_OFFLOADED")
    assert _allocations(admin, sid) == {}
    # The volume waits on a reserved attachment, as Cinder shows it.
    assert admin.block_storage.get_volume(volume["id"]).status == "reserved"
    osc("server", "unshelve", sid, fmt=False)
    host = _server_status(admin, sid, "ACTIVE").compute_host
    assert _allocations(admin, sid) == {rps[host]: {"VCPU": 1, "MEMORY_MB": 2048, "DISK_GB": 20}}
    vol = admin.block_storage.get_volume(volume["id"])
    assert [(a["server_id"], a["host_name"]) for a in vol.attachments] == [(sid, host)]

    # A member: another project's server is 404 (not found), migrate is 403.
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        other, migrate = pool.map(lambda args: cloud.run(*args, cloud="novella-demo", fmt=False), [
            ("server", "show", sid),
            ("--os-compute-api-version", "2.56", "server", "migrate", own.id)])
    assert other.returncode != 0 and sid in other.stderr and "No Server found" in other.stderr
    assert migrate.returncode != 0 and "403" in migrate.stderr
    # The same through openstacksdk, with the status codes.
    with pytest.raises(openstack_sdk.exceptions.NotFoundException):
        demo.compute.get_server(sid)
    with pytest.raises(openstack_sdk.exceptions.ForbiddenException):
        demo.compute.migrate_server(own.id)
    assert demo.compute.get_server(own.id).status == "ACTIVE"
    assert [s.name for s in demo.compute.servers()] == ["demo-vm"]

    # -- delete --------------------------------------------------------------------------------------
    osc("server", "delete", sid, fmt=False)
    _wait("server deleted", lambda: admin.compute.find_server(sid) is None)
    assert [s.name for s in admin.compute.servers(all_projects=True)] == ["demo-vm"]
    assert _allocations(admin, sid) == {}
    vol = admin.block_storage.get_volume(volume["id"])
    assert vol.status == "available" and vol.attachments == []
    demo.compute.delete_server(own.id)
    demo.compute.wait_for_delete(own, wait=DEADLINE, interval=0.5)


def test_openstacksdk(cloud):
    conn = cloud.connect()
    compute, placement = conn.compute, conn.placement

    assert "m1.tiny" in {f.name for f in compute.flavors()}
    # The compute nodes (their network agents' providers are named <host>:...).
    providers = {p.name: p.id for p in placement.resource_providers() if ":" not in p.name}
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
        return _allocations(conn, server.id)
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


def test_openstack_cli_qos(cloud):
    """A QoS policy with a minimum-bandwidth rule, a port with it, a server with the port:
    the server's allocation takes the bandwidth from its host's physnet1 provider."""
    osc, admin = cloud.osc, cloud.connect()
    policy = osc("network", "qos", "policy", "create", "--share", "e2e-bw")
    rule = osc("network", "qos", "rule", "create", "--type", "minimum-bandwidth",
               "--min-kbps", "250000", "--egress", "e2e-bw")
    assert (rule["min_kbps"], rule["direction"]) == (250000, "egress")
    types, shown, rules = cloud.parallel(
        ("network", "qos", "rule", "type", "list"), ("network", "qos", "policy", "show", "e2e-bw"),
        ("network", "qos", "rule", "list", "e2e-bw"))
    assert {"minimum_bandwidth", "minimum_packet_rate", "bandwidth_limit"} <= \
        {t["Type"] for t in types}
    assert shown["id"] == policy["id"] and shown["shared"] is True
    assert [(r["ID"], r["Min Kbps"]) for r in rules] == [(rule["id"], 250000)]

    port = osc("port", "create", "--network", "physnet1-net", "--qos-policy", "e2e-bw",
               "e2e-qos-port")
    assert port["qos_policy_id"] == policy["id"]
    [group] = port["resource_request"]["request_groups"]
    assert group["resources"] == {"NET_BW_EGR_KILOBIT_PER_SEC": 250000}
    assert group["required"] == ["CUSTOM_PHYSNET_PHYSNET1", "CUSTOM_VNIC_TYPE_NORMAL"]

    sid = osc("--os-compute-api-version", "2.72", "server", "create", "--image", "cirros",
              "--flavor", "m1.tiny", "--port", port["id"], "e2e-qos-vm")["id"]
    host = _server_status(admin, sid, "ACTIVE").compute_host
    rps = {p["name"]: p["uuid"] for p in osc("resource", "provider", "list")}
    bw_rp = rps[f"{host}:Open vSwitch agent:physnet1"]
    usage, allocs, bound = cloud.parallel(
        ("resource", "provider", "usage", "show", bw_rp),
        ("resource", "provider", "allocation", "show", sid), ("port", "show", port["id"]))
    assert {u["resource_class"]: u["usage"] for u in usage} == \
        {"NET_BW_EGR_KILOBIT_PER_SEC": 250000, "NET_BW_IGR_KILOBIT_PER_SEC": 0}
    assert sorted((a["resource_provider"], a["resources"]) for a in allocs) == sorted(
        [(rps[host], {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}),
         (bw_rp, {"NET_BW_EGR_KILOBIT_PER_SEC": 250000})])
    assert bound["binding_profile"]["allocation"] == {group["id"]: bw_rp}

    osc("server", "delete", sid, fmt=False)
    _wait("server deleted", lambda: admin.compute.find_server(sid) is None)
    usage = osc("resource", "provider", "usage", "show", bw_rp)
    assert {u["resource_class"]: u["usage"] for u in usage}["NET_BW_EGR_KILOBIT_PER_SEC"] == 0
    osc("port", "delete", port["id"], fmt=False)
    osc("network", "qos", "policy", "delete", "e2e-bw", fmt=False)


def test_openstack_cli_quotas(cloud):
    """The unmodified `openstack quota set/show` and `openstack limits show --absolute`."""
    osc = cloud.osc
    before = osc("quota", "show", "--compute")
    assert _quota(before, "instances") == 10
    osc("quota", "set", "--instances", "7", "--cores", "15", "admin", fmt=False)
    after = osc("quota", "show", "--compute")
    assert (_quota(after, "instances"), _quota(after, "cores")) == (7, 15)
    absolute = {row["Name"]: row["Value"] for row in osc("limits", "show", "--absolute")}
    assert (absolute["max_total_instances"], absolute["max_total_cores"]) == (7, 15)
    osc("quota", "set", "--instances", "10", "--cores", "20", "admin", fmt=False)


def _quota(listing, name):
    """A limit from `openstack quota show -f json` (a mapping, or rows in newer clients)."""
    if isinstance(listing, dict):
        return listing[name]
    return {row["Resource"]: row["Limit"] for row in listing}[name]


def test_openstack_cli_guest_actions(cloud):
    """pause, suspend, lock, rescue, image create, console log and rebuild, unmodified."""
    osc, admin = cloud.osc, cloud.connect()
    sid = osc("server", "create", "--image", "cirros", "--network", "private",
              "--flavor", "m1.tiny", "guest")["id"]
    _server_status(admin, sid, "ACTIVE")
    held = _allocations(admin, sid)
    for action, status in (("pause", "PAUSED"), ("unpause", "ACTIVE"),
                           ("suspend", "SUSPENDED"), ("resume", "ACTIVE"),
                           ("rescue", "RESCUE"), ("unrescue", "ACTIVE")):
        osc("server", action, sid, fmt=False)
        _server_status(admin, sid, status)
    osc("--os-compute-api-version", "2.73", "server", "lock", "--reason", "maintenance", sid,
        fmt=False)
    locked = admin.compute.get_server(sid)
    assert locked.is_locked and locked.locked_reason == "maintenance"
    osc("server", "unlock", sid, fmt=False)
    assert not admin.compute.get_server(sid).is_locked
    image = osc("server", "image", "create", "--name", "guest-snap", "--wait", sid)
    assert (image["name"], image["status"]) == ("guest-snap", "active")
    log = osc("console", "log", "show", "--lines", "3", sid, fmt=False)
    assert "login:" in log
    osc("server", "rebuild", "--image", image["id"], sid, fmt=False)
    rebuilt = _server_status(admin, sid, "ACTIVE")
    assert rebuilt.image.id == image["id"]
    assert _allocations(admin, sid) == held  # same host, same resources
    osc("server", "delete", sid, fmt=False)
    _wait("server deleted", lambda: admin.compute.find_server(sid) is None)
    osc("image", "delete", image["id"], fmt=False)


def test_openstack_cli_evacuate(cloud):
    """Last in this module: the host it forces down stays down (until a restart)."""
    osc, admin = cloud.osc, cloud.connect()
    rps = {p["name"]: p["uuid"] for p in osc("resource", "provider", "list")}
    sid = osc("server", "create", "--image", "cirros", "--network", "private",
              "--flavor", "m1.tiny", "evacuee")["id"]
    host = _server_status(admin, sid, "ACTIVE").compute_host
    osc("--os-compute-api-version", "2.11", "compute", "service", "set", "--down", host,
        "nova-compute", fmt=False)
    osc("server", "evacuate", sid, fmt=False)
    evacuated = _wait("evacuation", lambda: (lambda srv: srv if srv.status == "ACTIVE" and
                                            not srv.task_state and srv.compute_host != host
                                            else None)(admin.compute.get_server(sid)))
    new_host = evacuated.compute_host
    assert new_host.split("-")[0] == host.split("-")[0]          # never leaves the cell
    assert _allocations(admin, sid) == {rps[new_host]: {"VCPU": 1, "MEMORY_MB": 512,
                                                        "DISK_GB": 1}}
    migrations = osc("--os-compute-api-version", "2.59", "server", "migration", "list",
                     "--server", sid, "--type", "evacuation")
    assert [(m["Status"], m["Source Compute"], m["Dest Compute"]) for m in migrations] \
        == [("done", host, new_host)]
    # The host stays down until its compute service has started again and cleaned up.
    up = cloud.run("--os-compute-api-version", "2.53", "compute", "service", "set", "--up",
                   host, "nova-compute", fmt=False)
    assert up.returncode != 0 and "Failed to set service state to up" in up.stderr
    osc("server", "delete", sid, fmt=False)
    _wait("server deleted", lambda: admin.compute.find_server(sid) is None)
    assert _allocations(admin, sid) == {}


def test_openstack_cli_multi_create(cloud):
    """`openstack server create --min N --max N` at 2, and up to the instances quota
    (the client sends the image as a block device mapping for each server); one more
    than the quota is refused and changes nothing; the books after, and after delete."""
    admin = cloud.connect()
    project = admin.current_project_id
    quota = _quota(cloud.osc("quota", "show", "--compute"), "instances")
    already = len(list(admin.compute.servers(project_id=project)))

    def usage_by_rp():
        return {rp.id: admin.placement.get(
            f"/resource_providers/{rp.id}/usages").json()["usages"].get("VCPU", 0)
            for rp in admin.placement.resource_providers() if ":" not in rp.name}

    before = usage_by_rp()
    for count in (2, quota - already):
        name = f"many{count}"
        cloud.osc("server", "create", "--image", "cirros", "--network", "private",
                  "--flavor", "m1.tiny", "--min", str(count), "--max", str(count), name)
        ids = [s.id for s in admin.compute.servers(name=f"^{name}-")]
        assert len(ids) == count
        for sid in ids:
            _server_status(admin, sid, "ACTIVE")
            (resources,) = _allocations(admin, sid).values()
            assert resources == {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}
        assert sum(usage_by_rp().values()) == sum(before.values()) + count
        refused = cloud.run("server", "create", "--image", "cirros", "--network", "private",
                            "--flavor", "m1.tiny", "--min", str(quota - already - count + 1),
                            "--max", str(quota), "over")
        assert refused.returncode != 0 and "Quota exceeded" in refused.stderr, refused.stderr
        assert not list(admin.compute.servers(name="^over"))
        cloud.osc("server", "delete", "--wait", *ids, fmt=False)
        assert all(_allocations(admin, sid) == {} for sid in ids)
        assert usage_by_rp() == before


def test_novella_up_writes_the_configuration_manage_reads(cloud):
    """`novella up` leaves nova.conf and placement.conf (owner-only: they hold
    passwords) that `novella manage --config-file` reads, says where, and keeps
    warnings out of the terminal."""
    nova_conf = os.path.join(cloud.data_dir, "nova.conf")
    placement_conf = os.path.join(cloud.data_dir, "placement.conf")
    for path in (nova_conf, placement_conf):
        assert os.stat(path).st_mode & 0o777 == 0o600
    terminal = open(os.path.join(cloud.data_dir, "novella-up.log")).read()
    assert f"Configuration for novella manage --config-file: {nova_conf}" in terminal
    assert f"http://127.0.0.1:{cloud.port_base + 6}/dashboard/" in terminal
    assert "Warning" not in terminal and "deprecat" not in terminal.lower()

    def manage(*args):
        return subprocess.run([sys.executable, "-m", "novella.cmd.main", "manage",
                               "--config-file", nova_conf, *args], capture_output=True,
                              text=True, timeout=CLI_TIMEOUT)
    cells = manage("cell_v2", "list_cells")
    assert cells.returncode == 0, cells.stdout + cells.stderr
    assert [line.split("|")[1].strip() for line in cells.stdout.splitlines()[3:-1]] == [
        "cell0", "cell1", "cell2"]
    # Placement reached through Keystone, and no allocation left by the flows before
    # (the evacuated server deleted while its source is down among them).
    audit = manage("placement", "audit", "--verbose")
    assert audit.returncode == 0, audit.stdout + audit.stderr
    assert "Traceback" not in audit.stdout + audit.stderr
    hosts = manage("cell_v2", "list_hosts")
    assert hosts.returncode == 0 and "cell1-host1" in hosts.stdout
