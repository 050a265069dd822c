"""A plain `pip install .` (no extras) into a fresh virtualenv starts every service.

The virtualenv has none of the test dependencies, so a module of the package
importing one of them, or an install dependency missing from pyproject.toml,
stops a service here. Every service runs from the virtualenv's `novella`
command, on SQLite and the in-process transport: placement, the Compute API,
the image, network and volume APIs (under gunicorn), conductor, scheduler and
a compute host, which registers its provider in the Placement it started
against.
"""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
READY = {"placement": "Placement API listening on", "api": "Compute API listening on",
         "image": "Image API listening on", "network": "Network API listening on",
         "volume": "Volume API listening on", "conductor": "Conductor serving on",
         "scheduler": "Scheduler serving on", "compute": "Compute host h1 serving"}


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _get(url):
    req = urllib.request.Request(url, headers={"X-Auth-Token": "admin"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return resp.status, json.loads(resp.read())


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    path = tmp_path_factory.mktemp("plain") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, timeout=300)
    ran = subprocess.run([str(path / "bin" / "pip"), "install", "-q", ROOT],
                         capture_output=True, text=True, timeout=1800)
    if ran.returncode != 0 and os.environ.get("CI") != "true" and (
            "No matching distribution" in ran.stderr or "connection" in ran.stderr.lower()):
        pytest.skip("the package index is not reachable: " + ran.stderr[-300:])
    assert ran.returncode == 0, ran.stderr[-3000:]
    return path


def test_every_service_starts_from_a_plain_install(venv, tmp_path):
    python = str(venv / "bin" / "python")
    novella = str(venv / "bin" / "novella")
    # Nothing of the test extra is there.
    probe = subprocess.run([python, "-c", "import importlib.util as u; print([m for m in "
                            "('gabbi', 'wsgi_intercept', 'pytest', 'placement', 'nova') "
                            "if u.find_spec(m)])"], capture_output=True, text=True, check=True)
    assert probe.stdout.strip() == "[]"

    ports = {name: _free_port() for name in ("placement", "api", "image", "network", "volume")}
    placement_url = f"http://127.0.0.1:{ports['placement']}"
    (tmp_path / "nova.conf").write_text(
        f"[DEFAULT]\ntransport_url = inproc://super\nstate_path = {tmp_path}\n"
        f"[api_database]\nconnection = sqlite:///{tmp_path}/api.db\n"
        f"[database]\nconnection = sqlite:///{tmp_path}/cell1.db\n"
        f"[placement]\nendpoint_override = {placement_url}\n[api]\nauth_strategy = noauth2\n")
    (tmp_path / "placement.conf").write_text(
        f"[placement_database]\nconnection = sqlite:///{tmp_path}/placement.db\n"
        "[api]\nauth_strategy = noauth2\n")
    nova_conf, placement_conf = str(tmp_path / "nova.conf"), str(tmp_path / "placement.conf")
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.pop("PYTHONPATH", None)
    for args in (["api_db", "sync"], ["db", "sync"]):
        subprocess.run([novella, "manage", "--config-file", nova_conf, *args], check=True,
                       capture_output=True, env=env, cwd=tmp_path, timeout=300)

    procs = {}
    try:
        for name in READY:
            conf = placement_conf if name == "placement" else nova_conf
            args = [novella, "serve", name, "--config-file", conf]
            if name in ports:
                args += ["--bind", f"127.0.0.1:{ports[name]}", "--workers", "1"]
            if name == "compute":
                args += ["--host", "h1"]
            log = tmp_path / f"{name}.log"
            procs[name] = (subprocess.Popen(args, stdout=open(log, "w"), stderr=subprocess.STDOUT,
                                            env=env, cwd=tmp_path), log)
            deadline = time.monotonic() + 180
            while READY[name] not in log.read_text():
                assert procs[name][0].poll() is None and time.monotonic() < deadline, (
                    name, log.read_text()[-3000:])
                time.sleep(0.2)
            # The modules run are the virtualenv's, not the working tree's.
            assert not re.search(re.escape(ROOT) + r"/novella/", log.read_text())

        assert _get(f"http://127.0.0.1:{ports['api']}/v2.1/flavors") == (200, {"flavors": []})
        assert _get(f"http://127.0.0.1:{ports['network']}/v2.0/networks")[0] == 200
        assert _get(f"http://127.0.0.1:{ports['image']}/v2/images")[0] == 200
        assert _get(f"http://127.0.0.1:{ports['volume']}/v3/admin/volumes")[0] == 200
        status, body = _get(f"{placement_url}/resource_providers")
        assert status == 200
        assert [rp["name"] for rp in body["resource_providers"]] == ["h1"]
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
