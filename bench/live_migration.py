"""Live migrations on the all-in-one, beside the reference's timing.

Boots N servers in one cell, then measures:
- throughput: every server live-migrated at once (the API casts, the
  conductor runs the moves concurrently); migrations per second;
- one migration: from the request to the server ACTIVE on another host,
  one server at a time; p50/p95 over a sample;
and beside it the reference's functional harness timing one live migration
(``run_reference(["live_migrate"])``), printing the ratio. Ends by checking
the books: each server ACTIVE with one allocation, on the host it shows, no
migration holding an allocation, every migration completed.

    python3 bench/live_migration.py                 # 200 servers, 4 hosts
    python3 bench/live_migration.py --servers 50 --skip-reference
"""
import argparse
import logging
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import common  # noqa: E402
from bench.resize import boot, start  # noqa: E402

LIVE = {"os-migrateLive": {"host": None, "block_migration": "auto"}}


def hosts_of(client):
    return {s["id"]: s["OS-EXT-SRV-ATTR:host"] for s in client.list_servers()}


def check_books(aio, client, migration_type="live-migration"):
    """(servers not ACTIVE or mis-booked, migrations of ``migration_type`` not
    completed or holding allocations, how many there are)."""
    names = {rp["uuid"]: rp["name"] for rp in aio.placement.list_resource_providers()}
    bad = 0
    for s in client.list_servers():
        allocs = aio.placement.get_allocations(s["id"])["allocations"]
        bad += (s["status"] != "ACTIVE" or list(map(names.get, allocs))
                != [s["OS-EXT-SRV-ATTR:host"]])
    migrations = client.expect(
        "GET", f"/os-migrations?migration_type={migration_type}")["migrations"]
    stuck = sum(m["status"] != "completed" or bool(
        aio.placement.get_allocations(m["uuid"])["allocations"]) for m in migrations)
    return bad, stuck, len(migrations)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--servers", type=int, default=200)
    ap.add_argument("--hosts", type=int, default=4)
    ap.add_argument("--sample", type=int, default=30, help="migrations timed one by one")
    ap.add_argument("--repeat", type=int, default=3, help="reference repetitions")
    ap.add_argument("--skip-reference", action="store_true")
    args = ap.parse_args()
    logging.basicConfig(level=logging.ERROR)
    data_dir = tempfile.mkdtemp(prefix="novella-bench-live-")
    aio, client = start(data_dir, args.hosts)
    try:
        ids = sorted(boot(aio, client, args.servers))
        before = hosts_of(client)
        # Throughput: all at once.
        with common.Timer() as t_all:
            for sid in ids:
                client.expect("POST", f"/servers/{sid}/action", LIVE)
            aio.wait_idle(1800)
        after = hosts_of(client)
        moved = sum(after[sid] != before[sid] for sid in ids)
        # One at a time.
        samples, cpu = [], []
        for sid in ids[:args.sample]:
            with common.Timer() as t:
                client.expect("POST", f"/servers/{sid}/action", LIVE)
                aio.wait_idle(600)
            samples.append(t.elapsed)
            cpu.append(t.cpu)
        bad, stuck, migrations = check_books(aio, client)
    finally:
        aio.stop()
        shutil.rmtree(data_dir, ignore_errors=True)

    ref = common.reference_or_none(["live_migrate"], args.repeat, skip=args.skip_reference)
    ref_one = (ref or {}).get("live_migrate", {}).get("median")
    ref_cpu = (ref or {}).get("live_migrate", {}).get("cpu_median")
    s, c = common.summary(samples), common.summary(cpu)
    print(f"# Live migration, {args.servers} servers, 1 cell x {args.hosts} hosts "
          f"({common.machine_line()})")
    common.print_table("Live migration", [
        ("migrations/s (all servers at once)", f"{args.servers / t_all.elapsed:.1f}", "-", None),
        ("servers that changed host (all at once)", f"{moved}/{args.servers}", "-", None),
        ("one migration p50", common.fmt(s["p50"], "s"), common.fmt(ref_one, "s"),
         common.ratio(ref_one, s["p50"])),
        ("one migration p95", common.fmt(s["p95"], "s"), "-", None),
        ("CPU, one migration p50", common.fmt(c["p50"], "s"), common.fmt(ref_cpu, "s"),
         common.ratio(ref_cpu, c["p50"])),
        ("servers not ACTIVE or mis-booked after the run", bad, "-", None),
        (f"migrations not completed or holding allocations (of {migrations})", stuck,
         "-", None),
    ])


if __name__ == "__main__":
    main()
