#!/usr/bin/env python3
"""HTTP serving: requests/s and latency of the same applications under three servers.

For the Placement API (``GET /resource_providers``, 20 providers) and the
Compute API (``GET /v2.1/flavors/detail``, 5 flavors), in one run, on one
machine, on the same SQLite databases:

- ``wsgiref``: the server every API had before, ``wsgiref.simple_server``
  with a thread per request: HTTP/1.0, a new TCP connection per request;
- ``threaded``: the all-in-one's threaded HTTP/1.1 server
  (``novella.service.HTTPServer``), connections kept alive;
- ``gunicorn``: ``novella serve <api>`` (``--workers`` processes of
  ``--threads`` threads, keep-alive).

Each server runs in a process of its own; the clients are threads of this
process, each on one persistent ``http.client`` connection (it reconnects
when the server closes, as with wsgiref), sending requests back to back for
``--seconds`` at 1, 8 and 32 concurrent clients. The three servers of an
API run at once and are measured in turn, in ``--rounds`` rounds, so that
whatever else the machine does meanwhile falls on all three alike. Printed:
requests/s, p50 and p99 latency, TCP connections opened, and each server's
requests/s over wsgiref's for the same API and clients. Nothing is asserted
about timings. Only 127.0.0.1 is used.

    python3 bench/http_serving.py                    # 6 s per point, in 3 rounds
    python3 bench/http_serving.py --seconds 9 --rounds 3 --clients 1,8,32 --workers 2 --threads 4
"""
import argparse
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

SERVERS = ("wsgiref", "threaded", "gunicorn")
APIS = {
    # api: (serve name, WSGI module, path measured)
    "placement": ("placement", "placement", "/resource_providers"),
    "compute": ("api", "compute", "/v2.1/flavors/detail"),
}
HEADERS = {"X-Auth-Token": "admin", "Accept": "application/json"}


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# -- a server process ------------------------------------------------------------------

def child(kind, module, port):
    """Serve novella.wsgi.<module> with the in-process server ``kind`` until killed."""
    import importlib
    import logging
    logging.basicConfig(level=logging.WARNING)
    app = importlib.import_module(f"novella.wsgi.{module}").application
    if kind == "threaded":
        from novella.service import HTTPServer
        HTTPServer(app, "127.0.0.1", port, module).start()
    else:  # the server the APIs had before: wsgiref, a thread per request
        import socketserver
        from wsgiref import simple_server

        class Server(socketserver.ThreadingMixIn, simple_server.WSGIServer):
            daemon_threads = True
            allow_reuse_address = True
            request_queue_size = 128

        class Quiet(simple_server.WSGIRequestHandler):
            def log_message(self, *args):
                pass
        srv = simple_server.make_server("127.0.0.1", port, app, server_class=Server,
                                        handler_class=Quiet)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
    print("ready", flush=True)
    threading.Event().wait()


class Server:
    def __init__(self, kind, api, workdir, env, workers, threads):
        serve_name, module, _path = APIS[api]
        self.port = free_port()
        conf = os.path.join(workdir, "placement.conf" if api == "placement" else "nova.conf")
        if kind == "gunicorn":
            cmd = [sys.executable, "-m", "novella.cmd.main", "serve", serve_name,
                   "--config-file", conf, "--bind", f"127.0.0.1:{self.port}",
                   "--workers", str(workers), "--threads", str(threads)]
            ready = "API listening on"
        else:
            cmd = [sys.executable, os.path.abspath(__file__), "--child", kind, module,
                   str(self.port)]
            ready = "ready"
        self.log_path = os.path.join(workdir, f"{api}-{kind}.log")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=env,
                                     cwd=workdir)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and self.proc.poll() is None:
            with open(self.log_path) as f:
                if ready in f.read():
                    return
            time.sleep(0.1)
        self.stop()
        with open(self.log_path) as f:
            raise RuntimeError(f"{kind} server for {api} did not start:\n{f.read()[-3000:]}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT if "--child" not in self.proc.args
                                  else signal.SIGKILL)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.log.close()


# -- the clients -----------------------------------------------------------------------

def measure(port, path, clients, seconds):
    """-> (requests in ``seconds``, their latencies, connections opened) for
    ``clients`` threads sending requests back to back."""
    latencies = [[] for _ in range(clients)]
    connects = [0] * clients
    errors = []
    start = threading.Barrier(clients + 1)
    stop_at = [0.0]

    def run(i):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        own = latencies[i]
        start.wait()
        try:
            while time.monotonic() < stop_at[0]:
                if conn.sock is None:
                    connects[i] += 1
                t0 = time.perf_counter()
                conn.request("GET", path, headers=HEADERS)
                resp = conn.getresponse()
                resp.read()
                own.append(time.perf_counter() - t0)
                if resp.status != 200:
                    errors.append(resp.status)
                    return
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(repr(exc))
        finally:
            conn.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    stop_at[0] = time.monotonic() + seconds
    began = time.monotonic()
    start.wait()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - began
    if errors:
        raise RuntimeError(f"requests failed: {errors[:5]}")
    every = [x for own in latencies for x in own]
    return len(every) * seconds / elapsed, every, sum(connects)


# -- setup -----------------------------------------------------------------------------

def prepare(workdir):
    """Databases and configuration files; 20 providers and 5 flavors to list."""
    api_url = f"sqlite:///{workdir}/api.db"
    with open(os.path.join(workdir, "nova.conf"), "w") as f:
        f.write("[DEFAULT]\ntransport_url = inproc://bench\n"
                f"[api_database]\nconnection = {api_url}\n"
                "[placement]\nendpoint_override = http://127.0.0.1:9\n"
                "[api]\nauth_strategy = noauth2\n")
    with open(os.path.join(workdir, "placement.conf"), "w") as f:
        f.write(f"[placement_database]\nconnection = sqlite:///{workdir}/placement.db\n"
                "[api]\nauth_strategy = noauth2\n")
    subprocess.run([sys.executable, "-m", "novella.cmd.main", "manage", "--config-file",
                    os.path.join(workdir, "nova.conf"), "api_db", "sync"],
                   check=True, capture_output=True, cwd=workdir)
    env = dict(os.environ, OS_NOVA_CONFIG_DIR=workdir, OS_PLACEMENT_CONFIG_DIR=workdir,
               PYTHONPATH=REPO)
    env.pop("NOVELLA_PLACEMENT_CONFIG", None)
    seed = {"placement": [("POST", "/resource_providers", {"name": f"rp{i}"}) for i in range(20)],
            "compute": [("POST", "/v2.1/flavors", {"flavor": {
                "name": f"f{i}", "ram": 512 * (i + 1), "vcpus": i + 1, "disk": 1}})
                for i in range(5)]}
    for api, calls in seed.items():
        srv = Server("threaded", api, workdir, env, 1, 1)
        try:
            conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
            for method, path, body in calls:
                conn.request(method, path, body=json.dumps(body), headers=dict(
                    HEADERS, **{"Content-Type": "application/json",
                                "OpenStack-API-Version": "placement 1.20"}))
                resp = conn.getresponse()
                assert resp.status in (200, 201), resp.read()
                resp.read()
        finally:
            srv.stop()
    return env


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=6.0,
                        help="per server and client count, over all rounds")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--clients", default="1,8,32")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--apis", default="placement,compute")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args.child[0], args.child[1], int(args.child[2]))

    clients = [int(c) for c in args.clients.split(",")]
    print(f"cpus: {os.cpu_count()}; gunicorn: {args.workers} workers x {args.threads} threads; "
          f"{args.seconds:g} s per point in {args.rounds} rounds", flush=True)
    with tempfile.TemporaryDirectory(prefix="novella-http-bench-") as workdir:
        env = prepare(workdir)
        results = {}
        for api in args.apis.split(","):
            path = APIS[api][2]
            servers = {}
            try:
                for kind in SERVERS:
                    servers[kind] = Server(kind, api, workdir, env, args.workers, args.threads)
                    measure(servers[kind].port, path, 2, 0.5)  # warm every worker's caches
                # Rounds, each measuring every server in turn, so that the load the
                # machine carries meanwhile falls on all of them alike.
                samples = {}
                for _round in range(args.rounds):
                    for n in clients:
                        for kind in SERVERS:
                            samples.setdefault((api, kind, n), []).append(
                                measure(servers[kind].port, path, n, args.seconds / args.rounds))
                for key, runs in samples.items():
                    count = sum(r[0] for r in runs)
                    every = sorted(x for r in runs for x in r[1])
                    pick = lambda q: every[min(len(every) - 1, int(q * len(every)))] * 1000  # noqa: E731
                    results[key] = (count / args.seconds, pick(0.50), pick(0.99),
                                    sum(r[2] for r in runs))
            finally:
                for srv in servers.values():
                    srv.stop()
        print()
        print(f"{'API':<10} {'path':<22} {'server':<9} {'clients':>7} {'req/s':>8} "
              f"{'p50 ms':>8} {'p99 ms':>8} {'conns':>7} {'x wsgiref':>9}")
        for (api, kind, n), (rate, p50, p99, conns) in results.items():
            ratio = rate / results[api, "wsgiref", n][0]
            print(f"{api:<10} {APIS[api][2]:<22} {kind:<9} {n:>7} {rate:>8.0f} {p50:>8.1f} "
                  f"{p99:>8.1f} {conns:>7} {ratio:>9.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
