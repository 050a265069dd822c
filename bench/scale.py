#!/usr/bin/env python3
"""The cost of a fleet as it grows: 100, 1,000 and 10,000 simulated hosts.

For each size (``--sizes``; ``--quick``: 100 and 1000) the all-in-one is
started in a fresh child process (``--cells`` cells, the hosts split evenly,
SQLite, in-process transport, the periodic work of every host running as in
``novella up``), and the child measures:

- start-up time (``AllInOne.start()`` with every host's init_host) and its CPU;
- resident memory after start-up and after the idle period;
- idle CPU: process CPU time over ``--idle`` seconds of doing nothing, as a
  share of one core (heartbeats, resource updates, power-state syncs);
- boot: ``--boots`` servers booted and deleted one at a time (POST to every
  queued cast handled), p50/p95 wall time and CPU per boot, and the CPU per
  boot net of the idle rate measured before;
- ``GET /servers/detail`` (a page of up to 1000, with ``--population``
  servers present) and ``GET /os-hypervisors`` and ``/os-hypervisors/detail``
  (every host), p50 of ``--list-repeats`` calls, the fleet idling;
- then, with the fleet's periodic work stopped but for the heartbeats (one
  statement per cell and interval; so that the process's CPU time is the
  operation's own): the same boots again (wall and CPU p50) and
  resize + confirm of one server at a time (``--resizes`` cycles), p50/p95;
  and the SQL statements (every database, counted by a SQLAlchemy event
  listener) of one boot and of one resize + confirm, mean of
  ``--statement-ops``, in all and per database;
- at the largest size only, ``--bulk`` servers booted in bulk (50 per
  request), as many as fit: the target is cut to the placement capacity, to
  what the memory left on the machine would hold at the resident memory per
  server measured on the first chunk, and to ``--bulk-time-limit``; the
  figure says which bound applied.

The parent prints one table with a column per size and the growth factor
from each size to the next (next / previous).

Beside each size, the reference's Placement (openstack-placement in the
virtualenv ``--ref-venv``, see bench/placement_perf.py) and Novella's are
started under the same gunicorn, one worker, each on its own SQLite database
holding the same data: N flat roots (VCPU, MEMORY_MB, DISK_GB, one aggregate,
one trait), and N roots each with one bandwidth child provider
(NET_BW_EGR_KILOBIT_PER_SEC and NET_BW_IGR_KILOBIT_PER_SEC, a physnet trait).
The first tree of each database is made through the HTTP API; the other N-1
are copied from it by SQL, since loading 10,000 trees through the reference's
API takes about an hour here. Timed, through the API: the plain candidates
query on the flat and on the nested database, and a query with a granular
bandwidth group (``resources1``, ``required1``, ``group_policy=isolate``) on
the nested one; median of ``--repeats`` after a warm-up call, with the ratio.

    python3 bench/scale.py --quick                      # 100 and 1000 hosts
    python3 bench/scale.py                              # 100, 1000, 10000 hosts
    python3 bench/scale.py --sizes 10000 --bulk 100000 --skip-placement
"""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)

from bench import common  # noqa: E402

MiB = 1024.0


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def mem_available_mb():
    with open("/proc/meminfo") as fh:
        for line in fh:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / MiB
    return None


# -- the all-in-one at one size (child process) -----------------------------------------

def _latencies(fn, repeats):
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def measure_fleet(args):
    """Runs in the child: every figure of the all-in-one at one size."""
    import logging
    logging.basicConfig(level=logging.WARNING)
    from bench.boot import ComputeClient, SQLCounter, bench_network, single_ops
    from bench.resize import cycle, other
    from novella.allinone import AllInOne

    hosts_per_cell = max(1, args.hosts // args.cells)
    f = {"hosts": hosts_per_cell * args.cells, "cells": args.cells,
         "hosts_per_cell": hosts_per_cell}
    data_dir = tempfile.mkdtemp(prefix="novella-bench-scale-")
    pid = os.getpid()
    f["rss_before_start_mb"] = common.pid_rss_mb(pid)[0]
    t0, c0 = time.perf_counter(), time.process_time()
    aio = AllInOne(data_dir, cells=args.cells, hosts_per_cell=hosts_per_cell, log=None,
                   config_overrides={"quota": {"instances": -1, "cores": -1, "ram": -1}})
    aio.start()
    # What `novella up` runs on a timer for the conductor and each host.
    aio._start_periodics()
    f["startup_s"] = time.perf_counter() - t0
    f["startup_cpu_s"] = time.process_time() - c0
    f["rss_after_start_mb"] = common.pid_rss_mb(pid)[0]
    f["threads"] = threading.active_count()
    f["periodic_tasks"] = len(aio.periodics)
    log(f"{f['hosts']} hosts: started in {f['startup_s']:.1f} s, "
        f"{f['rss_after_start_mb']:.0f} MiB, {f['threads']} threads")
    try:
        # Idle: nothing asked of the fleet; only its periodic work runs.
        t0, c0 = time.perf_counter(), time.process_time()
        time.sleep(args.idle)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        f["idle_s"] = wall
        f["idle_cpu_pct"] = 100.0 * cpu / wall
        f["rss_after_idle_mb"] = common.pid_rss_mb(pid)[0]
        idle_rate = cpu / wall

        api = ComputeClient(aio.compute_api_app, microversion="2.79")
        api.expect("POST", "/flavors", {"flavor": {"name": "r2", "ram": 1024, "vcpus": 1,
                                                   "disk": 1, "id": "r2"}})
        net_id = bench_network(aio, "10.128.0.0/16")["id"]
        deadline = time.monotonic() + args.timeout

        # Boot (and delete) one at a time, the fleet's periodic work running;
        # the first is a warm-up.
        single_ops(aio, api, "1", 1, deadline, net_id)
        single = single_ops(aio, api, "1", args.boots, deadline, net_id)
        f["boot_s"] = common.summary(single["boot"])
        f["boot_cpu_s"] = common.summary(single["boot_cpu"])
        f["boot_cpu_net_s"] = max(0.0, statistics.mean(
            c - idle_rate * w for c, w in zip(single["boot_cpu"], single["boot"])))
        f["delete_s"] = common.summary(single["delete"])

        # The listings, while the fleet idles.
        boot_bulk(aio, api, args.population, "pop")
        listings(f, api, args, "")

        # The same boots with the periodic work paused (but the heartbeats,
        # one statement per cell, without which the scheduler drops the hosts):
        # the process's CPU time is then the boot's own.
        for p in aio.periodics:
            if not p.name.startswith("heartbeat"):
                p.stop()
        quiet = single_ops(aio, api, "1", args.boots, deadline, net_id)
        f["boot_quiet_s"] = common.summary(quiet["boot"])
        f["boot_cpu_quiet_s"] = common.summary(quiet["boot_cpu"])
        sql = SQLCounter()
        f["statements_per_boot"] = boot_statements(aio, api, sql, net_id, args.statement_ops)

        # Resize + confirm, one server at a time.
        sids = []
        for i in range(args.resizes):
            sids.append(api.expect("POST", "/servers", {"server": {
                "name": f"rz{i}", "flavorRef": "1", "imageRef": aio.demo_image["id"],
                "networks": "none"}})["server"]["id"])
        aio.wait_idle(600)
        flavors = {sid: "1" for sid in sids}
        times = []
        for sid in sids:
            if time.monotonic() > deadline:
                break
            flavors[sid] = other(flavors[sid])
            t0 = time.perf_counter()
            cycle(aio, api, sid, flavors[sid])
            times.append(time.perf_counter() - t0)
        f["resize_confirm_s"] = common.summary(times)
        if sids:
            f["statements_per_resize_confirm"] = resize_statements(
                aio, api, sql, sids[0], flavors, args.statement_ops)


        if args.bulk:
            f["bulk"] = bulk(aio, api, args)
            listings(f, api, args, "_after_bulk")
        f["rss_end_mb"] = common.pid_rss_mb(pid)[0]
        f["peak_rss_mb"] = common.pid_rss_mb(pid)[1]
    finally:
        aio.stop()
        shutil.rmtree(data_dir, ignore_errors=True)
    return f


def _statements(sql, ops):
    """{database: statements per operation, "total": all of them} from ``sql``'s counts."""
    per = {db: sum(verbs.values()) for db, verbs in sql.per_database(ops).items()}
    return dict(per, total=round(sum(per.values()), 1))


def boot_statements(aio, api, sql, net_id, ops):
    """SQL statements of one boot (POST to every cast handled), mean of ``ops``."""
    from bench.boot import server_body
    sql.counts = {}
    for i in range(ops):
        sql.enabled = True
        server = api.expect("POST", "/servers", server_body(aio, f"sql-{i}", "1", net_id))["server"]
        aio.wait_idle()
        sql.enabled = False
        api.expect("DELETE", f"/servers/{server['id']}")
        aio.wait_idle()
    return _statements(sql, ops)


def resize_statements(aio, api, sql, sid, flavors, ops):
    """SQL statements of one resize + confirm, mean of ``ops``."""
    from bench.resize import cycle, other
    sql.counts = {}
    for _ in range(ops):
        flavors[sid] = other(flavors[sid])
        sql.enabled = True
        cycle(aio, api, sid, flavors[sid])
        sql.enabled = False
    return _statements(sql, ops)


def listings(f, api, args, suffix):
    f["servers_listed" + suffix] = len(api.expect("GET", "/servers/detail?limit=1000")["servers"])
    f["list_servers_s" + suffix] = common.summary(_latencies(
        lambda: api.expect("GET", "/servers/detail?limit=1000"), args.list_repeats))
    f["hypervisors_listed" + suffix] = len(api.expect("GET", "/os-hypervisors")["hypervisors"])
    f["hypervisors_s" + suffix] = common.summary(_latencies(
        lambda: api.expect("GET", "/os-hypervisors"), args.list_repeats))
    f["hypervisors_detail_s" + suffix] = common.summary(_latencies(
        lambda: api.expect("GET", "/os-hypervisors/detail"), args.list_repeats))


def boot_bulk(aio, api, n, prefix, chunk=50):
    """Boot n servers, ``chunk`` per request (min_count = max_count), no ports."""
    for i in range(0, n, chunk):
        count = min(chunk, n - i)
        api.expect("POST", "/servers", {"server": {
            "name": f"{prefix}{i}", "flavorRef": "1", "imageRef": aio.demo_image["id"],
            "networks": "none", "min_count": count, "max_count": count}})
        aio.wait_idle(1800)


def capacity(aio, flavor_mb=512, flavor_vcpus=1, flavor_disk=1):
    """How many m1.tiny servers placement can hold, from every provider's inventory."""
    total = 0
    for rp in aio.placement.list_resource_providers():
        _gen, inv = aio.placement.get_inventories(rp["uuid"])
        fits = []
        for rc, need in (("VCPU", flavor_vcpus), ("MEMORY_MB", flavor_mb), ("DISK_GB", flavor_disk)):
            i = inv.get(rc)
            if i is None:
                fits = [0]
                break
            fits.append(int((i["total"] - i["reserved"]) * i["allocation_ratio"]) // need)
        total += min(fits) if fits else 0
    return total


def bulk(aio, api, args):
    """Boot up to args.bulk servers in bulk; stop at the first bound reached."""
    from novella.context import get_admin_context  # noqa: F401 - keeps imports warm
    pid = os.getpid()
    target, why = args.bulk, "as asked"
    cap = capacity(aio)
    if cap < target:
        target, why = cap, f"placement capacity ({cap} m1.tiny servers)"
    out = {"asked": args.bulk, "capacity": cap}
    first = min(args.bulk_chunk, target)
    rss0 = common.pid_rss_mb(pid)[0]
    t0, c0 = time.perf_counter(), time.process_time()
    boot_bulk(aio, api, first, "bulk")
    done = first
    per_server_mb = max((common.pid_rss_mb(pid)[0] - rss0) / max(first, 1), 1e-3)
    room = (mem_available_mb() or 0) * 0.8
    fits_memory = first + int(room / per_server_mb)
    if fits_memory < target:
        target, why = fits_memory, (f"memory: {per_server_mb * 1024:.0f} KiB resident per server, "
                                    f"{room:.0f} MiB usable")
    limit = args.bulk_time_limit
    while done < target:
        elapsed = time.perf_counter() - t0
        rate = done / elapsed
        if elapsed + (min(args.bulk_chunk, target - done) / rate) > limit:
            why = (f"time: {limit:.0f} s allowed at {rate:.0f} servers/s "
                   f"(projected {target / rate:.0f} s for {target})")
            break
        n = min(args.bulk_chunk, target - done)
        boot_bulk(aio, api, n, f"bulk{done}-")
        done += n
        log(f"bulk: {done} servers booted in {time.perf_counter() - t0:.0f} s")
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    statuses = {}
    from novella.db import cells as cells_mod
    from novella.db import cell_models as cm
    import sqlalchemy as sa
    for cell in aio.cells:
        with cells_mod.cell_database(cell).session() as s:
            for st, n in s.execute(sa.select(cm.Instance.vm_state, sa.func.count()).where(
                    cm.Instance.deleted == 0).group_by(cm.Instance.vm_state)):
                statuses[st] = statuses.get(st, 0) + n
    out.update(booted=done, bound=why if done < args.bulk else "none: all booted",
               wall_s=wall, servers_per_s=done / wall, cpu_per_server_s=cpu / done,
               rss_mb=common.pid_rss_mb(pid)[0], rss_per_server_kb=per_server_mb * 1024,
               vm_states=statuses)
    return out


def run_child(size, args):
    cmd = [sys.executable, os.path.abspath(__file__), "--child", "--hosts", str(size),
           "--cells", str(args.cells), "--idle", str(args.idle), "--boots", str(args.boots),
           "--resizes", str(args.resizes), "--population", str(args.population),
           "--list-repeats", str(args.list_repeats), "--timeout", str(args.timeout),
           "--statement-ops", str(args.statement_ops),
           "--bulk", str(args.bulk if size == max(args.size_list) else 0),
           "--bulk-chunk", str(args.bulk_chunk), "--bulk-time-limit", str(args.bulk_time_limit)]
    if args.profile_startup:
        cmd.append("--profile-startup")
    env = dict(os.environ, PYTHONPATH=REPO)
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, env=env,
                          timeout=args.timeout * 3 + args.bulk_time_limit + 3600)
    if proc.returncode != 0:
        return {"error": f"child exited {proc.returncode}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


# -- placement side by side -----------------------------------------------------------------

PHYSNET = "CUSTOM_PHYSNET_PHYSNET0"
AGENT_TRAIT = "CUSTOM_VNIC_TYPE_NORMAL"
BW_INVENTORY = {"NET_BW_EGR_KILOBIT_PER_SEC": {"total": 10000000},
                "NET_BW_IGR_KILOBIT_PER_SEC": {"total": 10000000}}
GRANULAR = ("resources1=NET_BW_EGR_KILOBIT_PER_SEC:1000,NET_BW_IGR_KILOBIT_PER_SEC:1000"
            f"&required1={PHYSNET}&group_policy=isolate")


def _template(url, nested):
    """Tree 0 through the HTTP API: the root (and its bandwidth child)."""
    from bench import placement_perf as pp
    from novella.placement.client import PlacementClient
    c = PlacementClient(endpoint=url, token="admin", microversion=pp.MICROVERSION)
    c.ensure_traits([pp.TRAIT, PHYSNET, AGENT_TRAIT])
    root = str(uuid.UUID(int=1))
    gen = c.create_resource_provider(root, "scale-cn-000000")["generation"]
    gen = c.set_inventory(root, pp.INVENTORY, generation=gen)
    gen = c.set_aggregates(root, [pp.AGGREGATE], generation=gen)
    c.set_traits(root, [pp.TRAIT], generation=gen)
    if nested:
        child = str(uuid.uuid5(uuid.UUID(root), "bw"))
        gen = c.create_resource_provider(child, "scale-cn-000000:bw",
                                         parent_provider_uuid=root)["generation"]
        gen = c.set_inventory(child, BW_INVENTORY, generation=gen)
        c.set_traits(child, [PHYSNET, AGENT_TRAIT], generation=gen)
    c.close()


def _copy_trees(db_url, n, nested):
    """Copy tree 0 to trees 1..n-1 by SQL, in either implementation's schema.

    Provider rows get new ids, uuids and names; every other row that names a
    provider (inventory, traits, aggregates) is copied with the new id."""
    import sqlalchemy as sa
    engine = sa.create_engine(db_url)
    meta = sa.MetaData()
    meta.reflect(engine)
    rp = meta.tables["resource_providers"]
    cols = set(rp.c.keys())
    root_col = "root_provider_id" if "root_provider_id" in cols else "root_id"
    parent_col = "parent_provider_id" if "parent_provider_id" in cols else "parent_id"
    linked = []
    for t in meta.tables.values():
        if t.name == "resource_providers" or "allocation" in t.name:
            continue
        for key in ("resource_provider_id", "provider_id"):
            if key in t.c:
                linked.append((t, key))
    with engine.begin() as conn:
        tmpl = [dict(r._mapping) for r in conn.execute(sa.select(rp).order_by(rp.c.id))]
        if len(tmpl) != (2 if nested else 1):
            raise RuntimeError(f"expected one template tree, found {len(tmpl)} providers")
        base = max(r["id"] for r in tmpl)
        per = len(tmpl)
        rows = []
        for i in range(1, n):
            root_uuid = str(uuid.UUID(int=i + 1))
            new_root = base + (i - 1) * per + 1
            for j, r in enumerate(tmpl):
                row = dict(r, id=new_root + j, **{root_col: new_root})
                if j == 0:
                    row.update(uuid=root_uuid, name=f"scale-cn-{i:06d}", **{parent_col: None})
                else:
                    row.update(uuid=str(uuid.uuid5(uuid.UUID(root_uuid), "bw")),
                               name=f"scale-cn-{i:06d}:bw", **{parent_col: new_root})
                rows.append(row)
        for k in range(0, len(rows), 2000):
            conn.execute(rp.insert(), rows[k:k + 2000])
        for t, key in linked:
            src = [dict(r._mapping) for r in conn.execute(
                sa.select(t).where(t.c[key].in_([r["id"] for r in tmpl])))]
            if not src:
                continue
            drop_id = "id" in t.c and t.c["id"].primary_key and len(t.primary_key.columns) == 1
            offset = {r["id"]: j for j, r in enumerate(tmpl)}
            out = []
            for i in range(1, n):
                new_root = base + (i - 1) * per + 1
                for r in src:
                    row = dict(r, **{key: new_root + offset[r[key]]})
                    if drop_id:
                        row.pop("id")
                    out.append(row)
            for k in range(0, len(out), 2000):
                conn.execute(t.insert(), out[k:k + 2000])
        count = conn.execute(sa.select(sa.func.count()).select_from(rp)).scalar()
    engine.dispose()
    if count != n * (2 if nested else 1):
        raise RuntimeError(f"copy left {count} providers")


def measure_placement(n, args):
    """{(shape, query label): {impl: seconds}} for N trees, flat and nested."""
    from bench import placement_perf as pp
    pp.ensure_ref_venv(args.ref_venv)
    shapes = [("flat", False, [("flat: plain", pp.QUERY)]),
              ("nested", True, [("nested: plain", pp.QUERY),
                                ("nested: granular bandwidth", f"{pp.QUERY}&{GRANULAR}")])]
    out = {}
    for shape, nested, queries in shapes:
        for impl in ("novella", "reference"):
            workdir = tempfile.mkdtemp(prefix=f"scale-placement-{impl}-")
            db = pp.Database("sqlite", workdir)
            server = pp.Server(impl, db.url, workdir, args.ref_venv)
            try:
                server.sync_db()
                server.start(1)
                _template(server.url, nested)
                server.stop()
                _copy_trees(db.url, n, nested)
                server.start(1)
                saved = pp.QUERIES
                pp.QUERIES = queries
                try:
                    res = pp.measure_queries(server.url, n, args.repeats, args.query_time_limit)
                finally:
                    pp.QUERIES = saved
                for label, r in res.items():
                    out.setdefault(label, {})[impl] = r
                out.setdefault("rss_mb", {})[f"{shape}/{impl}"] = server.worker_rss_mb()
                log(f"placement N={n} {shape} {impl}: " + ", ".join(
                    f"{k} {v['seconds'] * 1000:.1f} ms ({v['results']})" for k, v in res.items()))
            except Exception as exc:  # noqa: BLE001 - reported in the table
                log(f"placement N={n} {shape} {impl} failed: {exc}")
                for label, _q in queries:
                    out.setdefault(label, {})[impl] = {"error": str(exc)[:300]}
            finally:
                server.stop()
                db.drop()
                shutil.rmtree(workdir, ignore_errors=True)
    return out


# -- report ------------------------------------------------------------------------------

def _get(d, path):
    for k in path.split("."):
        if not isinstance(d, dict) or d.get(k) is None:
            return None
        d = d[k]
    return d


ROWS = [  # label, key path, unit ("s", "ms" from seconds, "MiB", "%", "")
    ("start-up", "startup_s", "s"),
    ("start-up CPU", "startup_cpu_s", "s"),
    ("resident memory after start-up", "rss_after_start_mb", "MiB"),
    ("resident memory after idle", "rss_after_idle_mb", "MiB"),
    ("threads", "threads", ""),
    ("idle CPU (share of one core)", "idle_cpu_pct", "%"),
    ("boot p50", "boot_s.p50", "ms"),
    ("boot p95", "boot_s.p95", "ms"),
    ("CPU per boot (p50)", "boot_cpu_s.p50", "ms"),
    ("CPU per boot, net of idle (mean)", "boot_cpu_net_s", "ms"),
    ("delete p50", "delete_s.p50", "ms"),
    ("boot p50, periodic work paused", "boot_quiet_s.p50", "ms"),
    ("CPU per boot (p50), periodic work paused", "boot_cpu_quiet_s.p50", "ms"),
    ("resize+confirm p50", "resize_confirm_s.p50", "ms"),
    ("resize+confirm p95", "resize_confirm_s.p95", "ms"),
    ("GET /servers/detail p50", "list_servers_s.p50", "ms"),
    ("GET /os-hypervisors p50", "hypervisors_s.p50", "ms"),
    ("GET /os-hypervisors/detail p50", "hypervisors_detail_s.p50", "ms"),
    ("statements per boot", "statements_per_boot.total", ""),
    ("statements per resize+confirm", "statements_per_resize_confirm.total", ""),
    ("peak resident memory", "peak_rss_mb", "MiB"),
]


def _show(v, unit):
    if v is None:
        return "-"
    if unit == "ms":
        return f"{v * 1000:.1f} ms"
    if unit == "s":
        return f"{v:.1f} s"
    if unit == "MiB":
        return f"{v:.0f} MiB"
    if unit == "%":
        return f"{v:.1f}%"
    return str(v)


def report(results, args):
    sizes = sorted(results)
    print(f"# bench/scale.py — {common.machine_line()}")
    print(f"all-in-one: {args.cells} cells, SQLite, in-process transport; idle {args.idle:.0f} s; "
          f"{args.boots} boots, {args.resizes} resize+confirm, {args.population} servers listed")
    headers = ["metric"]
    for i, n in enumerate(sizes):
        headers.append(f"{n} hosts")
        if i:
            headers.append(f"x ({sizes[i - 1]}->{n})")
    rows = []
    for label, key, unit in ROWS:
        row = [label]
        prev = None
        for i, n in enumerate(sizes):
            v = _get(results[n].get("fleet", {}), key)
            row.append(_show(v, unit))
            if i:
                row.append(f"{v / prev:.2f}x" if v is not None and prev else "-")
            prev = v
        rows.append(tuple(row))
    common.print_table("Novella all-in-one by fleet size (x = growth from the previous size)",
                       rows, headers=headers)
    for n in sizes:
        fl = results[n].get("fleet", {})
        if fl.get("error"):
            print(f"{n} hosts: {fl['error']}")
        for what in ("boot", "resize_confirm"):
            per = fl.get(f"statements_per_{what}")
            if per:
                print(f"{n} hosts: SQL statements per {what.replace('_', '+')}: " + ", ".join(
                    f"{db} {v:g}" for db, v in sorted(per.items())))
        b = fl.get("bulk")
        if b:
            print(f"\nbulk at {fl['hosts']} hosts: {b['booted']} of {b['asked']} servers booted "
                  f"(50 per request) in {b['wall_s']:.0f} s, {b['servers_per_s']:.1f} servers/s, "
                  f"CPU {b['cpu_per_server_s'] * 1000:.1f} ms per server, "
                  f"{b['rss_per_server_kb']:.0f} KiB resident per server, RSS {b['rss_mb']:.0f} MiB; "
                  f"vm_states {b['vm_states']}; bound: {b['bound']}")
            for label, key in (("GET /servers/detail?limit=1000", "list_servers_s"),
                               ("GET /os-hypervisors", "hypervisors_s"),
                               ("GET /os-hypervisors/detail", "hypervisors_detail_s")):
                lat = fl.get(key + "_after_bulk") or {}
                if lat.get("p50") is not None:
                    print(f"{label} with {b['booted']} servers: p50 {lat['p50'] * 1000:.1f} ms "
                          f"(at start: p50 {(fl.get(key) or {}).get('p50', 0) * 1000:.1f} ms with "
                          f"{fl.get('servers_listed', '-')} servers)")
            print(f"resident memory after the bulk boot {fl.get('rss_end_mb', 0):.0f} MiB, "
                  f"peak {fl.get('peak_rss_mb', 0):.0f} MiB")
    prow = []
    for n in sizes:
        pl = results[n].get("placement")
        if not pl:
            continue
        for label in ("flat: plain", "nested: plain", "nested: granular bandwidth"):
            r = pl.get(label, {})
            nov, ref = r.get("novella", {}), r.get("reference", {})
            a, b = nov.get("seconds"), ref.get("seconds")
            prow.append((n, label, _show(a, "ms"), _show(b, "ms"),
                         common.ratio(b, a), f"{nov.get('results', '-')}/{ref.get('results', '-')}"))
    if prow:
        common.print_table(
            "GET /allocation_candidates, Novella vs the reference's Placement "
            "(one gunicorn worker each, SQLite, same data; ratio = reference / Novella)",
            prow, headers=("roots", "query", "novella", "reference", "ratio", "results n/r"))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100,1000,10000", help="host counts, comma separated")
    ap.add_argument("--quick", action="store_true", help="sizes 100 and 1000")
    ap.add_argument("--cells", type=int, default=10, help="cells the hosts are split into")
    ap.add_argument("--idle", type=float, default=20.0, help="seconds of idle CPU measurement")
    ap.add_argument("--boots", type=int, default=10, help="single boots timed per size")
    ap.add_argument("--resizes", type=int, default=5, help="resize+confirm cycles timed per size")
    ap.add_argument("--population", type=int, default=200,
                    help="servers present when listing servers")
    ap.add_argument("--list-repeats", type=int, default=5)
    ap.add_argument("--statement-ops", type=int, default=3,
                    help="boots and resize+confirm cycles whose SQL statements are counted")
    ap.add_argument("--bulk", type=int, default=100000,
                    help="servers booted in bulk at the largest size (0: none)")
    ap.add_argument("--bulk-chunk", type=int, default=1000)
    ap.add_argument("--bulk-time-limit", type=float, default=1800.0)
    ap.add_argument("--timeout", type=float, default=1800.0, help="bound per measured phase")
    ap.add_argument("--skip-placement", action="store_true")
    ap.add_argument("--skip-fleet", action="store_true")
    ap.add_argument("--repeats", type=int, default=5, help="timed runs per candidates query")
    ap.add_argument("--query-time-limit", type=float, default=60.0)
    ap.add_argument("--ref-venv", default=os.environ.get("NOVELLA_REF_VENV", "/work/refplacement"))
    ap.add_argument("--json", help="also write the raw results to this file")
    ap.add_argument("--report", metavar="JSON", help="print the tables of a saved --json file")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--hosts", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--profile-startup", action="store_true",
                    help="(child) write a cProfile of start-up to /tmp/scale-startup-<hosts>.prof")
    args = ap.parse_args(argv)

    if args.child:
        if args.profile_startup:
            import cProfile
            prof = cProfile.Profile()
            import novella.allinone as aio_mod
            orig = aio_mod.AllInOne.start

            def start(self):
                prof.enable()
                try:
                    return orig(self)
                finally:
                    prof.disable()
                    prof.dump_stats(f"/tmp/scale-startup-{args.hosts}.prof")
            aio_mod.AllInOne.start = start
        try:
            out = measure_fleet(args)
        except Exception as exc:  # noqa: BLE001 - reported by the parent
            import traceback
            traceback.print_exc()
            out = {"error": f"{type(exc).__name__}: {exc}"}
        print(json.dumps(out))
        return 0

    if args.report:
        with open(args.report) as fh:
            saved = json.load(fh)
        report({int(k): v for k, v in saved["results"].items()}, argparse.Namespace(**saved["args"]))
        return 0
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    if args.quick and args.sizes == ap.get_default("sizes"):
        args.sizes = "100,1000"
    args.size_list = sorted(int(x) for x in args.sizes.split(",") if x)
    results = {}

    def keep():
        if args.json:
            with open(args.json, "w") as fh:
                json.dump({"args": vars(args), "results": results}, fh, indent=1)

    started = time.time()
    for n in args.size_list:
        results[n] = {}
        if not args.skip_fleet:
            log(f"fleet of {n} hosts")
            results[n]["fleet"] = run_child(n, args)
            keep()
        if not args.skip_placement:
            log(f"placement at {n} roots")
            results[n]["placement"] = measure_placement(n, args)
            keep()
    report(results, args)
    print(f"\nbench/scale.py {' '.join(sys.argv[1:]) or '(defaults)'}: wall {time.time() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
