"""A plain `pip install .` (no extras) into a fresh virtualenv starts every service.

The virtualenv is a clean one (no system site-packages) and has none of the
test dependencies, so a module of the package importing one of them, or an
install dependency missing from pyproject.toml, stops a service here. pip's
own cache makes the install quick after the first one.

Every `novella serve` service runs from the virtualenv's `novella` command,
as an operator deploys them: the databases on PostgreSQL (made with the
virtualenv's `novella manage`), the RPC services over RabbitMQ. The HTTP
APIs (placement, api, image, network, volume, optimize) run under gunicorn
and must answer; conductor, scheduler and a compute host must log their
start and stay up; the compute host registers its provider in Placement and
`novella manage cell_v2 discover_hosts` maps it to its cell.
"""
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid

import pytest

from tests import backends
from tests.e2e.processes import free_port

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HTTP = {"placement": "Placement API listening on", "api": "Compute API listening on",
        "image": "Image API listening on", "network": "Network API listening on",
        "volume": "Volume API listening on", "optimize": "Optimize API listening on"}
RPC = {"conductor": "Conductor serving on", "scheduler": "Scheduler serving on",
       "compute": "Compute host h1 serving"}
PROXIES = {"novncproxy": "novncproxy listening on", "serialproxy": "serialproxy listening on"}
# Every service `novella serve` offers (novella/cmd/main.py).
SERVICES = {**HTTP, **RPC, **PROXIES}
TEST_ONLY = ("gabbi", "wsgi_intercept", "pytest", "placement", "nova", "tempest", "keystone")


def _get(url):
    req = urllib.request.Request(url, headers={"X-Auth-Token": "admin"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return resp.status, json.loads(resp.read())


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    path = tmp_path_factory.mktemp("plain") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, timeout=300)
    cfg = subprocess.run([str(path / "bin" / "python"), "-c",
                          "import sys; print(sys.prefix != sys.base_prefix)"],
                         capture_output=True, text=True, check=True)
    assert cfg.stdout.strip() == "True"
    assert "include-system-site-packages = false" in (path / "pyvenv.cfg").read_text()
    ran = subprocess.run([str(path / "bin" / "pip"), "install", "-q",
                          "--disable-pip-version-check", "--no-compile", ROOT],
                         capture_output=True, text=True, timeout=1800, cwd=str(path))
    if ran.returncode != 0 and os.environ.get("CI") != "true" and (
            "No matching distribution" in ran.stderr or "connection" in ran.stderr.lower()):
        pytest.skip("the package index is not reachable: " + ran.stderr[-300:])
    assert ran.returncode == 0, ran.stderr[-3000:]
    return path


@pytest.fixture
def backing(tmp_path):
    """PostgreSQL databases (api, cell0, cell1, placement) and a RabbitMQ vhost."""
    from novella.rpc import rabbit
    backends.rabbit_url()  # fails in CI, skips elsewhere, when the broker is missing
    dbs = {}
    transport = "%s/novella_plain_%s" % (backends.RABBIT_URL.rstrip("/"), uuid.uuid4().hex[:8])
    try:
        for name in ("api", "cell0", "cell1", "placement"):
            dbs[name] = backends.create_database("postgresql")
        rabbit.ensure_vhost(transport)
        yield {name: url for name, (url, _drop) in dbs.items()}, transport
    finally:
        rabbit.delete_vhost(transport)
        for _url, drop in dbs.values():
            drop()


def test_every_service_is_covered():
    """The test below starts every service `novella serve` offers."""
    from novella.cmd import main
    sub = next(a for a in main.build_parser()._actions if a.dest == "command")
    service = next(a for a in sub.choices["serve"]._actions if a.dest == "service")
    assert set(service.choices) == set(SERVICES)


def test_every_service_starts_from_a_plain_install(venv, backing, tmp_path):
    urls, transport = backing
    python, novella = str(venv / "bin" / "python"), str(venv / "bin" / "novella")
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.pop("PYTHONPATH", None)
    # Nothing of the test extra is there, and novella is the installed copy.
    probe = subprocess.run(
        [python, "-c", "import importlib.util as u, json, novella; print(json.dumps("
         "[[m for m in %r if u.find_spec(m)], novella.__file__]))" % (TEST_ONLY,)],
        capture_output=True, text=True, check=True, env=env, cwd=tmp_path)
    present, where = json.loads(probe.stdout)
    assert present == [] and where.startswith(str(venv)), (present, where)

    ports = {name: free_port() for name in {**HTTP, **PROXIES}}
    placement_url = f"http://127.0.0.1:{ports['placement']}"
    (tmp_path / "nova.conf").write_text(
        f"[DEFAULT]\ntransport_url = {transport}\nstate_path = {tmp_path}\n"
        f"[api_database]\nconnection = {urls['api']}\n"
        f"[database]\nconnection = {urls['cell1']}\n"
        f"[placement]\nendpoint_override = {placement_url}\n[api]\nauth_strategy = noauth2\n")
    (tmp_path / "placement.conf").write_text(
        f"[placement_database]\nconnection = {urls['placement']}\n"
        "[api]\nauth_strategy = noauth2\n")
    nova_conf, placement_conf = str(tmp_path / "nova.conf"), str(tmp_path / "placement.conf")

    def manage(*args):
        ran = subprocess.run([novella, "manage", "--config-file", nova_conf, *args],
                             capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
        assert ran.returncode == 0, (args, ran.stdout[-2000:], ran.stderr[-3000:])
        return ran.stdout

    manage("api_db", "sync")
    manage("cell_v2", "map_cell0", "--database_connection", urls["cell0"])
    manage("cell_v2", "create_cell", "--name", "cell1")
    manage("db", "sync")

    procs = {}

    def start(name):
        conf = placement_conf if name == "placement" else nova_conf
        args = [novella, "serve", name, "--config-file", conf]
        if name in PROXIES:
            args += ["--bind", f"127.0.0.1:{ports[name]}"]
        elif name in ports:
            args += ["--bind", f"127.0.0.1:{ports[name]}", "--workers", "1"]
        if name == "compute":
            args += ["--host", "h1"]
        log = tmp_path / f"{name}.log"
        procs[name] = (subprocess.Popen(args, stdout=open(log, "w"), stderr=subprocess.STDOUT,
                                        env=env, cwd=tmp_path), log)

    def wait_started(names):
        deadline = time.monotonic() + 180
        for name in names:
            proc, log = procs[name]
            while SERVICES[name] not in log.read_text():
                assert proc.poll() is None and time.monotonic() < deadline, (
                    name, log.read_text()[-3000:])
                time.sleep(0.1)

    try:
        # The HTTP APIs together; then the RPC services, which ask Placement
        # for its versions before they serve.
        for name in HTTP:
            start(name)
        wait_started(HTTP)
        for name in {**RPC, **PROXIES}:
            start(name)
        wait_started({**RPC, **PROXIES})

        assert _get(f"http://127.0.0.1:{ports['api']}/v2.1/flavors") == (200, {"flavors": []})
        assert _get(f"http://127.0.0.1:{ports['network']}/v2.0/networks")[0] == 200
        assert _get(f"http://127.0.0.1:{ports['image']}/v2/images")[0] == 200
        assert _get(f"http://127.0.0.1:{ports['volume']}/v3/admin/volumes")[0] == 200
        assert _get(f"http://127.0.0.1:{ports['optimize']}/v1/goals")[0] == 200
        status, body = _get(f"{placement_url}/resource_providers")
        assert status == 200
        assert [rp["name"] for rp in body["resource_providers"]] == ["h1"]
        assert "Mapped host h1 to cell cell1." in manage("cell_v2", "discover_hosts")
        # The noVNC proxy serves noVNC's page; the serial proxy answers a request that
        # is no websocket with a client error.
        with urllib.request.urlopen(
                f"http://127.0.0.1:{ports['novncproxy']}/vnc_lite.html", timeout=30) as page:
            assert page.status == 200 and b"noVNC" in page.read()
        with pytest.raises(urllib.error.HTTPError) as refused:
            _get(f"http://127.0.0.1:{ports['serialproxy']}/?token=unknown")
        assert 400 <= refused.value.code < 500
        # Nothing has stopped meanwhile.
        stopped = {name: log.read_text()[-2000:] for name, (proc, log) in procs.items()
                   if proc.poll() is not None}
        assert not stopped, stopped
    finally:
        for proc, _log in procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        for proc, _log in procs.values():
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
