"""Resize + confirm cycles on the all-in-one, beside the reference's timing.

Boots N servers in one cell, then measures:
- throughput: every server resized at once (the API casts, the conductor runs
  the moves concurrently), then every one confirmed; cycles per second;
- one cycle: resize to VERIFY_RESIZE then confirm, one server at a time;
  p50/p95 over a sample;
and beside it the reference's functional harness timing one resize+confirm
(``run_reference(["resize"])``), printing the ratio. Ends by checking that
the books are consistent: one allocation per server, none held by migrations.

    python3 bench/resize.py                     # 200 servers, 4 hosts
    python3 bench/resize.py --servers 50 --skip-reference
"""
import argparse
import collections
import logging
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import common  # noqa: E402
from bench.boot import ComputeClient, ensure_heartbeats  # noqa: E402

FLAVORS = ("1", "r2")  # m1.tiny and a tiny with twice the memory: cycles alternate


def start(data_dir, hosts):
    from novella.allinone import AllInOne
    aio = AllInOne(data_dir, cells=1, hosts_per_cell=hosts, log=None, config_overrides={
        "simulated": {"vcpus": 512, "memory_mb": 512 * 1024}}).start()
    ensure_heartbeats(aio)  # the scheduler's ComputeFilter needs live services
    client = ComputeClient(aio.compute_api_app, microversion="2.79")
    client.expect("POST", "/flavors", {"flavor": {"name": "r2", "ram": 1024, "vcpus": 1,
                                                  "disk": 1, "id": "r2"}})
    return aio, client


def boot(aio, client, n):
    for i in range(0, n, 50):
        count = min(50, n - i)
        client.expect("POST", "/servers", {"server": {
            "name": f"r{i}", "flavorRef": "1", "imageRef": aio.demo_image["id"],
            "networks": "none", "min_count": count, "max_count": count}})
        aio.wait_idle(600)
    servers = client.list_servers()
    return {s["id"]: "1" for s in servers}


def cycle(aio, client, sid, flavor):
    client.expect("POST", f"/servers/{sid}/action", {"resize": {"flavorRef": flavor}})
    aio.wait_idle(600)
    client.expect("POST", f"/servers/{sid}/action", {"confirmResize": None})
    aio.wait_idle(600)


def other(flavor):
    return FLAVORS[1] if flavor == FLAVORS[0] else FLAVORS[0]


def failures(aio, failed_ids):
    """{fault message: count} of the moves that were rolled back."""
    import collections
    import sqlalchemy as sa
    from novella.db import cell_models as cm, cells
    out = collections.Counter()
    with cells.cell_database(aio.cells[0]).session() as s:
        for sid in failed_ids:
            row = s.scalars(sa.select(cm.InstanceFault).where(
                cm.InstanceFault.instance_uuid == sid).order_by(cm.InstanceFault.id.desc())).first()
            out[row.message[:120] if row else "?"] += 1
    return dict(out)


def check_books(aio, client, flavors):
    """Servers ACTIVE with the flavor they were resized to, one allocation each."""
    bad = 0
    for s in client.list_servers():
        allocs = aio.placement.get_allocations(s["id"])["allocations"]
        mem = sum(a["resources"].get("MEMORY_MB", 0) for a in allocs.values())
        want = 512 if flavors[s["id"]] == "1" else 1024
        bad += s["status"] != "ACTIVE" or len(allocs) != 1 or mem != want
    held = 0
    for rp in aio.placement.list_resource_providers():
        _gen, usage = aio.placement.get_provider_usages(rp["uuid"])
        held += usage.get("MEMORY_MB", 0)
    expected = sum(512 if f == "1" else 1024 for f in flavors.values())
    return bad, held == expected


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--servers", type=int, default=200)
    ap.add_argument("--hosts", type=int, default=4)
    ap.add_argument("--sample", type=int, default=30, help="single cycles timed one by one")
    ap.add_argument("--repeat", type=int, default=3, help="reference repetitions")
    ap.add_argument("--skip-reference", action="store_true")
    args = ap.parse_args()
    logging.basicConfig(level=logging.ERROR)
    data_dir = tempfile.mkdtemp(prefix="novella-bench-resize-")
    aio, client = start(data_dir, args.hosts)
    try:
        flavors = boot(aio, client, args.servers)
        ids = sorted(flavors)
        # Throughput: all resized together, then all confirmed together.
        with common.Timer() as t_all:
            resized = common.resize_all_then_confirm(aio, client, flavors, other)
        failed = collections.Counter(failures(aio, set(ids) - resized))
        verify = sum(1 for s in client.list_servers() if s["status"] != "ACTIVE")
        # One cycle at a time.
        samples = []
        for sid in ids[:args.sample]:
            flavors[sid] = other(flavors[sid])
            try:
                with common.Timer() as t:
                    cycle(aio, client, sid, flavors[sid])
            except RuntimeError:
                failed.update(failures(aio, [sid]))
                flavors[sid] = other(flavors[sid])
                continue
            samples.append(t.elapsed)
        bad, books_ok = check_books(aio, client, flavors)
    finally:
        aio.stop()
        shutil.rmtree(data_dir, ignore_errors=True)

    ref = common.reference_or_none(["resize"], args.repeat, skip=args.skip_reference)
    ref_cycle = (ref or {}).get("resize", {}).get("median")
    s = common.summary(samples)
    print(f"# Resize + confirm, {args.servers} servers, 1 cell x {args.hosts} hosts "
          f"({common.machine_line()})")
    common.print_table("Resize", [
        ("cycles/s (all servers at once)", f"{args.servers / t_all.elapsed:.1f}", "-", None),
        ("one cycle p50", common.fmt(s["p50"], "s"), common.fmt(ref_cycle, "s"),
         common.ratio(ref_cycle, s["p50"])),
        ("one cycle p95", common.fmt(s["p95"], "s"), "-", None),
        ("moves rolled back (throughput run)", sum(failed.values()), "-", None),
        ("servers not ACTIVE or mis-booked after the run", verify + bad, "-", None),
        ("usages == sum of instance allocations", books_ok, "-", None),
    ])
    for message, count in failed.items():
        print(f"rolled back x{count}: {message}")


if __name__ == "__main__":
    main()
