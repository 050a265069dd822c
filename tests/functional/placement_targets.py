"""Placement endpoints for the client tests: in-process or under gunicorn.

``NOVELLA_PLACEMENT_TEST_URL=http://127.0.0.1:PORT`` (and optionally
``NOVELLA_PLACEMENT_TEST_TOKEN``, default ``admin``) adds a live endpoint to
the parametrised client tests, e.g. the reference served from a scratch
virtualenv, so the same assertions hold against both.
"""
import os
import signal
import socket
import subprocess
import sys
import time

import requests

from novella.placement.client import PlacementClient

LIVE_URL = os.environ.get("NOVELLA_PLACEMENT_TEST_URL")
LIVE_TOKEN = os.environ.get("NOVELLA_PLACEMENT_TEST_TOKEN", "admin")


def _wsgi_module():
    from novella.placement import wsgi
    return wsgi


def conf_overrides(db_url):
    return {"placement_database": {"connection": db_url},
            "api": {"auth_strategy": "noauth2"}}


def novella_app(db_url):
    """Novella's placement WSGI app over ``db_url`` (schema created)."""
    wsgi = _wsgi_module()
    from novella.placement import conf as conf_mod
    return wsgi.make_app(conf_mod.make_conf(overrides=conf_overrides(db_url)))


def novella_client(db_url, **kw):
    return PlacementClient(app=novella_app(db_url), token="admin", **kw)


def live_client(**kw):
    return PlacementClient(endpoint=LIVE_URL, token=LIVE_TOKEN, **kw)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class NovellaServer:
    """Novella's placement under gunicorn on a free 127.0.0.1 port."""

    def __init__(self, db_url, workdir, workers=4, timeout=60):
        self.db_url = db_url
        self.workdir = str(workdir)
        self.workers = workers
        self.timeout = timeout
        self.proc = None
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"

    def __enter__(self):
        _wsgi_module()
        # Create the schema once, here, rather than in 4 racing workers.
        novella_app(self.db_url)
        with open(os.path.join(self.workdir, "placement.conf"), "w") as f:
            f.write("[api]\nauth_strategy = noauth2\n"
                    f"[placement_database]\nconnection = {self.db_url}\n")
        env = dict(os.environ, OS_PLACEMENT_CONFIG_DIR=self.workdir)
        env.pop("NOVELLA_PLACEMENT_CONFIG", None)
        self.log = open(os.path.join(self.workdir, "gunicorn.log"), "w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-w", str(self.workers),
             "-b", f"127.0.0.1:{self.port}", "--timeout", "120",
             "novella.placement.wsgi:application"],
            env=env, stdout=self.log, stderr=subprocess.STDOUT, cwd=self.workdir)
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                if requests.get(self.url + "/", timeout=2).status_code == 200:
                    return self
            except requests.RequestException:
                pass
            time.sleep(0.2)
        self.__exit__(None, None, None)
        with open(os.path.join(self.workdir, "gunicorn.log")) as f:
            raise RuntimeError("placement server did not start:\n" + f.read()[-3000:])

    def __exit__(self, *exc):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        if getattr(self, "log", None):
            self.log.close()
