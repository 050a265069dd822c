#!/usr/bin/env python3
"""Placement benchmark in the style of the reference's perfload job.

For each database (SQLite, PostgreSQL), each provider count N and each
implementation (Novella, the reference openstack-placement), in one run:

1. start the service under gunicorn on 127.0.0.1 with a fresh database;
2. load N root providers through the HTTP API, each with VCPU, MEMORY_MB and
   DISK_GB inventory, one aggregate and one trait (4 writes per provider,
   several client threads, the server given extra workers while loading);
3. restart it with ``--workers`` workers and measure
   - GET /allocation_candidates for every provider,
   - the same with ``member_of`` and ``required``,
   - the same with ``limit=10``,
   - PUT /allocations/{consumer} rate (new instance consumers),
   - POST /allocations migration-swap rate (empty the instance consumer,
     create the migration consumer holding its resources, atomically);
4. read the resident memory of the gunicorn worker from /proc.

It prints a table of figures and Novella/reference ratios; it asserts
nothing about timings. Every loop is bounded in count and in time, and the
only addresses used are 127.0.0.1.

The reference runs from a virtualenv outside the project (``--ref-venv``,
created on first use with openstack-placement 16.0.0).

    python3 bench/placement_perf.py --n 1000,10000 --db sqlite,postgresql --workers 1
    python3 bench/placement_perf.py --quick            # N=200, fewer repeats
"""
import argparse
import concurrent.futures
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

import requests  # noqa: E402

from novella.placement.client import PlacementClient, PlacementError  # noqa: E402

REF_PACKAGES = ["openstack-placement==16.0.0", "sqlalchemy<2.1", "gunicorn", "psycopg2-binary"]
PG_ADMIN_URL = os.environ.get("NOVELLA_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
AGGREGATE = "a1b2c3d4-0000-4000-8000-00000000a99e"
TRAIT = "CUSTOM_PERFLOAD_TRAIT"
INVENTORY = {
    "VCPU": {"total": 32, "allocation_ratio": 16.0},
    "MEMORY_MB": {"total": 262144, "allocation_ratio": 1.5},
    "DISK_GB": {"total": 4000, "allocation_ratio": 1.0},
}
FLAVOR = {"VCPU": 1, "MEMORY_MB": 256, "DISK_GB": 10}
QUERY = "resources=VCPU:1,MEMORY_MB:256,DISK_GB:10"
QUERIES = [
    ("candidates: all", QUERY),
    ("candidates: member_of+required", f"{QUERY}&member_of={AGGREGATE}&required={TRAIT}"),
    ("candidates: limit=10", f"{QUERY}&limit=10"),
]
MICROVERSION = "1.39"


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- databases ----------------------------------------------------------------

class Database:
    """A fresh database per run: a SQLite file or a PostgreSQL database."""

    def __init__(self, kind, workdir):
        self.kind = kind
        self.name = "novella_bench_" + uuid.uuid4().hex[:10]
        if kind == "sqlite":
            self.url = f"sqlite:///{workdir}/placement.db"
        elif kind == "postgresql":
            import sqlalchemy as sa
            self._admin = sa.create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
            with self._admin.connect() as conn:
                conn.exec_driver_sql(f'CREATE DATABASE "{self.name}"')
            self.url = PG_ADMIN_URL.rsplit("/", 1)[0] + "/" + self.name
            if self.url.startswith("postgresql://"):
                self.url = "postgresql+psycopg2://" + self.url[len("postgresql://"):]
        else:
            raise SystemExit(f"unknown --db {kind}")

    def drop(self):
        if self.kind == "postgresql":
            with self._admin.connect() as conn:
                conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
            self._admin.dispose()


# -- servers ------------------------------------------------------------------

def ensure_ref_venv(venv):
    gunicorn = os.path.join(venv, "bin", "gunicorn")
    if os.path.exists(gunicorn) and os.path.exists(os.path.join(venv, "bin", "placement-manage")):
        return
    if os.path.realpath(venv).startswith(os.path.realpath(REPO) + os.sep):
        raise SystemExit("--ref-venv must be outside the repository")
    log(f"creating reference virtualenv {venv}")
    subprocess.run([sys.executable, "-m", "venv", venv], check=True, timeout=300)
    subprocess.run([os.path.join(venv, "bin", "pip"), "install", "-q"] + REF_PACKAGES,
                   check=True, timeout=1800)


class Server:
    """One implementation under gunicorn, configured through placement.conf."""

    def __init__(self, impl, db_url, confdir, ref_venv):
        self.impl = impl
        self.db_url = db_url
        self.confdir = confdir
        self.ref_venv = ref_venv
        self.proc = None
        with open(os.path.join(confdir, "placement.conf"), "w") as f:
            f.write("[DEFAULT]\ndebug = False\n[api]\nauth_strategy = noauth2\n"
                    f"[placement_database]\nconnection = {db_url}\n")
        self.env = dict(os.environ, OS_PLACEMENT_CONFIG_DIR=confdir)
        self.env.pop("NOVELLA_PLACEMENT_CONFIG", None)
        if impl == "novella":
            self.env["PYTHONPATH"] = REPO
        else:
            self.env.pop("PYTHONPATH", None)

    def sync_db(self):
        if self.impl == "reference":
            cmd = [os.path.join(self.ref_venv, "bin", "placement-manage"),
                   "--config-dir", self.confdir, "db", "sync"]
        else:
            cmd = [sys.executable, "-c",
                   "from novella.placement import conf, wsgi; "
                   f"wsgi.make_app(conf.make_conf(overrides={{'placement_database': "
                   f"{{'connection': {self.db_url!r}}}, 'api': {{'auth_strategy': 'noauth2'}}}}))"]
        subprocess.run(cmd, env=self.env, cwd=self.confdir, check=True, timeout=300,
                       stdout=subprocess.DEVNULL)

    def start(self, workers):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        if self.impl == "reference":
            cmd = [os.path.join(self.ref_venv, "bin", "gunicorn")]
            app = "placement.wsgi.api:application"
        else:
            cmd = [sys.executable, "-m", "gunicorn"]
            app = "novella.placement.wsgi:application"
        cmd += ["-w", str(workers), "-b", f"127.0.0.1:{self.port}", "--timeout", "600",
                "--log-level", "warning", app]
        self.logfile = open(os.path.join(self.confdir, f"gunicorn-{self.port}.log"), "w")
        self.proc = subprocess.Popen(cmd, env=self.env, cwd=self.confdir,
                                     stdout=self.logfile, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                if requests.get(self.url + "/", timeout=5).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.2)
        self.stop()
        with open(self.logfile.name) as f:
            raise RuntimeError(f"{self.impl} server did not start:\n{f.read()[-3000:]}")

    def worker_pids(self):
        pids = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == self.proc.pid:
                pids.append(int(entry))
        return pids

    def worker_rss_mb(self):
        """Largest resident set among the gunicorn workers, in MiB."""
        best = 0
        for pid in self.worker_pids():
            try:
                with open(f"/proc/{pid}/status") as f:
                    for line in f:
                        if line.startswith("VmRSS:"):
                            best = max(best, int(line.split()[1]))
            except OSError:
                pass
        return best / 1024.0

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None
        if getattr(self, "logfile", None):
            self.logfile.close()


# -- load ---------------------------------------------------------------------

def _retrying(fn, attempts=40):
    """Retry a loading write on a transient server error (SQLite's
    "database is locked" under several workers) with a growing pause."""
    for i in range(attempts):
        try:
            return fn()
        except (PlacementError, requests.RequestException) as exc:
            status = getattr(exc, "status", None)
            if i == attempts - 1 or (status is not None and status < 500):
                raise
            time.sleep(min(0.02 * (i + 1), 0.5))


def load_providers(url, first, n, threads, time_limit):
    """Create providers first..n-1 with a pool of client threads: 4 writes
    each (create, inventory, aggregates, traits), generations carried along."""
    setup = PlacementClient(endpoint=url, token="admin", microversion=MICROVERSION)
    setup.ensure_traits([TRAIT])
    setup.close()
    deadline = time.monotonic() + time_limit
    local = threading.local()

    def one(i):
        if time.monotonic() > deadline:
            raise TimeoutError("loading exceeded its time limit")
        c = getattr(local, "client", None)
        if c is None:
            c = local.client = PlacementClient(endpoint=url, token="admin",
                                               microversion=MICROVERSION)
        rp = str(uuid.UUID(int=i + 1))
        path = f"/resource_providers/{rp}"

        def create():
            try:
                return c.create_resource_provider(rp, f"perf-cn-{i:06d}")["generation"]
            except PlacementError as exc:
                if exc.status != 409:
                    raise
                return c.get_resource_provider(rp)["generation"]

        def put(sub, key, value):
            def attempt():
                gen = c.get_resource_provider(rp)["generation"] if state["stale"] else state["gen"]
                try:
                    body = c._json("PUT", f"{path}/{sub}", json_body={
                        "resource_provider_generation": gen, key: value})
                except PlacementError:
                    state["stale"] = True  # a failed write may have landed: re-read
                    raise
                state["gen"], state["stale"] = body["resource_provider_generation"], False
            _retrying(attempt)

        state = {"gen": _retrying(create), "stale": False}
        put("inventories", "inventories", INVENTORY)
        put("aggregates", "aggregates", [AGGREGATE])
        put("traits", "traits", [TRAIT])
        return rp

    t0 = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        rps = list(pool.map(one, range(first, n)))
    return rps, time.perf_counter() - t0


# -- measurements -----------------------------------------------------------

def measure_queries(url, n, repeats, time_limit):
    http = requests.Session()
    headers = {"x-auth-token": "admin", "OpenStack-API-Version": f"placement {MICROVERSION}",
               "Accept": "application/json"}
    out = {}
    for label, query in QUERIES:
        times, count = [], None
        deadline = time.monotonic() + time_limit
        for i in range(repeats + 1):  # the first call warms caches and is not counted
            t0 = time.perf_counter()
            resp = http.get(f"{url}/allocation_candidates?{query}", headers=headers, timeout=600)
            dt = time.perf_counter() - t0
            resp.raise_for_status()
            if i:
                times.append(dt)
            else:
                count = len(resp.json()["allocation_requests"])
            if time.monotonic() > deadline and times:
                break
        out[label] = {"seconds": statistics.median(times), "results": count, "runs": len(times)}
    http.close()
    return out


def measure_writes(url, rps, count, time_limit):
    """PUT /allocations for new consumers, then swap each to a migration consumer."""
    c = PlacementClient(endpoint=url, token="admin", microversion=MICROVERSION)
    project, user = str(uuid.uuid4()), str(uuid.uuid4())
    placed = []
    deadline = time.monotonic() + time_limit
    t0 = time.perf_counter()
    for i in range(count):
        consumer = str(uuid.uuid4())
        rp = rps[(i * 7919) % len(rps)]
        body = {"allocations": {rp: {"resources": FLAVOR}}, "project_id": project,
                "user_id": user, "consumer_generation": None, "consumer_type": "INSTANCE"}
        c.request("PUT", f"/allocations/{consumer}", json_body=body)
        placed.append((consumer, rp))
        if time.monotonic() > deadline:
            break
    put_rate = len(placed) / (time.perf_counter() - t0)

    swapped, leftovers = 0, []
    deadline = time.monotonic() + time_limit
    t0 = time.perf_counter()
    for consumer, rp in placed:
        migration = str(uuid.uuid4())
        body = {
            consumer: {"allocations": {}, "project_id": project, "user_id": user,
                       "consumer_generation": 1, "consumer_type": "INSTANCE"},
            migration: {"allocations": {rp: {"resources": FLAVOR}}, "project_id": project,
                        "user_id": user, "consumer_generation": None,
                        "consumer_type": "MIGRATION"},
        }
        c.request("POST", "/allocations", json_body=body)
        swapped += 1
        leftovers.append(migration)
        if time.monotonic() > deadline:
            break
    swap_rate = swapped / (time.perf_counter() - t0)
    # Sanity: the ledger shows exactly the migration consumers.
    usages = c.get_usages(project, microversion="1.9")
    # Leave the providers empty for the next, larger N (not timed).
    leftovers += [consumer for consumer, _ in placed[swapped:]]
    for consumer in leftovers:
        c.delete_allocations(consumer)
    c.close()
    return {"put_per_s": put_rate, "puts": len(placed), "swap_per_s": swap_rate,
            "swaps": swapped, "usages": usages}


# -- one run ------------------------------------------------------------------

def bulk_fill_reference(db_url, first, n):
    """Give the reference's database providers first..n-1 by SQL, each a copy
    of provider 0 (loaded through the API): same inventory rows, aggregate,
    trait and generation. Only for --ref-bulk-after, to reach N=10000 when
    loading through the reference's API would take too long; the
    measurements themselves always go through the API."""
    import sqlalchemy as sa
    engine = sa.create_engine(db_url)
    template = str(uuid.UUID(int=1))
    rows = [{"uuid": str(uuid.UUID(int=i + 1)), "name": f"perf-cn-{i:06d}"} for i in range(first, n)]
    with engine.begin() as conn:
        tid, gen = conn.execute(sa.text("SELECT id, generation FROM resource_providers WHERE uuid = :u"),
                                {"u": template}).one()
        for chunk in range(0, len(rows), 1000):
            conn.execute(sa.text(
                "INSERT INTO resource_providers (created_at, uuid, name, generation) "
                "VALUES (CURRENT_TIMESTAMP, :uuid, :name, :gen)"),
                [dict(r, gen=gen) for r in rows[chunk:chunk + 1000]])
        conn.execute(sa.text("UPDATE resource_providers SET root_provider_id = id "
                             "WHERE root_provider_id IS NULL"))
        new = "(SELECT id FROM resource_providers rp WHERE rp.id <> :t AND NOT EXISTS " \
              "(SELECT 1 FROM inventories i WHERE i.resource_provider_id = rp.id))"
        conn.execute(sa.text(
            "INSERT INTO resource_provider_aggregates (created_at, resource_provider_id, aggregate_id) "
            "SELECT CURRENT_TIMESTAMP, rp.id, a.aggregate_id FROM resource_provider_aggregates a, "
            f"{new} rp WHERE a.resource_provider_id = :t"), {"t": tid})
        conn.execute(sa.text(
            "INSERT INTO resource_provider_traits (created_at, trait_id, resource_provider_id) "
            "SELECT CURRENT_TIMESTAMP, x.trait_id, rp.id FROM resource_provider_traits x, "
            f"{new} rp WHERE x.resource_provider_id = :t"), {"t": tid})
        conn.execute(sa.text(
            "INSERT INTO inventories (created_at, resource_provider_id, resource_class_id, total, "
            "reserved, min_unit, max_unit, step_size, allocation_ratio) "
            "SELECT CURRENT_TIMESTAMP, rp.id, i.resource_class_id, i.total, i.reserved, i.min_unit, "
            f"i.max_unit, i.step_size, i.allocation_ratio FROM inventories i, {new} rp "
            "WHERE i.resource_provider_id = :t"), {"t": tid})
        count = conn.execute(sa.text("SELECT count(*) FROM resource_providers")).scalar()
    engine.dispose()
    if count != n:
        raise RuntimeError(f"bulk fill left {count} providers, expected {n}")
    return [r["uuid"] for r in rows]


class Series:
    """One database per (implementation, backend), grown through each N in
    turn: providers 0..N1 are loaded and measured, then N1..N2 added, etc.
    The database lives across steps; the server is restarted for each."""

    def __init__(self, impl, db_kind, args):
        self.impl, self.db_kind, self.args = impl, db_kind, args
        self.workdir = tempfile.mkdtemp(prefix=f"placement-bench-{impl}-")
        self.db = Database(db_kind, self.workdir)
        self.server = Server(impl, self.db.url, self.workdir, args.ref_venv)
        self.rps = []
        self.failed = False
        self.server.sync_db()
        # One worker boots first: the reference fills its trait and
        # resource-class tables at start-up, and several workers doing that
        # at once on SQLite fail to boot.
        self.server.start(1)
        self.server.stop()

    def step(self, n):
        args, server, tag = self.args, self.server, f"{self.impl}/{self.db_kind}/N={n}"
        result = {"impl": self.impl, "db": self.db_kind, "n": n}
        if self.failed:
            result["error"] = "an earlier step failed"
            return result
        try:
            through_api = n
            if self.impl == "reference" and args.ref_bulk_after:
                through_api = max(len(self.rps), min(n, args.ref_bulk_after))
            server.start(args.load_workers or 2 * (os.cpu_count() or 1))
            log(f"{tag}: loading {through_api - len(self.rps)} providers through {server.url}")
            new, load_s = load_providers(server.url, len(self.rps), through_api,
                                         args.load_threads, args.load_time_limit)
            self.rps += new
            result["load_s"], result["loaded"] = (load_s if new else None), len(new)
            log(f"{tag}: loaded in {load_s:.1f}s")
            server.stop()
            if through_api < n:
                result["bulk_filled"] = n - through_api
                self.rps += bulk_fill_reference(self.db.url, through_api, n)
                log(f"{tag}: {n - through_api} providers copied by SQL")
            server.start(args.workers)
            result["queries"] = measure_queries(server.url, n, args.repeats, args.time_limit)
            result["writes"] = measure_writes(server.url, self.rps, args.writes, args.time_limit)
            result["rss_mb"] = server.worker_rss_mb()
            result["loadavg_1m"] = os.getloadavg()[0]  # other work on the machine
            server.stop()
            log(f"{tag}: " + json.dumps(
                {k: v for k, v in result.items() if k not in ("impl", "db", "n")}))
        except Exception as exc:  # noqa: BLE001 - reported in the table
            server.stop()
            for name in sorted(os.listdir(self.workdir)):
                if name.endswith(".log"):
                    with open(os.path.join(self.workdir, name)) as f:
                        log(f"{name}:\n{f.read()[-2000:]}")
            log(f"{tag} failed: {exc}")
            result["error"] = str(exc)[:500]
            self.failed = True
        return result

    def close(self):
        self.server.stop()
        self.db.drop()
        shutil.rmtree(self.workdir, ignore_errors=True)


# -- report -------------------------------------------------------------------

def _rows(res):
    q = res.get("queries", {})
    w = res.get("writes", {})
    rows = [("load added providers (s)", res.get("load_s"), False)]
    for label, _ in QUERIES:
        rows.append((f"{label} (s)", q.get(label, {}).get("seconds"), False))
    rows.append(("PUT /allocations (per s)", w.get("put_per_s"), True))
    rows.append(("POST /allocations swap (per s)", w.get("swap_per_s"), True))
    rows.append(("worker RSS (MiB)", res.get("rss_mb"), False))
    rows.append(("machine load average (1 min)", res.get("loadavg_1m"), False))
    return rows


def report(results, workers):
    by_key = {(r["db"], r["n"], r["impl"]): r for r in results}
    lines = [f"gunicorn workers: {workers}; microversion {MICROVERSION}",
             "", "| db | N | measure | novella | reference | speed-up |",
             "|---|---|---|---|---|---|"]
    for db, n in sorted({(r["db"], r["n"]) for r in results}, key=lambda k: (k[0] != "sqlite", k[1])):
        nov = by_key.get((db, n, "novella"), {})
        ref = by_key.get((db, n, "reference"), {})
        bulk = nov.get("bulk_filled") or ref.get("bulk_filled")
        for (label, a, higher_better), (_, b, _) in zip(_rows(nov), _rows(ref)):
            ratio = ""
            if a and b and not label.startswith(("worker RSS", "machine load")) \
                    and not (bulk and label.startswith("load")):
                ratio = f"{(a / b if higher_better else b / a):.1f}x"
            fa, fb = _fmt(a), _fmt(b)
            if label.startswith("load"):
                fa += f" (+{nov['bulk_filled']} by SQL)" if nov.get("bulk_filled") else ""
                fb += f" (+{ref['bulk_filled']} by SQL)" if ref.get("bulk_filled") else ""
            lines.append(f"| {db} | {n} | {label} | {fa} | {fb} | {ratio} |")
        counts = {impl: r.get("queries", {}).get(QUERIES[0][0], {}).get("results")
                  for impl, r in (("novella", nov), ("reference", ref)) if r}
        lines.append(f"| {db} | {n} | candidates returned (all) | "
                     f"{counts.get('novella', '')} | {counts.get('reference', '')} | |")
    return "\n".join(lines)


def _fmt(v):
    if v is None:
        return "-"
    if v >= 100:
        return f"{v:.0f}"
    if v >= 1:
        return f"{v:.2f}"
    return f"{v:.4f}"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", default="1000,10000", help="provider counts, comma separated")
    p.add_argument("--db", default="sqlite,postgresql", help="sqlite,postgresql")
    p.add_argument("--impl", default="novella,reference", help="novella,reference")
    p.add_argument("--workers", type=int, default=1, help="gunicorn workers while measuring")
    p.add_argument("--load-workers", type=int, default=None,
                   help="gunicorn workers while loading (default: 2 x CPUs)")
    p.add_argument("--load-threads", type=int, default=8, help="client threads while loading")
    p.add_argument("--repeats", type=int, default=5, help="timed runs per candidates query")
    p.add_argument("--writes", type=int, default=300, help="allocations written (then swapped)")
    p.add_argument("--time-limit", type=float, default=60.0, help="seconds per measured phase")
    p.add_argument("--load-time-limit", type=float, default=1800.0, help="seconds for loading")
    p.add_argument("--ref-bulk-after", type=int, default=0, metavar="K",
                   help="load only K providers into the reference through its API and copy "
                        "the rest by SQL (0: everything through the API)")
    p.add_argument("--ref-venv", default=os.environ.get("NOVELLA_REF_VENV", "/work/refplacement"))
    p.add_argument("--quick", action="store_true", help="N=200, 3 repeats, 60 writes")
    p.add_argument("--json", help="also write the raw results to this file")
    p.add_argument("--report", metavar="JSON",
                   help="print the table of a saved --json file (even a partial one) and exit")
    args = p.parse_args(argv)
    if args.report:
        with open(args.report) as f:
            saved = json.load(f)
        print(report(saved["results"], saved["args"]["workers"]))
        return 0
    # SIGTERM unwinds like ^C, so servers are stopped and databases dropped.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    if args.quick:
        if args.n == p.get_default("n"):
            args.n = "200"
        args.repeats, args.writes, args.time_limit = 3, 60, 20.0
    ns = [int(x) for x in args.n.split(",") if x]
    dbs = [x for x in args.db.split(",") if x]
    impls = [x for x in args.impl.split(",") if x]
    if "reference" in impls:
        ensure_ref_venv(args.ref_venv)

    results = []
    started = time.time()
    def keep(result):
        # Keep what has been measured so far, should the run be cut short.
        results.append(result)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"args": vars(args), "results": results, "partial": True}, f, indent=1)

    # Every (backend, implementation) at the smallest N first, then the next
    # N, so a run cut short still has a complete table for the smaller sizes.
    series = {}
    try:
        for n in sorted(ns):
            for db in dbs:
                for impl in impls:
                    if (db, impl) not in series:
                        series[db, impl] = Series(impl, db, args)
                    keep(series[db, impl].step(n))
    finally:
        for s in series.values():
            s.close()
    table = report(results, args.workers)
    print(f"\nplacement_perf: {' '.join(sys.argv[1:]) or '(defaults)'}; "
          f"{os.cpu_count()} CPUs; wall {time.time() - started:.0f}s")
    print(table)
    errors = [r for r in results if "error" in r]
    for r in errors:
        print(f"ERROR {r['impl']}/{r['db']}/N={r['n']}: {r['error']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "results": results, "table": table}, f, indent=1)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
