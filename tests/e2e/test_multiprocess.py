"""Separate processes over RabbitMQ and PostgreSQL, two cells.

Every service runs as its own `novella serve ...` process: placement, the
Compute API, the image, network and volume APIs, the conductor, the scheduler
and one compute host per cell. Each cell has its own PostgreSQL database and
its own RabbitMQ virtual host, as its cell mapping says. Servers are booted
into both cells, listed, stopped, started and deleted; placement usages must
come back to zero. A server booted on a port made through the network API
and given a volume made through the volume API shows in those APIs.
"""
import os
import socket
import subprocess
import sys
import time
import uuid

import pytest
import requests
import sqlalchemy as sa

from novella.cmd import manage
from novella.context import get_admin_context
from novella.db import cell_models as cm
from novella.db import cells as cells_mod
from tests import backends

pytestmark = [pytest.mark.postgresql, pytest.mark.rabbitmq]

ADMIN = {"X-Auth-Token": "admin:admin", "OpenStack-API-Version": "compute 2.79",
         "Content-Type": "application/json"}
TOKEN = {"X-Auth-Token": "admin:admin"}
EMBEDDED = ("image", "network", "volume")
DEADLINE = 60  # seconds any one wait may take


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(what, fn, timeout=DEADLINE):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        result = fn()
        if result:
            return result
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _up(url):
    try:
        return requests.get(url, timeout=2).status_code < 500
    except requests.RequestException:
        return False


@pytest.fixture
def deployment(tmp_path):
    from novella.rpc import rabbit
    backends.rabbit_url()  # fails in CI, skips elsewhere, when the broker is missing
    dbs = {name: backends.create_database("postgresql") for name in
           ("api", "cell0", "cell1", "cell2", "placement")}
    url = {name: v[0] for name, v in dbs.items()}
    tag = uuid.uuid4().hex[:8]
    broker = backends.RABBIT_URL.rstrip("/")
    transports = {name: f"{broker}/novella_{tag}_{name}" for name in ("super", "cell1", "cell2")}
    for t in transports.values():
        rabbit.ensure_vhost(t)

    placement_port, api_port = _free_port(), _free_port()
    embedded_ports = {name: _free_port() for name in EMBEDDED}
    embedded_urls = {name: f"http://127.0.0.1:{port}" for name, port in embedded_ports.items()}
    placement_url = f"http://127.0.0.1:{placement_port}"
    # Cross-cell moves allowed for admins and preferred (a negative weight
    # drains the source cell), so a resize leaves its cell.
    (tmp_path / "policy.yaml").write_text('"compute:servers:resize:cross_cell": "rule:admin_api"\n')
    common = (f"[DEFAULT]\nstate_path = {tmp_path}\n"
              f"[oslo_policy]\npolicy_file = {tmp_path / 'policy.yaml'}\n"
              f"[filter_scheduler]\ncross_cell_move_weight_multiplier = -1000000\n"
              f"[api_database]\nconnection = {url['api']}\n"
              f"[api]\nauth_strategy = noauth2\n"
              f"[placement]\nendpoint_override = {placement_url}\n")
    (tmp_path / "nova.conf").write_text(common + f"[DEFAULT]\ntransport_url = {transports['super']}\n")
    (tmp_path / "placement.conf").write_text(
        f"[placement_database]\nconnection = {url['placement']}\n[api]\nauth_strategy = noauth2\n")
    for cell in ("cell1", "cell2"):
        (tmp_path / f"{cell}.conf").write_text(
            common + f"[DEFAULT]\ntransport_url = {transports[cell]}\n"
                     f"[database]\nconnection = {url[cell]}\n")

    env = dict(os.environ, PYTHONUNBUFFERED="1")
    nova_conf = str(tmp_path / "nova.conf")
    # As an operator does: the API database and the embedded image, network and
    # volume services' tables in it, made once before any service starts.
    subprocess.run([sys.executable, "-m", "novella.cmd.main", "manage", "--config-file", nova_conf,
                    "api_db", "sync"], env=env, check=True, timeout=DEADLINE)
    manage.map_cell0(url["api"], url["cell0"])
    for cell in ("cell1", "cell2"):
        manage.create_cell(url["api"], cell, transports[cell], url[cell])

    procs = []
    logs = []

    def start(name, *args):
        log = open(tmp_path / f"{name}.log", "w")
        logs.append((name, tmp_path / f"{name}.log"))
        procs.append(subprocess.Popen([sys.executable, "-m", "novella.cmd.main", "serve", *args],
                                      stdout=log, stderr=subprocess.STDOUT, env=env))

    start("placement", "placement", "--config-file", str(tmp_path / "placement.conf"),
          "--bind", f"127.0.0.1:{placement_port}")
    _wait("placement", lambda: _up(placement_url))
    start("api", "api", "--config-file", nova_conf, "--bind", f"127.0.0.1:{api_port}")
    for name, port in embedded_ports.items():
        start(name, name, "--config-file", nova_conf, "--bind", f"127.0.0.1:{port}")
    start("conductor", "conductor", "--config-file", nova_conf)
    start("scheduler", "scheduler", "--config-file", nova_conf)
    for cell in ("cell1", "cell2"):
        start(f"{cell}-compute", "compute", "--config-file", str(tmp_path / f"{cell}.conf"),
              "--host", f"{cell}-host")
    # A second host in cell1, for the moves that stay in their cell.
    start("cell1-compute2", "compute", "--config-file", str(tmp_path / "cell1.conf"),
          "--host", "cell1-host2")
    api_url = f"http://127.0.0.1:{api_port}/v2.1"
    ok = False
    try:
        for name, service_url in [("compute", api_url), *embedded_urls.items()]:
            _wait(f"{name} API", lambda service_url=service_url: _up(service_url))

        def registered():
            counts = []
            for c in ("cell1", "cell2"):
                with cells_mod.database(url[c]).session() as s:
                    counts.append(s.scalar(sa.select(sa.func.count()).select_from(cm.ComputeNode)))
            return counts == [2, 1]
        _wait("compute hosts to register", registered, timeout=120)
        assert sorted(h for _c, h in manage.discover_hosts(url["api"])) == [
            "cell1-host", "cell1-host2", "cell2-host"]
        yield {"api": api_url, "placement": placement_url, "db": url, "conf": nova_conf,
               "transports": transports, **embedded_urls}
        ok = True
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
        for name, path in logs:
            if not ok or any(p.returncode not in (0, -15, None) for p in procs):
                sys.stderr.write(f"--- {name} log ---\n{path.read_text()[-3000:]}\n")
        cells_mod._databases.clear()
        for t in transports.values():
            rabbit.delete_vhost(t)
        for _url, drop in dbs.values():
            drop()


def _usages(placement_url):
    h = {"X-Auth-Token": "admin", "OpenStack-API-Version": "placement 1.39"}
    out = {}
    for rp in requests.get(f"{placement_url}/resource_providers", headers=h).json()["resource_providers"]:
        out[rp["name"]] = requests.get(f"{placement_url}/resource_providers/{rp['uuid']}/usages",
                                       headers=h).json()["usages"]
    return out


def _status(api, sid):
    r = requests.get(f"{api}/servers/{sid}", headers=ADMIN)
    return r.json()["server"]["status"] if r.status_code == 200 else r.status_code


def _seed(deployment):
    """A public image, the default network and two flavors; returns the image."""
    from novella.conf import CONF, parse_args
    from novella.embedded import services_from_conf
    parse_args([], default_config_files=[deployment["conf"]])
    image_api, network_api, _volumes = services_from_conf(CONF)
    ctxt = get_admin_context()
    image = image_api.create(ctxt, name="cirros", visibility="public",
                             disk_format="qcow2", container_format="bare")
    image_api.upload(ctxt, image["id"], b"image bytes\n" * 32)
    network_api.ensure_default_network(ctxt)
    for flavorid, ram in (("small", 512), ("medium", 1024)):
        r = requests.post(f"{deployment['api']}/flavors", headers=ADMIN, json={"flavor": {
            "name": flavorid, "ram": ram, "vcpus": 1, "disk": 1, "id": flavorid}})
        assert r.status_code == 200, r.text
    return image, image_api


def _allocations(placement_url, consumer):
    """{provider uuid: resources} of a consumer."""
    h = {"X-Auth-Token": "admin", "OpenStack-API-Version": "placement 1.39"}
    allocs = requests.get(f"{placement_url}/allocations/{consumer}", headers=h).json()["allocations"]
    return {rp: a["resources"] for rp, a in allocs.items()}


def test_servers_in_two_cells_across_processes(deployment):
    api, db = deployment["api"], deployment["db"]
    image, _image_api = _seed(deployment)

    ids = []
    # Two servers are pinned to a host of each cell (2.74 host), two go where
    # the scheduler sends them.
    for i, host in enumerate(("cell1-host", "cell2-host", None, None)):
        server = {"name": f"vm{i}", "flavorRef": "small", "imageRef": image["id"],
                  "networks": "auto"}
        if host:
            server["host"] = host
        r = requests.post(f"{api}/servers", json={"server": server},
                          headers=dict(ADMIN, **{"OpenStack-API-Version": "compute 2.74"}))
        assert r.status_code == 202, r.text
        ids.append(r.json()["server"]["id"])
    for sid in ids:
        _wait(f"{sid} ACTIVE", lambda sid=sid: _status(api, sid) == "ACTIVE")

    # Both cells hold servers, and each server's row is in the cell its mapping names.
    api_db = cells_mod.database(db["api"])
    by_cell = {}
    for sid in ids:
        cell = cells_mod.instance_cell(api_db, sid)
        by_cell.setdefault(cell.name, []).append(sid)
        with cells_mod.database(db[cell.name]).session() as s:
            assert s.scalars(sa.select(cm.Instance.host).where(cm.Instance.uuid == sid)).one() \
                in (f"{cell.name}-host", f"{cell.name}-host2")
    assert set(by_cell) == {"cell1", "cell2"}
    usages = _usages(deployment["placement"])
    assert sum(u["MEMORY_MB"] for u in usages.values()) == 4 * 512

    listed = requests.get(f"{api}/servers/detail", headers=ADMIN).json()["servers"]
    assert sorted(s["id"] for s in listed) == sorted(ids)

    for action, status in (("os-stop", "SHUTOFF"), ("os-start", "ACTIVE")):
        for sid in ids:
            r = requests.post(f"{api}/servers/{sid}/action", headers=ADMIN, json={action: None})
            assert r.status_code == 202, r.text
        for sid in ids:
            _wait(f"{sid} {status}", lambda sid=sid: _status(api, sid) == status)

    for sid in ids:
        assert requests.delete(f"{api}/servers/{sid}", headers=ADMIN).status_code == 204
    for sid in ids:
        _wait(f"{sid} gone", lambda sid=sid: _status(api, sid) == 404)
    _wait("usages back to zero", lambda: all(
        v == 0 for u in _usages(deployment["placement"]).values() for v in u.values()))


def test_cross_cell_resize_and_revert_across_processes(deployment):
    """One resize from cell1 to cell2 and its revert, every service in its own process."""
    api, db, placement = deployment["api"], deployment["db"], deployment["placement"]
    image, image_api = _seed(deployment)
    r = requests.post(f"{api}/servers", json={"server": {
        "name": "mover", "flavorRef": "small", "imageRef": image["id"], "networks": "auto",
        "host": "cell1-host"}}, headers=dict(ADMIN, **{"OpenStack-API-Version": "compute 2.74"}))
    assert r.status_code == 202, r.text
    sid = r.json()["server"]["id"]
    _wait("ACTIVE", lambda: _status(api, sid) == "ACTIVE")
    api_db = cells_mod.database(db["api"])
    assert cells_mod.instance_cell(api_db, sid).name == "cell1"
    (source_rp, source_alloc), = _allocations(placement, sid).items()

    r = requests.post(f"{api}/servers/{sid}/action", headers=ADMIN,
                      json={"resize": {"flavorRef": "medium"}})
    assert r.status_code == 202, r.text
    _wait("VERIFY_RESIZE", lambda: _status(api, sid) == "VERIFY_RESIZE", timeout=120)

    # The mapping follows the server to cell2; cell1 keeps a hidden copy; the
    # migration owns the source allocation and the instance the destination's.
    assert cells_mod.instance_cell(api_db, sid).name == "cell2"
    rows = {}
    for cell in ("cell1", "cell2"):
        with cells_mod.database(db[cell]).session() as s:
            rows[cell] = s.execute(sa.select(cm.Instance.hidden, cm.Instance.host).where(
                cm.Instance.uuid == sid, cm.Instance.deleted == 0)).one()
    assert rows == {"cell1": (True, "cell1-host"), "cell2": (False, "cell2-host")}
    with cells_mod.database(db["cell2"]).session() as s:
        migration = s.scalars(sa.select(cm.Migration).where(
            cm.Migration.instance_uuid == sid)).one()
    assert migration.cross_cell_move and migration.status == "finished"
    assert _allocations(placement, migration.uuid) == {source_rp: source_alloc}
    (dest_rp, dest_alloc), = _allocations(placement, sid).items()
    assert dest_rp != source_rp and dest_alloc["MEMORY_MB"] == 1024
    ctxt = get_admin_context()
    assert [i for i in image_api.list(ctxt) if i["id"] != image["id"]] == []  # snapshot gone

    r = requests.post(f"{api}/servers/{sid}/action", headers=ADMIN, json={"revertResize": None})
    assert r.status_code == 202, r.text
    _wait("ACTIVE again", lambda: _status(api, sid) == "ACTIVE", timeout=120)
    assert cells_mod.instance_cell(api_db, sid).name == "cell1"
    with cells_mod.database(db["cell2"]).session() as s:
        assert s.scalars(sa.select(cm.Instance).where(cm.Instance.uuid == sid)).all() == []
    with cells_mod.database(db["cell1"]).session() as s:
        inst = s.scalars(sa.select(cm.Instance).where(cm.Instance.uuid == sid)).one()
    assert (inst.hidden, inst.host, inst.memory_mb) == (False, "cell1-host", 512)
    _wait("source allocation handed back", lambda: _allocations(placement, sid) == {
        source_rp: source_alloc} and _allocations(placement, migration.uuid) == {})

    assert requests.delete(f"{api}/servers/{sid}", headers=ADMIN).status_code == 204
    _wait("gone", lambda: _status(api, sid) == 404)
    _wait("usages back to zero", lambda: all(
        v == 0 for u in _usages(placement).values() for v in u.values()))


def test_live_migration_and_shelve_across_processes(deployment):
    """Inside cell1, between two compute processes: live-migrate, then shelve and unshelve."""
    api, placement = deployment["api"], deployment["placement"]
    image, _image_api = _seed(deployment)
    r = requests.post(f"{api}/servers", json={"server": {
        "name": "runner", "flavorRef": "small", "imageRef": image["id"], "networks": "auto",
        "host": "cell1-host"}}, headers=dict(ADMIN, **{"OpenStack-API-Version": "compute 2.74"}))
    assert r.status_code == 202, r.text
    sid = r.json()["server"]["id"]
    _wait("ACTIVE", lambda: _status(api, sid) == "ACTIVE")
    (source_rp, alloc), = _allocations(placement, sid).items()

    def host():
        return requests.get(f"{api}/servers/{sid}", headers=ADMIN).json()["server"][
            "OS-EXT-SRV-ATTR:host"]

    r = requests.post(f"{api}/servers/{sid}/action", headers=ADMIN,
                      json={"os-migrateLive": {"host": None, "block_migration": "auto"}})
    assert r.status_code == 202, r.text
    _wait("on cell1-host2", lambda: _status(api, sid) == "ACTIVE" and host() == "cell1-host2",
          timeout=120)
    (dest_rp, dest_alloc), = _allocations(placement, sid).items()
    assert dest_rp != source_rp and dest_alloc == alloc
    migrations = requests.get(f"{api}/os-migrations?instance_uuid={sid}", headers=dict(
        ADMIN, **{"OpenStack-API-Version": "compute 2.59"})).json()["migrations"]
    assert [(m["migration_type"], m["status"]) for m in migrations] == [
        ("live-migration", "completed")]
    assert _allocations(placement, migrations[0]["uuid"]) == {}

    r = requests.post(f"{api}/servers/{sid}/action", headers=ADMIN, json={"shelve": None})
    assert r.status_code == 202, r.text
    _wait("SHELVED_OFFLOADED", lambda: _status(api, sid) == "SHELVED_OFFLOADED", timeout=120)
    assert _allocations(placement, sid) == {}
    r = requests.post(f"{api}/servers/{sid}/action", headers=ADMIN, json={"unshelve": None})
    assert r.status_code == 202, r.text
    _wait("ACTIVE again", lambda: _status(api, sid) == "ACTIVE", timeout=120)
    assert host().startswith("cell1-")                        # unshelved in its cell
    (_rp, back), = _allocations(placement, sid).items()
    assert back == alloc

    assert requests.delete(f"{api}/servers/{sid}", headers=ADMIN).status_code == 204
    _wait("gone", lambda: _status(api, sid) == 404)
    _wait("usages back to zero", lambda: all(
        v == 0 for u in _usages(placement).values() for v in u.values()))


def test_image_network_and_volume_apis_in_processes_of_their_own(deployment):
    """`novella serve image|network|volume`: each API shows what the test, the other
    API processes and the compute services wrote to the shared tables."""
    api, images, networks, volumes = (deployment[k] for k in ("api", *EMBEDDED))
    image, _image_api = _seed(deployment)

    listed = requests.get(f"{images}/v2/images", headers=TOKEN).json()["images"]
    assert [(i["id"], i["name"], i["status"], i["size"]) for i in listed] == [
        (image["id"], "cirros", "active", len(b"image bytes\n" * 32))]
    (net,) = requests.get(f"{networks}/v2.0/networks", headers=TOKEN).json()["networks"]
    assert (net["name"], net["shared"], len(net["subnets"])) == ("private", True, 1)

    r = requests.post(f"{networks}/v2.0/ports", headers=TOKEN,
                      json={"port": {"network_id": net["id"], "name": "p1"}})
    assert r.status_code == 201, r.text
    port = r.json()["port"]
    assert (port["device_id"], port["fixed_ips"][0]["subnet_id"]) == ("", net["subnets"][0])
    r = requests.post(f"{volumes}/v3/admin/volumes", headers=TOKEN, json={"volume": {
        "size": 1, "name": "data", "imageRef": image["id"]}})
    assert r.status_code == 202, r.text
    vid = r.json()["volume"]["id"]

    def port_state():
        p = requests.get(f"{networks}/v2.0/ports/{port['id']}", headers=TOKEN).json()["port"]
        return p["device_id"], p["binding:host_id"], p["fixed_ips"]

    def volume():
        return requests.get(f"{volumes}/v3/admin/volumes/{vid}", headers=TOKEN).json()["volume"]

    def volume_state():
        v = volume()
        return v["status"], [a["server_id"] for a in v["attachments"]]

    made = volume()
    assert (made["status"], made["bootable"], made["volume_image_metadata"]["image_id"]) \
        == ("available", "true", image["id"])

    r = requests.post(f"{api}/servers", headers=ADMIN, json={"server": {
        "name": "vm", "flavorRef": "small", "imageRef": image["id"],
        "networks": [{"port": port["id"]}]}})
    assert r.status_code == 202, r.text
    sid = r.json()["server"]["id"]
    _wait("ACTIVE", lambda: _status(api, sid) == "ACTIVE")
    host = requests.get(f"{api}/servers/{sid}", headers=ADMIN).json()["server"][
        "OS-EXT-SRV-ATTR:host"]
    assert port_state() == (sid, host, port["fixed_ips"])
    r = requests.post(f"{api}/servers/{sid}/os-volume_attachments", headers=ADMIN,
                      json={"volumeAttachment": {"volumeId": vid}})
    assert r.status_code == 200, r.text
    _wait("volume in-use", lambda: volume_state() == ("in-use", [sid]))

    # Deleting the server releases the port it was given and detaches the volume.
    assert requests.delete(f"{api}/servers/{sid}", headers=ADMIN).status_code == 204
    _wait("gone", lambda: _status(api, sid) == 404)
    _wait("port released", lambda: port_state() == ("", "", port["fixed_ips"]))
    _wait("volume available", lambda: volume_state() == ("available", []))
