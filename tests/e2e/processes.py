"""Helpers for the e2e tests that run Novella as real processes.

``deployment()`` starts every service as its own `novella serve ...` process
over PostgreSQL and RabbitMQ, with two cells (cell1: two hosts, cell2: one),
and stops and drops everything afterwards. The other helpers read the
Compute and Placement APIs as a client would.
"""
import contextlib
import os
import socket
import subprocess
import sys
import time
import uuid

import requests
import sqlalchemy as sa

from novella.cmd import manage
from novella.context import get_admin_context
from novella.db import cell_models as cm
from novella.db import cells as cells_mod
from tests import backends

ADMIN = {"X-Auth-Token": "admin:admin", "OpenStack-API-Version": "compute 2.79",
         "Content-Type": "application/json"}
TOKEN = {"X-Auth-Token": "admin:admin"}
PLACEMENT_VERSION = "placement 1.39"
EMBEDDED = ("image", "network", "volume")
DEADLINE = 180  # seconds any one wait may take (CI runs Tempest beside these)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_port_base(count):
    """The first of ``count`` consecutive free ports (for `novella up --port-base`)."""
    for _ in range(50):
        base = free_port()
        if base + count >= 65535:
            continue
        socks = []
        try:
            for port in range(base, base + count):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free port range")


def wait(what, fn, timeout=DEADLINE, interval=0.2):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        result = fn()
        if result:
            return result
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what}")


def is_up(url):
    try:
        return requests.get(url, timeout=2).status_code < 500
    except requests.RequestException:
        return False


def _placement_headers(token):
    return {"X-Auth-Token": token, "OpenStack-API-Version": PLACEMENT_VERSION}


def usages(placement_url, token="admin"):
    """{provider name: {resource class: used}} of every provider."""
    h = _placement_headers(token)
    out = {}
    for rp in requests.get(f"{placement_url}/resource_providers", headers=h).json()[
            "resource_providers"]:
        out[rp["name"]] = requests.get(f"{placement_url}/resource_providers/{rp['uuid']}/usages",
                                       headers=h).json()["usages"]
    return out


def allocations(placement_url, consumer, token="admin"):
    """{provider uuid: resources} of a consumer."""
    allocs = requests.get(f"{placement_url}/allocations/{consumer}",
                          headers=_placement_headers(token)).json()["allocations"]
    return {rp: a["resources"] for rp, a in allocs.items()}


def providers(placement_url, token="admin"):
    """{provider uuid: provider name}."""
    return {rp["uuid"]: rp["name"] for rp in requests.get(
        f"{placement_url}/resource_providers", headers=_placement_headers(token)).json()[
        "resource_providers"]}


def status(api, sid, headers=ADMIN):
    r = requests.get(f"{api}/servers/{sid}", headers=headers)
    return r.json()["server"]["status"] if r.status_code == 200 else r.status_code


def all_zero(placement_url, token="admin"):
    return all(v == 0 for u in usages(placement_url, token).values() for v in u.values())


def seed(deployment):
    """A public image, the default network and two flavors; returns (image, image API)."""
    from oslo_config import cfg

    from novella import conf as conf_mod
    from novella.embedded import services_from_conf
    # A configuration of its own: the process-wide one may carry other tests' overrides.
    conf = cfg.ConfigOpts()
    for module in conf_mod.MODULES:
        module.register_opts(conf)
    conf([], project="nova", default_config_files=[deployment["conf"]])
    image_api, network_api, _volumes = services_from_conf(conf)
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


def _service_command(*args):
    return [sys.executable, "-m", "novella.cmd.main", "serve", *args]


@contextlib.contextmanager
def deployment(tmp_path, conductors=1, extra_conf=""):
    """Every service in a process of its own; yields what the tests need.

    ``conductors``: how many `novella serve conductor` processes run (named
    conductor, conductor2, ...); ``extra_conf``: nova.conf text every
    service reads after the rest (e.g. a short ``[conductor] operation_lease``).
    The yielded dict's ``procs`` maps each process's name to its Popen.
    """
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

    placement_port, api_port = free_port(), free_port()
    embedded_ports = {name: free_port() for name in EMBEDDED}
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
              f"[placement]\nendpoint_override = {placement_url}\n"
              # The Compute API, conductor and compute hosts call the network, volume
              # and image services' HTTP APIs (noauth2 tokens).
              f"[neutron]\nendpoint_override = {embedded_urls['network']}\n"
              f"[cinder]\nendpoint_template = {embedded_urls['volume']}/v3\n"
              f"[glance]\nendpoint_override = {embedded_urls['image']}\n")
    (tmp_path / "nova.conf").write_text(
        common + f"[DEFAULT]\ntransport_url = {transports['super']}\n" + extra_conf)
    (tmp_path / "placement.conf").write_text(
        f"[placement_database]\nconnection = {url['placement']}\n[api]\nauth_strategy = noauth2\n")
    for cell in ("cell1", "cell2"):
        (tmp_path / f"{cell}.conf").write_text(
            common + f"[DEFAULT]\ntransport_url = {transports[cell]}\n"
                     f"[database]\nconnection = {url[cell]}\n" + extra_conf)

    env = dict(os.environ, PYTHONUNBUFFERED="1")
    nova_conf = str(tmp_path / "nova.conf")
    # As an operator does: the API database and the embedded image, network and
    # volume services' tables in it, made once before any service starts.
    subprocess.run([sys.executable, "-m", "novella.cmd.main", "manage", "--config-file", nova_conf,
                    "api_db", "sync"], env=env, check=True, timeout=DEADLINE)
    manage.map_cell0(url["api"], url["cell0"])
    for cell in ("cell1", "cell2"):
        manage.create_cell(url["api"], cell, transports[cell], url[cell])

    procs = {}
    logs = []

    def start(name, *args):
        log = open(tmp_path / f"{name}.log", "w")
        logs.append((name, tmp_path / f"{name}.log"))
        procs[name] = subprocess.Popen(_service_command(*args), stdout=log,
                                       stderr=subprocess.STDOUT, env=env)

    ok = False
    try:
        start("placement", "placement", "--config-file", str(tmp_path / "placement.conf"),
              "--bind", f"127.0.0.1:{placement_port}")
        wait("placement", lambda: is_up(placement_url))
        start("api", "api", "--config-file", nova_conf, "--bind", f"127.0.0.1:{api_port}")
        for name, port in embedded_ports.items():
            start(name, name, "--config-file", nova_conf, "--bind", f"127.0.0.1:{port}")
        for i in range(1, conductors + 1):
            start("conductor" if i == 1 else f"conductor{i}", "conductor",
                  "--config-file", nova_conf)
        start("scheduler", "scheduler", "--config-file", nova_conf)
        for cell in ("cell1", "cell2"):
            start(f"{cell}-compute", "compute", "--config-file", str(tmp_path / f"{cell}.conf"),
                  "--host", f"{cell}-host")
        # A second host in cell1, for the moves that stay in their cell.
        start("cell1-compute2", "compute", "--config-file", str(tmp_path / "cell1.conf"),
              "--host", "cell1-host2")
        api_url = f"http://127.0.0.1:{api_port}/v2.1"
        for name, service_url in [("compute", api_url), *embedded_urls.items()]:
            wait(f"{name} API", lambda service_url=service_url: is_up(service_url))

        def registered():
            counts = []
            for c in ("cell1", "cell2"):
                with cells_mod.database(url[c]).session() as s:
                    counts.append(s.scalar(sa.select(sa.func.count()).select_from(cm.ComputeNode)))
            return counts == [2, 1]
        wait("compute hosts to register", registered, timeout=120)
        assert sorted(h for _c, h in manage.discover_hosts(url["api"])) == [
            "cell1-host", "cell1-host2", "cell2-host"]
        yield {"api": api_url, "placement": placement_url, "db": url, "conf": nova_conf,
               "state_path": str(tmp_path),
               "transports": transports, "procs": procs, **embedded_urls}
        ok = True
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.terminate()
        for p in procs.values():
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
        for name, path in logs:
            if not ok or procs[name].returncode not in (0, -15, -9, None):
                sys.stderr.write(f"--- {name} log ---\n{path.read_text()[-3000:]}\n")
        cells_mod._databases.clear()
        for t in transports.values():
            rabbit.delete_vhost(t)
        for _url, drop in dbs.values():
            drop()
