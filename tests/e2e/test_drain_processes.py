"""Drains of `novella up` driven by the unmodified `openstack optimize` commands
(python-watcherclient), and a drain that survives SIGKILL of `novella up`.

`novella up` runs as a subprocess with its clouds.yaml; cross-cell moves are
allowed for administrators by a policy file. Afterwards every server is in
the other cell in its original state (ACTIVE or SHUTOFF), its allocation is on
a target host only and is exactly its flavor, no migration holds an
allocation, and the source hosts are disabled.
"""
import collections
import json
import os
import shutil
import subprocess
import sys
import time

import pytest
import requests

from tests.e2e import processes
from tests.e2e.test_crash_processes import AllInOne

OPENSTACK = shutil.which("openstack") or os.path.join(os.path.dirname(sys.executable), "openstack")
if not os.path.exists(OPENSTACK):
    pytest.skip("the openstack command (python-openstackclient) is not installed",
                allow_module_level=True)
pytest.importorskip("watcherclient")

CLI_TIMEOUT = 90
OPTIMIZE = 6          # the optimize API's offset from --port-base
HEADERS_274 = {"OpenStack-API-Version": "compute 2.74"}
TINY = {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}


@pytest.fixture
def up(tmp_path):
    clouds = []

    def make(copy_seconds=0.0):
        (tmp_path / "policy.yaml").write_text(
            '"compute:servers:resize:cross_cell": "rule:context_is_admin"\n')
        conf = tmp_path / "novella.conf"
        conf.write_text(f"[oslo_policy]\npolicy_file = {tmp_path / 'policy.yaml'}\n"
                        f"[simulated]\nresize_disk_copy_seconds = {copy_seconds}\n"
                        "vcpus = 64\n[quota]\ninstances = -1\ncores = -1\nram = -1\n")
        cloud = AllInOne(str(tmp_path / "data"), str(conf))
        clouds.append(cloud)
        return cloud
    yield make
    for cloud in clouds:
        cloud.stop()


def osc(cloud, *args):
    """``openstack --os-cloud novella-admin ARGS -f json`` (must succeed) -> its JSON."""
    env = dict(os.environ, OS_CLIENT_CONFIG_FILE=os.path.join(cloud.data_dir, "clouds.yaml"))
    for key in [k for k in env if k.startswith("OS_") and k != "OS_CLIENT_CONFIG_FILE"]:
        del env[key]
    res = subprocess.run([OPENSTACK, "--os-cloud", "novella-admin", *args, "-f", "json"],
                         env=env, capture_output=True, text=True, timeout=CLI_TIMEOUT)
    assert res.returncode == 0, f"openstack {' '.join(args)}:\n{res.stderr}"
    return json.loads(res.stdout) if res.stdout.strip() else None


def optimize_api(cloud, path):
    r = requests.get(f"{cloud.url(OPTIMIZE)}{path}", headers={
        "X-Auth-Token": cloud.books.token, "OpenStack-API-Version": "infra-optim 1.5"})
    assert r.status_code == 200, r.text
    return r.json()


def boot(cloud, host, count, stopped=0):
    """``count`` servers on ``host``; the first ``stopped`` of them stopped."""
    books = cloud.books
    images = requests.get(f"{cloud.url(3)}/v2/images", headers=books.headers).json()["images"]
    image = next(i for i in images if i["name"] == "cirros")
    r = requests.post(f"{books.api}/servers", headers=dict(books.headers, **HEADERS_274), json={
        "server": {"name": f"on-{host}", "flavorRef": "1", "imageRef": image["id"],
                   "networks": "none", "host": host, "min_count": count, "max_count": count,
                   "return_reservation_id": True}})
    assert r.status_code == 202, r.text
    rid = r.json()["reservation_id"]

    def listed():
        found = requests.get(f"{books.api}/servers?reservation_id={rid}",
                             headers=books.headers).json()["servers"]
        return [s["id"] for s in found] if len(found) == count else None
    sids = processes.wait("the servers", listed)
    for sid in sids:
        processes.wait("ACTIVE", lambda sid=sid: books.status(sid) == "ACTIVE")
    for sid in sids[:stopped]:
        r = requests.post(f"{books.api}/servers/{sid}/action", headers=books.headers,
                          json={"os-stop": None})
        assert r.status_code == 202, r.text
    for sid in sids[:stopped]:
        processes.wait("SHUTOFF", lambda sid=sid: books.status(sid) == "SHUTOFF")
    return sids


def check_drained(cloud, states):
    """Every server in cell2 in its state, moved once, its allocation exactly its
    flavor on a cell2 host; no migration holds an allocation; cell1's hosts are
    disabled and hold nothing."""
    books = cloud.books
    providers = books.providers()
    for sid, status in states.items():
        server = books.server(sid)
        assert server["status"] == status and server["OS-EXT-SRV-ATTR:host"].startswith("cell2-")
        allocs = books.allocations(sid)
        assert len(allocs) == 1 and providers[next(iter(allocs))].startswith("cell2-")
        assert next(iter(allocs.values())) == TINY
        r = requests.get(f"{books.api}/os-migrations?instance_uuid={sid}",
                         headers=dict(books.headers, **{"OpenStack-API-Version": "compute 2.59"}))
        statuses = collections.Counter(m["status"] for m in r.json()["migrations"])
        assert statuses["confirmed"] == 1, (sid, statuses)     # moved once
        for m in r.json()["migrations"]:
            assert books.allocations(m["uuid"]) == {}
    usages = books.usages()
    for name, used in usages.items():
        if name.startswith("cell1-") and "VCPU" in used:
            assert used["VCPU"] == 0 and used["MEMORY_MB"] == 0, (name, used)
    assert sum(u.get("VCPU", 0) for n, u in usages.items() if n.startswith("cell2-")) == \
        len(states)
    services = osc(cloud, "compute", "service", "list", "--service", "nova-compute")
    disabled = {s["Host"] for s in services if s["Status"] == "disabled"}
    assert disabled == {"cell1-host1", "cell1-host2"}


def test_drain_a_cell_with_openstack_optimize(up):
    cloud = up()
    cloud.start()
    sids = boot(cloud, "cell1-host1", 3, stopped=1) + boot(cloud, "cell1-host2", 2)
    states = {sid: cloud.books.status(sid) for sid in sids}
    assert sorted(states.values()) == ["ACTIVE"] * 4 + ["SHUTOFF"]

    goals = {g["Name"] for g in osc(cloud, "optimize", "goal", "list")}
    assert {"cluster_maintaining", "hardware_maintenance"} <= goals
    strategies = {s["Name"] for s in osc(cloud, "optimize", "strategy", "list",
                                         "--goal", "hardware_maintenance")}
    assert strategies == {"zone_migration", "cell_drain"}

    # The reference's own example: a host maintenance audit (planned, not started).
    audit = osc(cloud, "optimize", "audit", "create", "-g", "cluster_maintaining",
                "-s", "host_maintenance", "-p", "maintenance_node=cell1-host2")
    processes.wait("the host maintenance plan", lambda: optimize_api(
        cloud, f"/v1/audits/{audit['UUID']}")["state"] == "SUCCEEDED")
    [plan] = osc(cloud, "optimize", "actionplan", "list", "--audit", audit["UUID"])
    actions = osc(cloud, "optimize", "action", "list", "--action-plan", plan["UUID"],
                  "--detail")
    assert sorted(a["Action"] for a in actions) == ["change_nova_service_state", "migrate",
                                                    "migrate"]

    # The cell drain, started and followed with the same commands.
    audit = osc(cloud, "optimize", "audit", "create", "-g", "hardware_maintenance",
                "-s", "cell_drain", "-p", "source_cell=cell1", "-p", "parallel_total=2")
    assert audit["State"] == "PENDING" and audit["Strategy"] == "cell_drain"
    processes.wait("the drain's plan", lambda: optimize_api(
        cloud, f"/v1/audits/{audit['UUID']}")["state"] == "SUCCEEDED")
    [plan] = osc(cloud, "optimize", "actionplan", "list", "--audit", audit["UUID"])
    assert plan["State"] == "RECOMMENDED"
    osc(cloud, "optimize", "actionplan", "start", plan["UUID"])
    processes.wait("the drain", lambda: optimize_api(
        cloud, f"/v1/action_plans/{plan['UUID']}")["state"] in ("SUCCEEDED", "FAILED"))
    shown = osc(cloud, "optimize", "actionplan", "show", plan["UUID"])
    assert shown["State"] == "SUCCEEDED", shown
    actions = osc(cloud, "optimize", "action", "list", "--action-plan", plan["UUID"],
                  "--detail")
    assert collections.Counter((a["Action"], a["State"]) for a in actions) == {
        ("change_nova_service_state", "SUCCEEDED"): 2, ("migrate", "SUCCEEDED"): 5}
    # The first plan was superseded when this one started.
    assert osc(cloud, "optimize", "actionplan", "list")[0]["State"] == "SUPERSEDED"
    check_drained(cloud, states)


def test_sigkill_novella_up_mid_drain(up):
    """A 50-server drain; `novella up` is killed with SIGKILL while moves are in
    flight and started again: the plan completes, no server is moved twice and
    the books are exact."""
    cloud = up(copy_seconds=0.1)
    cloud.start()
    sids = boot(cloud, "cell1-host1", 25, stopped=5) + boot(cloud, "cell1-host2", 25)
    states = {sid: cloud.books.status(sid) for sid in sids}
    r = requests.post(f"{cloud.url(OPTIMIZE)}/v1/audits", headers={
        "X-Auth-Token": cloud.books.token, "OpenStack-API-Version": "infra-optim 1.5"},
        json={"audit_type": "ONESHOT", "strategy": "cell_drain",
              "parameters": {"source_cell": "cell1", "parallel_total": 4}})
    assert r.status_code == 201, r.text
    audit = r.json()["uuid"]
    processes.wait("the plan", lambda: optimize_api(cloud, f"/v1/audits/{audit}")["state"] ==
                   "SUCCEEDED")
    [plan] = optimize_api(cloud, f"/v1/action_plans?audit_uuid={audit}")["action_plans"]
    osc(cloud, "optimize", "actionplan", "start", plan["uuid"])

    def moved():
        return sum(a["state"] == "SUCCEEDED" and a["action_type"] == "migrate" for a in
                   optimize_api(cloud, f"/v1/actions?action_plan_uuid={plan['uuid']}")[
                       "actions"])
    processes.wait("ten servers moved", lambda: moved() >= 10, interval=0.1)
    in_flight = [a for a in optimize_api(cloud, f"/v1/actions?action_plan_uuid={plan['uuid']}")[
        "actions"] if a["state"] == "ONGOING"]
    cloud.kill()
    assert in_flight, "the kill should land while moves are in flight"
    t0 = time.monotonic()
    cloud.start()
    processes.wait("the drain to end", lambda: optimize_api(
        cloud, f"/v1/action_plans/{plan['uuid']}")["state"] in ("SUCCEEDED", "FAILED"),
        interval=0.5)
    plan = optimize_api(cloud, f"/v1/action_plans/{plan['uuid']}")
    assert plan["state"] == "SUCCEEDED", plan
    print(f"drain resumed and finished {time.monotonic() - t0:.1f} s after the restart")
    check_drained(cloud, states)


def test_drain_with_every_service_in_a_process_of_its_own(tmp_path):
    """`novella serve optimize` beside the other services (PostgreSQL, RabbitMQ): a
    cell drained through it, the moves made by the conductor and compute processes."""
    with processes.deployment(tmp_path) as d:
        image, _image_api = processes.seed(d)
        port = processes.free_port()
        log = open(tmp_path / "optimize.log", "w")
        proc = subprocess.Popen(
            [sys.executable, "-m", "novella.cmd.main", "serve", "optimize", "--config-file",
             d["conf"], "--bind", f"127.0.0.1:{port}", "--workers", "1"],
            stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, PYTHONUNBUFFERED="1"))
        d["procs"]["optimize"] = proc
        url = f"http://127.0.0.1:{port}"
        headers = {"X-Auth-Token": "admin:admin", "OpenStack-API-Version": "infra-optim 1.5"}
        processes.wait("the optimize API", lambda: processes.is_up(url))
        sids = []
        for host in ("cell1-host", "cell1-host2"):
            r = requests.post(f"{d['api']}/servers", headers=dict(
                processes.ADMIN, **HEADERS_274), json={"server": {
                    "name": host, "flavorRef": "small", "imageRef": image["id"],
                    "networks": "auto", "host": host}})
            assert r.status_code == 202, r.text
            sids.append(r.json()["server"]["id"])
        for sid in sids:
            processes.wait("ACTIVE", lambda sid=sid: processes.status(d["api"], sid) == "ACTIVE")
        r = requests.post(f"{url}/v1/audits", headers=headers, json={
            "audit_type": "ONESHOT", "strategy": "cell_drain",
            "parameters": {"source_cell": "cell1"}})
        assert r.status_code == 201, r.text
        audit = r.json()["uuid"]
        processes.wait("the plan", lambda: requests.get(
            f"{url}/v1/audits/{audit}", headers=headers).json()["state"] not in (
            "PENDING", "ONGOING"))
        shown = requests.get(f"{url}/v1/audits/{audit}", headers=headers).json()
        assert shown["state"] == "SUCCEEDED", shown
        [plan] = requests.get(f"{url}/v1/action_plans?audit_uuid={audit}",
                              headers=headers).json()["action_plans"]
        r = requests.post(f"{url}/v1/action_plans/{plan['uuid']}/start", headers=headers)
        assert r.status_code == 200, r.text
        processes.wait("the drain", lambda: requests.get(
            f"{url}/v1/action_plans/{plan['uuid']}", headers=headers).json()["state"] in (
            "SUCCEEDED", "FAILED"))
        plan = requests.get(f"{url}/v1/action_plans/{plan['uuid']}", headers=headers).json()
        assert plan["state"] == "SUCCEEDED", plan
        providers = processes.providers(d["placement"])
        for sid in sids:
            server = requests.get(f"{d['api']}/servers/{sid}", headers=processes.ADMIN).json()[
                "server"]
            assert server["status"] == "ACTIVE"
            assert server["OS-EXT-SRV-ATTR:host"] == "cell2-host"
            allocs = processes.allocations(d["placement"], sid)
            assert [providers[rp] for rp in allocs] == ["cell2-host"]
        services = requests.get(f"{d['api']}/os-services?binary=nova-compute",
                                headers=processes.ADMIN).json()["services"]
        assert {s["host"]: s["status"] for s in services} == {
            "cell1-host": "disabled", "cell1-host2": "disabled", "cell2-host": "enabled"}
        usages = processes.usages(d["placement"])
        assert usages["cell1-host"].get("MEMORY_MB", 0) == 0
        assert usages["cell2-host"]["MEMORY_MB"] == 2 * 512
