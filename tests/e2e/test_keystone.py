"""The real Keystone in front of separate services: `novella up --separate --keystone`.

One deployment for the module (Keystone under gunicorn on PostgreSQL, every
Novella service a process of its own over RabbitMQ, two cells of one host),
driven with nothing but the `openstack` command and the clouds.yaml it
writes: as admin and as a member, who is refused the administrators'
actions; and a token revoked in Keystone is refused at once by every API.
The compute hosts and the Compute API reach the network and volume services
over their HTTP APIs through Keystone (`[neutron]`, `[cinder]`, with the
`nova` user's service token): a member's server has its port bound on its
host and a volume of the member's attached and detached there.
The configuration read by every service after its own sets
``[keystone_authtoken] token_cache_time = -1``: keystonemiddleware would
otherwise accept a token it validated for up to 300 s after its revocation
(docs/deploy.md).
"""
import concurrent.futures
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid

import pytest
import requests
import sqlalchemy as sa

from tests import backends
from tests.e2e import processes

pytestmark = [pytest.mark.postgresql, pytest.mark.rabbitmq]

BIN = os.path.dirname(sys.executable)
OPENSTACK = os.path.join(BIN, "openstack") if os.path.exists(
    os.path.join(BIN, "openstack")) else shutil.which("openstack")
N_PORTS = 9          # the all-in-one's port layout: identity, compute, ... serialproxy
UP_TIMEOUT = 420     # seconds for Keystone, the schemas and every service to start
CLI_TIMEOUT = 120


def _require_tools():
    """Keystone and the openstack command, as PostgreSQL and RabbitMQ: missing fails in CI."""
    missing = [name for name, path in (
        ("keystone-manage (the keystone package)",
         shutil.which("keystone-manage") or os.path.exists(os.path.join(BIN, "keystone-manage"))),
        ("openstack (python-openstackclient)", OPENSTACK)) if not path]
    if missing:
        backends._unavailable(" and ".join(missing), "not installed")
    if not backends._port_open("127.0.0.1", 5432):
        backends._unavailable("PostgreSQL at 127.0.0.1:5432", "port closed")
    backends.rabbit_url()


class Deployment:
    def __init__(self, data_dir, port_base, proc, name):
        self.data_dir, self.port_base, self.proc, self.name = data_dir, port_base, proc, name
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("OS_")}
        self.env["OS_CLIENT_CONFIG_FILE"] = os.path.join(data_dir, "clouds.yaml")

    def url(self, offset, path=""):
        return f"http://127.0.0.1:{self.port_base + offset}{path}"

    def run(self, *args, cloud="novella-admin"):
        return subprocess.run([OPENSTACK, "--os-cloud", cloud, *args], env=self.env,
                              capture_output=True, text=True, timeout=CLI_TIMEOUT)

    def osc(self, *args, cloud="novella-admin"):
        """A command that must succeed; its JSON output."""
        ran = self.run(*args, "-f", "json", cloud=cloud)
        assert ran.returncode == 0, f"openstack {' '.join(args)}:\n{ran.stderr}"
        return json.loads(ran.stdout) if ran.stdout.strip() else None

    def parallel(self, *commands):
        """Several ``(cloud, *args)`` commands at once -> their CompletedProcesses."""
        with concurrent.futures.ThreadPoolExecutor(len(commands)) as pool:
            return list(pool.map(lambda c: self.run(*c[1:], cloud=c[0]), commands))

    def connect(self, cloud):
        from openstack import config, connection
        region = config.OpenStackConfig(config_files=[self.env["OS_CLIENT_CONFIG_FILE"]],
                                        load_envvars=False).get_one(cloud=cloud)
        return connection.Connection(config=region)

    def log(self):
        with open(os.path.join(self.data_dir, "up.log")) as f:
            return f.read()


@pytest.fixture(scope="module")
def deployment(tmp_path_factory):
    _require_tools()
    data_dir = str(tmp_path_factory.mktemp("separate"))
    name = "novella_k" + uuid.uuid4().hex[:8]
    port_base = processes.free_port_base(N_PORTS)
    extra = os.path.join(data_dir, "test.conf")
    with open(extra, "w") as f:
        # Each request's token is checked with Keystone, so a revoked one is refused at once.
        f.write("[keystone_authtoken]\ntoken_cache_time = -1\n")
    log = open(os.path.join(data_dir, "up.log"), "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "novella.cmd.main", "up", "--separate", "--keystone",
         "--database", backends.PG_ADMIN_URL, "--transport", backends.RABBIT_URL,
         "--name", name, "--data-dir", data_dir, "--port-base", str(port_base),
         "--cells", "2", "--hosts-per-cell", "1", "--config-file", extra],
        stdout=log, stderr=subprocess.STDOUT)
    d = Deployment(data_dir, port_base, proc, name)
    try:
        def up():
            if proc.poll() is not None:
                raise AssertionError(f"novella up --separate exited:\n{d.log()[-4000:]}")
            return "Stop with Ctrl-C." in d.log()
        processes.wait("novella up --separate", up, timeout=UP_TIMEOUT, interval=1)
        yield d
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        _drop(name)


def _drop(name):
    """The deployment's databases and virtual hosts."""
    from novella.rpc import rabbit
    engine = sa.create_engine(backends.PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        for (db,) in conn.execute(sa.text("SELECT datname FROM pg_database WHERE datname LIKE :p"),
                                  {"p": f"{name}_%"}).all():
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
    engine.dispose()
    for vhost in (name, f"{name}_cell1", f"{name}_cell2"):
        rabbit.delete_vhost(f"{backends.RABBIT_URL.rstrip('/')}/{vhost}")


def test_admin_and_member_through_the_openstack_command(deployment):
    """Every command a process start: independent ones run side by side, and what
    they did is read back through openstacksdk with the admin's token."""
    d = deployment
    admin = d.connect("novella-admin")
    boot = ("server", "create", "--flavor", "m1.tiny", "--image", "cirros",
            "--network", "private", "--wait", "-f", "json")
    admin_vm, member_vm, hypervisors = d.parallel(
        ("novella-admin", *boot, "admin-vm"), ("novella-demo", *boot, "member-vm"),
        ("novella-admin", "hypervisor", "list", "-f", "json"))
    assert admin_vm.returncode == member_vm.returncode == hypervisors.returncode == 0, (
        admin_vm.stderr, member_vm.stderr, hypervisors.stderr)
    admin_vm, member_vm = json.loads(admin_vm.stdout), json.loads(member_vm.stdout)
    hosts = sorted(h["Hypervisor Hostname"] for h in json.loads(hypervisors.stdout))
    assert hosts == ["cell1-host1", "cell2-host1"]
    assert admin_vm["status"] == member_vm["status"] == "ACTIVE"
    member_host = admin.compute.get_server(member_vm["id"]).hypervisor_hostname
    assert member_host in hosts

    # Placement, which the services reach with their Keystone credentials, holds
    # both servers' allocations, on the hosts that run them.
    providers = {rp.id: rp.name for rp in admin.placement.resource_providers()}
    for vm in (admin_vm, member_vm):
        host = admin.compute.get_server(vm["id"]).hypervisor_hostname
        assert _allocations(admin, vm["id"]) == {host: 512}, providers

    # The compute hosts called the network and volume services' APIs through Keystone
    # (as the nova user, with the member's token and the service token): the member's
    # port is bound to its host, and a volume of the member's is attached there.
    ports = list(admin.network.ports(device_id=member_vm["id"]))
    assert [(p.binding_host_id, p.status) for p in ports] == [(member_host, "ACTIVE")]
    volume = d.osc("volume", "create", "--size", "1", "data", cloud="novella-demo")
    processes.wait("the volume", lambda: d.osc(
        "volume", "show", volume["id"], cloud="novella-demo")["status"] == "available")
    ran = d.run("server", "add", "volume", member_vm["id"], volume["id"], cloud="novella-demo")
    assert ran.returncode == 0, ran.stderr
    processes.wait("the attachment", lambda: d.osc(
        "volume", "show", volume["id"], cloud="novella-demo")["status"] == "in-use")
    attached = admin.block_storage.get_volume(volume["id"]).attachments
    assert [(a["server_id"], a["host_name"]) for a in attached] == [(member_vm["id"],
                                                                     member_host)]
    ran = d.run("server", "remove", "volume", member_vm["id"], volume["id"],
                cloud="novella-demo")
    assert ran.returncode == 0, ran.stderr
    processes.wait("the detachment", lambda: d.osc(
        "volume", "show", volume["id"], cloud="novella-demo")["status"] == "available")

    # The member sees its own server only, and is refused the administrators' actions.
    listed, *refused = d.parallel(
        ("novella-demo", "server", "list", "-f", "json"),
        ("novella-demo", "hypervisor", "list"),
        ("novella-demo", "server", "migrate", member_vm["id"]),
        ("novella-demo", "resource", "provider", "list"))
    assert [s["ID"] for s in json.loads(listed.stdout)] == [member_vm["id"]]
    for ran in refused:
        assert ran.returncode == 1 and "403" in ran.stderr, (ran.args, ran.stderr)
    # ... and the refused migration changed nothing.
    after = admin.compute.get_server(member_vm["id"])
    assert (after.status, after.hypervisor_hostname) == ("ACTIVE", member_host)
    assert list(admin.compute.migrations()) == []
    assert _allocations(admin, member_vm["id"]) == {member_host: 512}

    servers = [admin.compute.get_server(vm["id"]) for vm in (admin_vm, member_vm)]
    for server in servers:
        admin.compute.delete_server(server)
    for server in servers:
        admin.compute.wait_for_delete(server, wait=180)
    # The ports made for them went with them.
    assert list(admin.network.ports(device_id=member_vm["id"])) == []
    ran = d.run("volume", "delete", volume["id"], cloud="novella-demo")
    assert ran.returncode == 0, ran.stderr
    assert [v.id for v in admin.block_storage.volumes(all_projects=True)] == []
    processes.wait("usages back to zero", lambda: all(
        not any(admin.placement.get(f"/resource_providers/{rp}/usages").json()["usages"].values())
        for rp in providers))


def _allocations(conn, consumer):
    """{provider name: MEMORY_MB} of a consumer."""
    names = {rp.id: rp.name for rp in conn.placement.resource_providers()}
    allocs = conn.placement.get(f"/allocations/{consumer}").json()["allocations"]
    return {names[rp]: a["resources"]["MEMORY_MB"] for rp, a in allocs.items()}


def test_a_revoked_token_is_refused_by_every_api(deployment):
    d = deployment
    token = d.osc("token", "issue")
    project = token["project_id"]
    urls = {"compute": d.url(1, "/v2.1/servers"), "placement": d.url(2, "/resource_providers"),
            "image": d.url(3, "/v2/images"), "network": d.url(4, "/v2.0/networks"),
            "volume": d.url(5, f"/v3/{project}/volumes")}

    def statuses():
        return {name: requests.get(url, headers={"X-Auth-Token": token["id"],
                                                 "OpenStack-API-Version": "placement 1.39"},
                                   timeout=30).status_code
                for name, url in urls.items()}
    assert statuses() == dict.fromkeys(urls, 200)
    ran = d.run("token", "revoke", token["id"])
    assert ran.returncode == 0, ran.stderr
    assert statuses() == dict.fromkeys(urls, 401)
    # Another token of the same user is still good.
    other = d.osc("token", "issue")["id"]
    assert requests.get(urls["compute"], headers={"X-Auth-Token": other},
                        timeout=30).status_code == 200


def test_a_service_that_dies_is_started_again(deployment):
    """The supervisor notices a killed scheduler, says so with its log, and starts
    it again; a server booted afterwards is scheduled by the new one."""
    d = deployment
    pid = int(subprocess.run(["pgrep", "-f", "-P", str(d.proc.pid), "serve scheduler"],
                             capture_output=True, text=True).stdout.split()[0])
    os.kill(pid, signal.SIGKILL)
    processes.wait("the restart notice", lambda: "scheduler exited with status -9; starting "
                   "it again" in d.log(), interval=1)
    processes.wait("a new scheduler", lambda: subprocess.run(
        ["pgrep", "-f", "-P", str(d.proc.pid), "serve scheduler"],
        capture_output=True, text=True).stdout.split() not in ([], [str(pid)]), interval=1)
    time.sleep(3)  # its queue consumer
    vm = d.osc("server", "create", "--flavor", "m1.tiny", "--image", "cirros",
               "--network", "private", "--wait", "after-restart")
    assert vm["status"] == "ACTIVE"
    d.run("server", "delete", "--wait", vm["id"])
