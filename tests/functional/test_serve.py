"""`novella serve <api>` under gunicorn (worker processes, keep-alive), the
WSGI modules for other servers, and the options a service says it misses.

Every service runs in a process of its own: `serve` and the WSGI modules read
the process-wide options.
"""
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest

from novella.db import migrate

SERVE = [sys.executable, "-m", "novella.cmd.main", "serve"]


def _children(pid):
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append(int(entry))
    return out


@pytest.fixture
def placement_server(tmp_path):
    conf = tmp_path / "placement.conf"
    conf.write_text("[api]\nauth_strategy = noauth2\n"
                    f"[placement_database]\nconnection = sqlite:///{tmp_path}/placement.db\n")
    log = open(tmp_path / "serve.log", "w+")
    proc = subprocess.Popen(SERVE + ["placement", "--config-file", str(conf), "--bind",
                                     "127.0.0.1:0", "--workers", "2", "--threads", "2"],
                            stdout=log, stderr=subprocess.STDOUT, text=True)
    try:
        url = None
        for _ in range(600):
            log.seek(0)
            found = re.search(r"Placement API listening on http://([\d.]+):(\d+)", log.read())
            if found or proc.poll() is not None:
                url = found and (found.group(1), int(found.group(2)))
                break
            time.sleep(0.1)
        log.seek(0)
        assert url, log.read()
        yield proc, url
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        log.close()


def _request(conn, method, path, body=None, headers=None):
    headers = dict({"X-Auth-Token": "admin", "OpenStack-API-Version": "placement latest"},
                   **(headers or {}))
    conn.request(method, path, body=body, headers=headers)
    resp = conn.getresponse()
    return resp, resp.read()


def test_placement_under_gunicorn_workers_keep_alive(placement_server):
    proc, (host, port) = placement_server
    conn = http.client.HTTPConnection(host, port, timeout=30)
    resp, body = _request(conn, "GET", "/")
    assert (resp.status, resp.version) == (200, 11)
    sock = conn.sock
    for name in ("rp1", "rp2"):
        resp, body = _request(conn, "POST", "/resource_providers",
                              json.dumps({"name": name}).encode(),
                              {"Content-Type": "application/json"})
        assert resp.status == 200, body
        assert resp.getheader("Connection", "keep-alive").lower() == "keep-alive"
    resp, body = _request(conn, "GET", "/resource_providers")
    assert sorted(rp["name"] for rp in json.loads(body)["resource_providers"]) == ["rp1", "rp2"]
    assert conn.sock is sock  # one TCP connection carried all four requests
    # Two worker processes under the arbiter (forked one after the other).
    for _ in range(300):
        if len(_children(proc.pid)) >= 2:
            break
        time.sleep(0.1)
    assert len(_children(proc.pid)) == 2


def test_requests_without_content_type_reach_placement_without_one(placement_server):
    _proc, (host, port) = placement_server
    conn = http.client.HTTPConnection(host, port, timeout=30)
    resp, body = _request(conn, "PUT", "/resource_providers/d3a64825-8228-4ccb-8a6c-1c6d3eb6a3e8")
    assert resp.status == 415
    assert b"The media type None is not supported" in body
    resp, body = _request(conn, "POST", "/resource_providers", b"I want a resource provider")
    assert resp.status == 400
    assert b"content-type header required" in body


def _run(args, **kwargs):
    return subprocess.run(SERVE + args, capture_output=True, text=True, timeout=120, **kwargs)


def test_serve_compute_without_any_database_for_its_services_says_so(tmp_path):
    conf = tmp_path / "nova.conf"
    conf.write_text("[DEFAULT]\ntransport_url = inproc://cell1\n"
                    f"[database]\nconnection = sqlite:///{tmp_path}/cell1.db\n"
                    "[placement]\nendpoint_override = http://127.0.0.1:9\n")
    ran = _run(["compute", "--host", "h1", "--config-file", str(conf)])
    assert ran.returncode == 1
    assert "Traceback" not in ran.stderr
    assert ran.stderr.strip().splitlines()[-1] == (
        "error: no database for the image, network, volume services: set [api_database] "
        "connection (where the image, network and volume services live by default) or "
        "[image_service] connection, [network_service] connection, [volume_service] connection")


def test_serve_compute_names_a_device_spec_that_is_not_json(tmp_path):
    conf = tmp_path / "nova.conf"
    conf.write_text("[DEFAULT]\ntransport_url = inproc://cell1\n"
                    f"[database]\nconnection = sqlite:///{tmp_path}/cell1.db\n"
                    "[pci]\ndevice_spec = {devname: ens1}\n")
    ran = _run(["compute", "--host", "h1", "--config-file", str(conf)])
    assert ran.returncode == 1 and "Traceback" not in ran.stderr
    assert ran.stderr.strip().splitlines()[-1].startswith(
        "error: [pci] device_spec '{devname: ens1}' is not JSON")


@pytest.mark.parametrize("text, missing", [
    ("[DEFAULT]\ntransport_url = inproc://x\n[placement]\nendpoint_override = http://h:9\n",
     "[api_database] connection is not set"),
    ("[DEFAULT]\ntransport_url = inproc://x\n[api_database]\nconnection = sqlite:///{tmp}/a.db\n",
     "[placement] auth_type (with Keystone) or endpoint_override (without) is not set"),
])
def test_serve_api_names_the_missing_option(tmp_path, text, missing):
    conf = tmp_path / "nova.conf"
    conf.write_text(text.format(tmp=tmp_path))
    ran = _run(["api", "--config-file", str(conf), "--bind", "127.0.0.1:0"])
    assert (ran.returncode, ran.stderr.strip().splitlines()[-1]) == (1, f"error: {missing}")


_CALL = """
import json, sys, webob
from novella.wsgi import {module} as mod
req = webob.Request.blank(sys.argv[1], headers={{"X-Auth-Token": "admin"}})
resp = req.get_response(mod.application)
print(json.dumps([resp.status_int, resp.json]))
"""


def test_wsgi_modules_read_the_configuration_the_environment_names(tmp_path):
    api_url = f"sqlite:///{tmp_path}/api.db"
    migrate.sync("api", api_url)
    for name in migrate.EMBEDDED:
        migrate.sync(name, api_url)
    (tmp_path / "nova.conf").write_text(
        "[DEFAULT]\ntransport_url = inproc://super\n"
        f"[api_database]\nconnection = {api_url}\n"
        "[placement]\nendpoint_override = http://127.0.0.1:9\n[api]\nauth_strategy = noauth2\n")
    (tmp_path / "placement.conf").write_text(
        f"[placement_database]\nconnection = sqlite:///{tmp_path}/placement.db\n"
        "[api]\nauth_strategy = noauth2\n")
    env = dict(os.environ, OS_NOVA_CONFIG_DIR=str(tmp_path), OS_PLACEMENT_CONFIG_DIR=str(tmp_path))
    env.pop("NOVELLA_PLACEMENT_CONFIG", None)
    got = {}
    for module, path in (("compute", "/v2.1/flavors"), ("placement", "/resource_providers"),
                         ("image", "/v2/images"), ("network", "/v2.0/networks"),
                         ("volume", "/v3/admin/volumes")):
        ran = subprocess.run([sys.executable, "-c", _CALL.format(module=module), path],
                             env=env, capture_output=True, text=True, timeout=120)
        assert ran.returncode == 0, ran.stderr[-2000:]
        got[module] = json.loads(ran.stdout.strip().splitlines()[-1])
    assert got["compute"] == [200, {"flavors": []}]
    assert got["placement"] == [200, {"resource_providers": []}]
    assert got["image"] == [200, {"images": [], "first": "/v2/images", "schema": "/v2/schemas/images"}]
    assert got["network"] == [200, {"networks": []}]
    assert got["volume"] == [200, {"volumes": []}]
    # Without a configuration file the import fails, naming the option.
    env["OS_NOVA_CONFIG_DIR"] = str(tmp_path / "nowhere")
    ran = subprocess.run([sys.executable, "-c", _CALL.format(module="compute"), "/"],
                         env=env, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 1
    assert ran.stderr.strip().splitlines()[-1] == (
        "novella.cmd.serve.ConfigError: [api_database] connection is not set")


def _closed_port():
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("service", ["conductor", "scheduler", "compute"])
def test_serve_says_when_placement_does_not_answer(tmp_path, service):
    api_url, cell_url = f"sqlite:///{tmp_path}/api.db", f"sqlite:///{tmp_path}/cell1.db"
    migrate.sync("api", api_url)
    for name in migrate.EMBEDDED:
        migrate.sync(name, api_url)
    migrate.sync("cell", cell_url)
    closed = _closed_port()
    conf = tmp_path / "nova.conf"
    conf.write_text(f"[DEFAULT]\ntransport_url = inproc://cell1\nstate_path = {tmp_path}\n"
                    f"[api_database]\nconnection = {api_url}\n"
                    f"[database]\nconnection = {cell_url}\n"
                    f"[placement]\nendpoint_override = http://127.0.0.1:{closed}\n")
    ran = _run([service, "--config-file", str(conf)] + (["--host", "h1"] if service == "compute"
                                                          else []))
    assert ran.returncode == 1
    assert "Traceback" not in ran.stderr
    assert ran.stderr.strip().splitlines()[-1] == (
        f"error: Placement does not answer at http://127.0.0.1:{closed} "
        "([placement] endpoint_override): start it first")


def test_serve_says_when_keystone_refuses_or_misses_the_placement_credentials(tmp_path):
    """With [placement] auth_type, a missing plugin option is named; a Keystone that
    does not answer is one line naming where Placement is looked for."""
    api_url = f"sqlite:///{tmp_path}/api.db"
    migrate.sync("api", api_url)
    closed = _closed_port()
    conf = tmp_path / "nova.conf"
    base = (f"[DEFAULT]\ntransport_url = inproc://super\n"
            f"[api_database]\nconnection = {api_url}\n[placement]\nauth_type = password\n")
    conf.write_text(base)
    ran = _run(["scheduler", "--config-file", str(conf)])
    assert (ran.returncode, ran.stderr.strip().splitlines()[-1]) == (
        1, "error: [placement] auth_url not set (needed by auth_type = password)")
    conf.write_text(base + f"auth_url = http://127.0.0.1:{closed}/v3\nusername = nova\n"
                           "password = x\nproject_name = service\nuser_domain_name = Default\n"
                           "project_domain_name = Default\n")
    ran = _run(["scheduler", "--config-file", str(conf)])
    assert ran.returncode == 1 and "Traceback" not in ran.stderr
    assert ran.stderr.strip().splitlines()[-1] == (
        f"error: Keystone at http://127.0.0.1:{closed}/v3, or the Placement its catalog names, "
        "does not answer ([placement] auth_url, region_name, valid_interfaces): start them first")



@pytest.fixture
def taken_port():
    """A port another process (here: a listening socket) holds."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    yield sock.getsockname()[1]
    sock.close()


def test_serve_on_a_taken_port_names_it_before_writing_anything(tmp_path, taken_port):
    conf = tmp_path / "placement.conf"
    conf.write_text("[api]\nauth_strategy = noauth2\n"
                    f"[placement_database]\nconnection = sqlite:///{tmp_path}/placement.db\n")
    ran = _run(["placement", "--config-file", str(conf), "--bind", f"127.0.0.1:{taken_port}"])
    assert ran.returncode == 1
    assert "Traceback" not in ran.stderr
    assert ran.stderr.strip().splitlines()[-1].startswith(
        f"error: the placement API cannot listen on 127.0.0.1:{taken_port}: "
        "Address already in use")
    assert not (tmp_path / "placement.db").exists()


def test_up_on_a_taken_port_names_it_before_writing_anything(tmp_path, taken_port):
    # --port-base puts the Compute API (offset 1) on the taken port.
    data = tmp_path / "data"
    ran = subprocess.run([sys.executable, "-m", "novella.cmd.main", "up", "--data-dir",
                          str(data), "--port-base", str(taken_port - 1)],
                         capture_output=True, text=True, timeout=120)
    assert ran.returncode == 1
    assert "Traceback" not in ran.stderr + ran.stdout
    assert ran.stderr.strip().splitlines()[-1].startswith(
        f"error: the compute API cannot listen on 127.0.0.1:{taken_port}: "
        "Address already in use")
    assert not list(data.glob("*.db"))
