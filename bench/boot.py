"""Boot N servers through the Compute API on the all-in-one, then delete them.

Prints servers/s, API latency p50/p95, boot-to-ACTIVE and delete times of a
single server, peak memory, and beside them the reference's boot-to-ACTIVE and
delete in its own functional harness (measured in the same run), with the
ratio per operation. Ends by checking that placement usages are back to zero.

    python3 bench/boot.py                       # 500 servers, 4 cells x 25 hosts
    python3 bench/boot.py --servers 100 --cells 2 --hosts 5 --skip-reference
"""
import argparse
import concurrent.futures
import json
import logging
import os
import re
import shutil
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import common  # noqa: E402

TOKEN = "admin:admin"
PREFIX = "/v2.1"


class ComputeClient:
    """Calls the Compute API WSGI app in-process, as an HTTP client would."""

    def __init__(self, app, token=TOKEN, microversion=None):
        import webob
        self._webob = webob
        self.app = app
        self.token = token
        self.microversion = microversion

    def request(self, method, path, body=None):
        headers = {"X-Auth-Token": self.token, "Accept": "application/json"}
        if self.microversion:
            headers["OpenStack-API-Version"] = f"compute {self.microversion}"
        req = self._webob.Request.blank(PREFIX + path, method=method, headers=headers)
        if body is not None:
            req.body = json.dumps(body).encode()
            req.content_type = "application/json"
        resp = req.get_response(self.app)
        data = json.loads(resp.body) if resp.body else None
        return resp.status_int, data

    def expect(self, method, path, body=None, ok=(200, 201, 202, 204)):
        status, data = self.request(method, path, body)
        if status not in ok:
            raise RuntimeError(f"{method} {path} -> {status}: {data}")
        return data

    def list_servers(self, page=500, max_pages=1000):
        """Every server of the project, following the paging marker."""
        out, marker = [], None
        for _ in range(max_pages):
            q = f"/servers/detail?limit={page}" + (f"&marker={marker}" if marker else "")
            batch = self.expect("GET", q)["servers"]
            out += batch
            if len(batch) < page:
                break
            marker = batch[-1]["id"]
        return out


class Completion:
    """Records when each server reaches the end of a create or delete.

    Listens to the versioned notifications the services send on the
    in-process transports (instance.create.end / instance.delete.end), so the
    time from the API request to ACTIVE is measured without polling.
    """

    EVENTS = {"instance.create.end": "create", "instance.delete.end": "delete",
              "instance.create.error": "create_error"}

    def __init__(self, transports):
        self.lock = threading.Lock()
        self.seen = {kind: {} for kind in self.EVENTS.values()}
        for t in transports:
            t.listen_notifications(self._on)

    @staticmethod
    def _uuid(payload):
        if not isinstance(payload, dict):
            return None
        data = payload.get("nova_object.data", payload)
        if isinstance(data, dict):
            for key in ("uuid", "instance_uuid", "instance_id"):
                if isinstance(data.get(key), str):
                    return data[key]
        return None

    def _on(self, msg):
        kind = self.EVENTS.get(msg.get("event_type"))
        if not kind:
            return
        uuid = self._uuid(msg.get("payload"))
        if uuid:
            with self.lock:
                self.seen[kind].setdefault(uuid, time.perf_counter())


def make_aio(data_dir, cells, hosts):
    from novella.allinone import AllInOne
    aio = AllInOne(data_dir, cells=cells, hosts_per_cell=hosts, http=False,
                   log=lambda *a: print(*a, file=sys.stderr))
    return aio.start()


def ensure_heartbeats(aio):
    """Run the compute services' heartbeats if the all-in-one does not.

    The scheduler's ComputeFilter drops hosts not seen for
    ``[DEFAULT] service_down_time`` seconds; a run longer than that needs
    heartbeats. Returns True when the benchmark had to start them.
    """
    if getattr(aio, "periodics", None):
        return False
    from novella.conf import CONF
    from novella.service import Periodic
    interval = getattr(CONF, "report_interval", 10) or 10
    for host, mgr in sorted(aio.computes.items()):
        aio.periodics.append(Periodic(mgr.heartbeat, interval, f"heartbeat-{host}").start())
    return True


def all_transports(aio):
    from novella import rpc
    from novella.allinone import SUPER_TRANSPORT
    urls = [SUPER_TRANSPORT] + [c.transport_url for c in aio.cells]
    return [rpc.get_transport(u) for u in urls]


def bench_network(aio, cidr):
    """A shared network for the benchmark's servers (the demo one is a /24)."""
    from novella.context import get_admin_context
    ctxt = get_admin_context()
    for net in aio.network_api.list_networks(ctxt):
        if net["name"] == "bench":
            return net
    return aio.network_api.create_network(ctxt, name="bench", cidr=cidr, shared=True)


def server_body(aio, name, flavor, network_id=None):
    return {"server": {"name": name, "imageRef": aio.demo_image["id"], "flavorRef": flavor,
                       "networks": [{"uuid": network_id or aio.demo_network["id"]}]}}


UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def event_errors(api, server_ids):
    """{event name and last traceback line: count} from the servers' instance actions."""
    out = {}
    for sid in server_ids:
        status, body = api.request("GET", f"/servers/{sid}/os-instance-actions")
        if status != 200:
            continue
        for action in body.get("instanceActions", []):
            status, detail = api.request(
                "GET", f"/servers/{sid}/os-instance-actions/{action['request_id']}")
            if status != 200:
                continue
            for ev in detail.get("instanceAction", {}).get("events", []):
                if ev.get("result") == "Success":
                    continue
                tb = (ev.get("traceback") or "").strip().splitlines()
                key = f"{ev.get('event')} {ev.get('host') or ''}: {tb[-1] if tb else ev.get('result')}"
                key = UUID_RE.sub("<uuid>", key)[:240]
                out[key] = out.get(key, 0) + 1
    return out


def run_requests(fn, items, concurrency):
    """Run fn(item) for every item with ``concurrency`` client threads.

    Returns (results in item order, per-request latencies, submit times)."""
    latencies = [None] * len(items)
    results = [None] * len(items)
    started = [None] * len(items)

    def one(i):
        started[i] = time.perf_counter()
        results[i] = fn(items[i])
        latencies[i] = time.perf_counter() - started[i]

    if concurrency <= 1:
        for i in range(len(items)):
            one(i)
    else:
        with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
            for f in [pool.submit(one, i) for i in range(len(items))]:
                f.result()
    return results, latencies, started


def placement_leftovers(aio):
    """(providers with non-zero usage, total usage) over every provider."""
    nonzero = {}
    for rp in aio.placement.list_resource_providers():
        _gen, usages = aio.placement.get_provider_usages(rp["uuid"])
        used = {rc: v for rc, v in usages.items() if v}
        if used:
            nonzero[rp.get("name") or rp["uuid"]] = used
    return nonzero


class SQLCounter:
    """Counts SQL statements per database and verb while enabled."""

    def __init__(self):
        from sqlalchemy import event
        from sqlalchemy.engine import Engine
        self.enabled = False
        self.counts = {}
        self.lock = threading.Lock()
        event.listen(Engine, "before_cursor_execute", self._on)

    def _on(self, conn, _cursor, statement, _params, _context, _many):
        if not self.enabled:
            return
        db = os.path.basename(str(conn.engine.url.database or "memory")).rsplit(".", 1)[0]
        db = "cell" if db.startswith("cell") and db != "cell0" else db
        verb = statement.split(None, 1)[0].upper() if statement.strip() else "?"
        with self.lock:
            self.counts[(db, verb)] = self.counts.get((db, verb), 0) + 1

    def per_database(self, divisor=1):
        out = {}
        for (db, verb), n in sorted(self.counts.items()):
            out.setdefault(db, {})[verb] = round(n / divisor, 1)
        return out


def single_ops(aio, api, flavor, count, deadline, network_id=None, sql=None):
    """Boot then delete one server at a time: the per-operation latency."""
    out = {"boot": [], "boot_cpu": [], "delete": [], "delete_cpu": []}
    for i in range(count):
        if time.monotonic() > deadline:
            break
        if sql is not None:
            sql.enabled = i > 0  # the first boot warms caches
        t0, c0 = time.perf_counter(), time.process_time()
        server = api.expect("POST", "/servers", server_body(aio, f"single-{i}", flavor, network_id))["server"]
        aio.wait_idle()
        out["boot"].append(time.perf_counter() - t0)
        out["boot_cpu"].append(time.process_time() - c0)
        status = api.expect("GET", f"/servers/{server['id']}")["server"]["status"]
        if status != "ACTIVE":
            raise RuntimeError(f"single boot ended in {status}")
        t0, c0 = time.perf_counter(), time.process_time()
        api.expect("DELETE", f"/servers/{server['id']}")
        aio.wait_idle()
        out["delete"].append(time.perf_counter() - t0)
        out["delete_cpu"].append(time.process_time() - c0)
    if sql is not None:
        sql.enabled = False
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--servers", type=int, default=500)
    ap.add_argument("--cells", type=int, default=4)
    ap.add_argument("--hosts", type=int, default=25, help="simulated hosts per cell")
    ap.add_argument("--flavor", default="1")
    ap.add_argument("--network-cidr", default="10.128.0.0/16",
                    help="subnet of the network the servers are booted on")
    ap.add_argument("--log-level", default="WARNING")
    ap.add_argument("--count-sql", action="store_true",
                    help="count SQL statements per database for one boot + delete")
    ap.add_argument("--concurrency", type=int, default=1, help="client threads sending API requests")
    ap.add_argument("--single", type=int, default=10,
                    help="servers booted and deleted one at a time for the per-operation figures")
    ap.add_argument("--repeat", type=int, default=3, help="reference repetitions per operation")
    ap.add_argument("--skip-reference", action="store_true")
    ap.add_argument("--data-dir", help="kept after the run (default: a temporary directory, removed)")
    ap.add_argument("--timeout", type=float, default=900, help="bound on the whole Novella run, seconds")
    ap.add_argument("--json", action="store_true", help="also print the figures as one JSON document")
    args = ap.parse_args(argv)

    logging.basicConfig(level=getattr(logging, args.log_level.upper(), logging.WARNING))
    deadline = time.monotonic() + args.timeout
    data_dir = args.data_dir or tempfile.mkdtemp(prefix="novella-bench-boot-")
    figures = {"servers": args.servers, "cells": args.cells, "hosts_per_cell": args.hosts,
               "concurrency": args.concurrency}
    rss_before = common.peak_rss_mb()
    t0 = time.perf_counter()
    aio = make_aio(data_dir, args.cells, args.hosts)
    figures["startup_s"] = time.perf_counter() - t0
    try:
        figures["heartbeats_started_by_benchmark"] = ensure_heartbeats(aio)
        figures["rss_after_start_mb"] = common.pid_rss_mb(os.getpid())[0]
        api = ComputeClient(aio.compute_api_app)
        net_id = bench_network(aio, args.network_cidr)["id"]
        done = Completion(all_transports(aio))

        # Warm up (imports, caches), then per-operation latency, one at a time.
        sql = SQLCounter() if args.count_sql else None
        single = single_ops(aio, api, args.flavor, max(args.single, 1), deadline, net_id, sql)
        if sql is not None and len(single["boot"]) > 1:
            figures["sql_per_boot_and_delete"] = sql.per_database(len(single["boot"]) - 1)
        figures["single_boot_s"] = common.summary(single["boot"])
        figures["single_delete_s"] = common.summary(single["delete"])
        figures["single_boot_cpu_s"] = common.summary(single["boot_cpu"])
        figures["single_delete_cpu_s"] = common.summary(single["delete_cpu"])

        # Bulk boot.
        names = [f"bench-{i:05d}" for i in range(args.servers)]
        t_boot, c_boot = time.perf_counter(), time.process_time()
        created, boot_lat, boot_sent = run_requests(
            lambda n: api.expect("POST", "/servers", server_body(aio, n, args.flavor, net_id))["server"]["id"],
            names, args.concurrency)
        t_accepted = time.perf_counter()
        aio.wait_idle(timeout=max(deadline - time.monotonic(), 1))
        t_active, c_active = time.perf_counter(), time.process_time()
        servers = api.list_servers()
        statuses = {}
        for s in servers:
            statuses[s["status"]] = statuses.get(s["status"], 0) + 1
        active = statuses.get("ACTIVE", 0)
        faults = {}
        for s in servers:
            if s["status"] == "ERROR":
                msg = (s.get("fault") or {}).get("message", "no fault recorded")
                msg = UUID_RE.sub("<uuid>", msg)[:200]
                faults[msg] = faults.get(msg, 0) + 1
        errored = [s["id"] for s in servers if s["status"] == "ERROR"]
        error_events = event_errors(api, errored[:5])
        to_active = [done.seen["create"][u] - boot_sent[i]
                     for i, u in enumerate(created) if u in done.seen["create"]]
        figures["boot"] = {
            "wall_s": t_active - t_boot, "accept_s": t_accepted - t_boot,
            "servers_per_s": active / (t_active - t_boot),
            "cpu_per_server_s": (c_active - c_boot) / args.servers,
            "api_latency_s": common.summary(boot_lat),
            "to_active_s": common.summary(to_active) if to_active else None,
            "statuses": statuses, "faults": faults, "error_events": error_events,
        }
        # Where they landed, by cell (host names are "<cell>-host<N>").
        cells, used = {}, set()
        for s in servers:
            h = s.get("OS-EXT-SRV-ATTR:host")
            if h:
                used.add(h)
                cell = h.split("-host")[0]
                cells[cell] = cells.get(cell, 0) + 1
        figures["boot"]["by_cell"] = cells
        figures["boot"]["hosts_used"] = len(used)

        # Bulk delete.
        ids = [s["id"] for s in servers]
        t_del, c_del = time.perf_counter(), time.process_time()
        _r, del_lat, del_sent = run_requests(lambda u: api.expect("DELETE", f"/servers/{u}"),
                                             ids, args.concurrency)
        aio.wait_idle(timeout=max(deadline - time.monotonic(), 1))
        t_gone, c_gone = time.perf_counter(), time.process_time()
        remaining = api.list_servers()
        figures["delete"] = {
            "wall_s": t_gone - t_del, "servers_per_s": len(ids) / (t_gone - t_del) if ids else None,
            "api_latency_s": common.summary(del_lat), "remaining": len(remaining),
            "cpu_per_server_s": (c_gone - c_del) / len(ids) if ids else None,
        }
        figures["peak_rss_mb"] = common.peak_rss_mb()
        figures["rss_before_mb"] = rss_before

        leftovers = placement_leftovers(aio)
        consumers_left = [u for u in created if aio.placement.get_allocations(u).get("allocations")]
        figures["placement"] = {"providers_with_usage": leftovers,
                                "servers_with_allocations": len(consumers_left)}
    finally:
        aio.stop()
        if not args.data_dir:
            shutil.rmtree(data_dir, ignore_errors=True)

    ref = common.reference_or_none(["boot", "delete"], args.repeat, skip=args.skip_reference)
    figures["reference"] = ref
    report(figures, ref, active)
    if args.json:
        print(json.dumps(figures, indent=2, sort_keys=True))
    return 0


def report(f, ref, active):
    b, d = f["boot"], f["delete"]
    s = common.fmt
    print(f"# bench/boot.py — {common.machine_line()}")
    print(f"all-in-one: {f['cells']} cells x {f['hosts_per_cell']} hosts, "
          f"{f['servers']} servers, {f['concurrency']} client thread(s); started in {f['startup_s']:.1f} s")
    print(f"boot: {active}/{f['servers']} ACTIVE ({b['statuses']}); by cell {b['by_cell']} "
          f"on {b['hosts_used']} hosts")
    if f.get("heartbeats_started_by_benchmark"):
        print("note: the all-in-one ran no compute heartbeats; the benchmark started them "
              "(one periodic per host at [DEFAULT] report_interval)")
    for msg, count in sorted(b["faults"].items(), key=lambda kv: -kv[1]):
        print(f"  ERROR x{count}: {msg}")
    for msg, count in sorted(b.get("error_events", {}).items(), key=lambda kv: -kv[1]):
        print(f"  failed event x{count} (first errored servers): {msg}")
    rows = [
        ("boot: ACTIVE servers/s (POST .. all done)", f"{b['servers_per_s']:.1f}", None, None),
        ("boot: wall time", s(b["wall_s"], "s"), None, None),
        ("boot: API latency p50", s(b["api_latency_s"]["p50"], "s"), None, None),
        ("boot: API latency p95", s(b["api_latency_s"]["p95"], "s"), None, None),
    ]
    if b["to_active_s"]:
        rows += [("boot: POST -> ACTIVE under load p50", s(b["to_active_s"]["p50"], "s"), None, None),
                 ("boot: POST -> ACTIVE under load p95", s(b["to_active_s"]["p95"], "s"), None, None)]
    rows += [
        ("delete: servers/s (DELETE .. all gone)", f"{d['servers_per_s']:.1f}" if d["servers_per_s"] else "-", None, None),
        ("delete: API latency p50", s(d["api_latency_s"]["p50"], "s"), None, None),
        ("delete: API latency p95", s(d["api_latency_s"]["p95"], "s"), None, None),
        ("peak RSS (whole all-in-one process)", f"{f['peak_rss_mb']:.0f} MiB",
         f"{ref['peak_rss_mb']:.0f} MiB" if ref and ref.get("peak_rss_mb") else None, None),
    ]
    common.print_table("Novella (bulk)", rows)

    rb = ref.get("boot", {}).get("median") if ref else None
    rd = ref.get("delete", {}).get("median") if ref else None
    nb, nd = f["single_boot_s"]["p50"], f["single_delete_s"]["p50"]
    per_server_boot = 1.0 / b["servers_per_s"]
    per_server_del = 1.0 / d["servers_per_s"] if d["servers_per_s"] else None
    rows = [
        ("boot-to-ACTIVE, one server (median)", s(nb, "s"), s(rb, "s"), common.ratio(rb, nb)),
        ("delete, one server (median)", s(nd, "s"), s(rd, "s"), common.ratio(rd, nd)),
        ("boot, amortised per server in bulk", s(per_server_boot, "s"), s(rb, "s"),
         common.ratio(rb, per_server_boot)),
        ("delete, amortised per server in bulk", s(per_server_del, "s"), s(rd, "s"),
         common.ratio(rd, per_server_del)),
    ]
    rbc = ref.get("boot", {}).get("cpu_median") if ref else None
    rdc = ref.get("delete", {}).get("cpu_median") if ref else None
    nbc, ndc = f["single_boot_cpu_s"]["p50"], f["single_delete_cpu_s"]["p50"]
    rows += [
        ("CPU time, boot one server (median)", s(nbc, "s"), s(rbc, "s"), common.ratio(rbc, nbc)),
        ("CPU time, delete one server (median)", s(ndc, "s"), s(rdc, "s"), common.ratio(rdc, ndc)),
        ("CPU time per server, bulk boot", s(b["cpu_per_server_s"], "s"), s(rbc, "s"),
         common.ratio(rbc, b["cpu_per_server_s"])),
        ("CPU time per server, bulk delete", s(d["cpu_per_server_s"], "s"), s(rdc, "s"),
         common.ratio(rdc, d["cpu_per_server_s"])),
    ]
    common.print_table("Per operation: novella vs reference (ratio = reference / novella)", rows)
    if ref is None:
        print("(reference skipped or unavailable)")
    else:
        print(f"reference: nova {ref.get('nova_version')} functional harness, "
              f"{ref.get('repeat')} repetitions, samples {json.dumps({k: v.get('samples') for k, v in ref.items() if isinstance(v, dict) and 'samples' in v})}")

    if f.get("sql_per_boot_and_delete"):
        per = f["sql_per_boot_and_delete"]
        total = sum(sum(v.values()) for v in per.values())
        print(f"\nSQL statements for one boot + delete (mean over the single runs): {total:.0f}")
        for db, verbs in per.items():
            print(f"  {db}: " + ", ".join(f"{k} {v:g}" for k, v in verbs.items()))
        print("  (by database file; the embedded network, image and volume services share "
              "the API database unless configured otherwise)")

    p = f["placement"]
    print()
    if not p["providers_with_usage"] and not p["servers_with_allocations"] and f["delete"]["remaining"] == 0:
        print("placement after delete: every provider's usage is zero; no server has an allocation left")
    else:
        print(f"placement after delete: NOT ZERO — providers {p['providers_with_usage']}, "
              f"servers with allocations {p['servers_with_allocations']}, servers left {f['delete']['remaining']}")


if __name__ == "__main__":
    sys.exit(main())
