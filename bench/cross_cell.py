"""Cross-cell resize + confirm cycles on the all-in-one, beside the reference's timing.

Two cells of ``--hosts`` simulated hosts each; the policy
``compute:servers:resize:cross_cell`` passes for admins (a policy file) and
``[filter_scheduler] cross_cell_move_weight_multiplier`` is negative, so the
scheduler prefers the cell a server is not in. Boots N servers in cell1
(cell2's compute services disabled meanwhile), then measures:
- throughput: every server resized at once into cell2 (the API casts, the
  super-conductor runs the moves concurrently), then every one confirmed;
  cycles per second;
- one cycle: resize to VERIFY_RESIZE in the other cell, then confirm, one
  server at a time; p50/p95 of wall and process CPU time;
and beside it the reference's functional harness timing one cross-cell
resize+confirm (``run_reference(["cross_cell_resize"])``), printing the ratio.
Ends by checking the books: every server ACTIVE with its flavor, mapped to
the cell its last move went to, one allocation (its own, on its host), none
held by a migration, no hidden or leftover copy in any cell, and each
provider's usage equal to the flavors of the servers on it.

    python3 bench/cross_cell.py                          # 100 servers, 2 cells x 4 hosts
    python3 bench/cross_cell.py --servers 20 --skip-reference
    python3 bench/cross_cell.py --servers 20 --skip-reference --profile 20   # + SQL, yappi
"""
import argparse
import collections
import logging
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import common  # noqa: E402
from bench.boot import ComputeClient, ensure_heartbeats  # noqa: E402

FLAVORS = {"1": {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1},   # m1.tiny
           "r2": {"VCPU": 1, "MEMORY_MB": 1024, "DISK_GB": 1}}  # cycles alternate the two
CROSS_CELL_RULE = "compute:servers:resize:cross_cell"


def start(data_dir, hosts):
    from oslo_policy import opts as policy_opts

    from novella.allinone import AllInOne
    from novella.conf import CONF
    aio = AllInOne(data_dir, cells=2, hosts_per_cell=hosts, log=None, config_overrides={
        "simulated": {"vcpus": 512, "memory_mb": 512 * 1024},
        "filter_scheduler": {"cross_cell_move_weight_multiplier": -1000000.0}})
    # As an operator would: a policy file letting admins move servers across cells.
    policy_file = os.path.join(data_dir, "policy.yaml")
    with open(policy_file, "w") as fh:
        fh.write(f'"{CROSS_CELL_RULE}": "rule:context_is_admin"\n')
    policy_opts.set_defaults(CONF, policy_file=policy_file)
    aio.start()
    ensure_heartbeats(aio)  # the scheduler's ComputeFilter needs live services
    client = ComputeClient(aio.compute_api_app, microversion="2.79")
    client.expect("POST", "/flavors", {"flavor": {"name": "r2", "ram": 1024, "vcpus": 1,
                                                  "disk": 1, "id": "r2"}})
    return aio, client


def set_cell_enabled(client, cell_name, enabled):
    services = client.expect("GET", "/os-services?binary=nova-compute")["services"]
    client.microversion, saved = "2.53", client.microversion
    try:
        for svc in services:
            if svc["host"].startswith(cell_name + "-"):
                client.expect("PUT", f"/os-services/{svc['id']}",
                              {"status": "enabled" if enabled else "disabled"})
    finally:
        client.microversion = saved


def boot(aio, client, n):
    """N servers in cell1: cell2's hosts are disabled while they boot."""
    set_cell_enabled(client, "cell2", False)
    for i in range(0, n, 50):
        count = min(50, n - i)
        client.expect("POST", "/servers", {"server": {
            "name": f"x{i}", "flavorRef": "1", "imageRef": aio.demo_image["id"],
            "networks": "none", "min_count": count, "max_count": count}})
        aio.wait_idle(600)
    set_cell_enabled(client, "cell2", True)
    return {s["id"]: "1" for s in client.list_servers()}


def other_flavor(flavor):
    return "r2" if flavor == "1" else "1"


def other_cell(cell):
    return "cell2" if cell == "cell1" else "cell1"


def cycle(aio, client, sid, flavor):
    client.expect("POST", f"/servers/{sid}/action", {"resize": {"flavorRef": flavor}})
    aio.wait_idle(600)
    client.expect("POST", f"/servers/{sid}/action", {"confirmResize": None})
    aio.wait_idle(600)


def mapped_cells(aio):
    """{instance uuid: cell name} from the instance mappings."""
    import sqlalchemy as sa
    from novella.db import api_models as am
    names = {c.id: c.name for c in aio.cells}
    with aio.api_db.session() as s:
        return {u: names.get(c) for u, c in s.execute(
            sa.select(am.InstanceMapping.instance_uuid, am.InstanceMapping.cell_id))}


def failures(aio, failed_ids):
    """{fault message: count} of the moves that were rolled back (faults of every cell)."""
    import sqlalchemy as sa
    from novella.db import cell_models as cm, cells
    out, found = collections.Counter(), set()
    for cell in aio.cells:
        with cells.cell_database(cell).session() as s:
            for sid in set(failed_ids) - found:
                row = s.scalars(sa.select(cm.InstanceFault).where(
                    cm.InstanceFault.instance_uuid == sid)
                    .order_by(cm.InstanceFault.id.desc())).first()
                if row is not None:
                    out[row.message[:120]] += 1
                    found.add(sid)
    out["(no fault recorded)"] += len(set(failed_ids) - found)
    return {k: v for k, v in out.items() if v}


def check_books(aio, client, flavors, cells):
    """{check: number of violations} over every server, migration, cell row and provider."""
    import sqlalchemy as sa
    from novella.db import cell_models as cm, cells as cells_mod
    bad = collections.Counter()
    rp_host = {mgr.rt.provider_uuid: host for host, mgr in aio.computes.items()}
    mapping = mapped_cells(aio)
    expected_usage = collections.defaultdict(collections.Counter)
    servers = client.list_servers()
    bad["servers missing from the list"] = len(set(flavors) - {s["id"] for s in servers})
    for s in servers:
        sid, host = s["id"], s["OS-EXT-SRV-ATTR:host"]
        want = FLAVORS[flavors[sid]]
        bad["server not ACTIVE or wrong flavor"] += (
            s["status"] != "ACTIVE" or s["flavor"]["ram"] != want["MEMORY_MB"])
        bad["server not mapped to its move's target cell"] += mapping.get(sid) != cells[sid]
        bad["server's host not in its cell"] += not host.startswith(cells[sid] + "-")
        allocs = aio.placement.get_allocations(sid)["allocations"]
        own = {rp_host.get(rp): a["resources"] for rp, a in allocs.items()}
        bad["server without exactly its own allocation on its host"] += own != {host: want}
        expected_usage[host].update(want)
    migrations = set()
    for cell in aio.cells:
        with cells_mod.cell_database(cell).session() as s:
            rows = s.execute(sa.select(cm.Instance.uuid, cm.Instance.hidden).where(
                cm.Instance.deleted == 0)).all()
            migrations.update(s.scalars(sa.select(cm.Migration.uuid).where(
                cm.Migration.deleted == 0)))
        bad["hidden instance copy left in a cell"] += sum(1 for _u, hidden in rows if hidden)
        bad["instance row in a cell it is not mapped to"] += sum(
            1 for u, _h in rows if mapping.get(u) != cell.name)
    bad["migration still holding an allocation"] = sum(
        1 for mig in migrations if aio.placement.get_allocations(mig)["allocations"])
    for rp, host in rp_host.items():
        _gen, usage = aio.placement.get_provider_usages(rp)
        used = {rc: v for rc, v in usage.items() if v}
        bad["provider usage != flavors of its servers"] += used != dict(expected_usage[host])
    return bad


# Inclusive CPU of the steps of one cycle (functions by qualified name).
STEPS = [
    ("Compute API requests (resize, confirmResize)", "ComputeApp.__call__"),
    ("conductor: migrate_server_across_cells", "migrate_server_across_cells"),
    ("  scheduler select_destinations", "SchedulerManager.select_destinations"),
    ("  TargetDBSetupTask", "TargetDBSetupTask.execute"),
    ("  PrepResizeAtDestTask", "PrepResizeAtDestTask.execute"),
    ("  PrepResizeAtSourceTask", "PrepResizeAtSourceTask.execute"),
    ("  FinishResizeAtDestTask", "FinishResizeAtDestTask.execute"),
    ("conductor: confirm_cross_cell_resize", "confirm_cross_cell_resize"),
    ("  ConfirmResizeTask", "ConfirmResizeTask.execute"),
    ("action events merged between cells (sync_actions)", "sync_actions"),
    ("placement client requests", "PlacementClient.request"),
]


def profile_cycles(aio, client, ids, flavors, cells):
    """One cycle per server in ``ids``: SQL statements per database, then the same
    under yappi (CPU clock, every thread): CPU by step and by library."""
    import yappi

    from bench.boot import SQLCounter
    half = max(1, len(ids) // 2)
    counter = SQLCounter()
    counter.enabled = True
    for sid in ids[:half]:
        flavors[sid] = other_flavor(flavors[sid])
        cycle(aio, client, sid, flavors[sid])
        cells[sid] = other_cell(cells[sid])
    counter.enabled = False
    print(f"\n## SQL statements per cycle ({half} cycles)")
    print("| database | statements by verb |")
    print("|---|---|")
    for db, verbs in counter.per_database(half).items():
        print(f"| {db} | {', '.join(f'{v} {n}' for v, n in verbs.items())} "
              f"(total {sum(verbs.values()):.0f}) |")

    profiled = ids[half:]
    yappi.set_clock_type("cpu")
    yappi.clear_stats()
    yappi.start(builtins=False, profile_threads=True)
    try:
        for sid in profiled:
            flavors[sid] = other_flavor(flavors[sid])
            cycle(aio, client, sid, flavors[sid])
            cells[sid] = other_cell(cells[sid])
    finally:
        yappi.stop()
    stats = list(yappi.get_func_stats())
    n = max(1, len(profiled))
    total = sum(t.ttot for t in yappi.get_thread_stats())
    print(f"\n## Profile ({len(profiled)} cycles under yappi, CPU clock, every thread; "
          f"{total / n * 1000:.0f} ms CPU per cycle with the profiler's overhead)")
    print("| step | CPU per cycle | share |")
    print("|---|---|---|")
    for label, name in STEPS:
        t = sum(f.ttot for f in stats if f.full_name.endswith(name) or f.name == name)
        print(f"| {label} | {t / n * 1000:.0f} ms | {t / total:.0%} |")
    areas = collections.Counter()
    for f in stats:
        areas[_area(f.module)] += f.tsub
    print("\n| where the CPU goes (own time) | CPU per cycle | share |")
    print("|---|---|---|")
    for area, t in areas.most_common(10):
        print(f"| {area} | {t / n * 1000:.0f} ms | {t / total:.0%} |")
    yappi.clear_stats()


def _area(module):
    """A coarse place for a profiled function: a novella package or a library."""
    if "/novella/" in module:
        parts = os.path.relpath(module, common.REPO).split(os.sep)
        return "/".join(parts[:2]) if len(parts) > 2 else parts[0]
    for lib in ("sqlalchemy", "webob", "oslo_", "jsonschema", "json", "threading",
                "concurrent", "logging", "copy", "uuid"):
        if f"/{lib}" in module:
            return lib
    return "other"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--servers", type=int, default=100)
    ap.add_argument("--hosts", type=int, default=4, help="simulated hosts per cell")
    ap.add_argument("--sample", type=int, default=30, help="single cycles timed one by one")
    ap.add_argument("--repeat", type=int, default=3, help="reference repetitions")
    ap.add_argument("--skip-reference", action="store_true")
    ap.add_argument("--profile", type=int, default=0, metavar="N",
                    help="then profile N more single cycles with yappi and print where "
                         "the CPU goes")
    args = ap.parse_args()
    logging.basicConfig(level=logging.ERROR)
    data_dir = tempfile.mkdtemp(prefix="novella-bench-cross-cell-")
    aio, client = start(data_dir, args.hosts)
    try:
        flavors = boot(aio, client, args.servers)
        ids = sorted(flavors)
        mapping = mapped_cells(aio)
        booted_in_cell1 = sum(1 for sid in ids if mapping.get(sid) == "cell1")
        cells = {sid: "cell1" for sid in ids}
        # Throughput: all resized together into cell2, then all confirmed together.
        with common.Timer() as t_all:
            resized = common.resize_all_then_confirm(aio, client, flavors, other_flavor)
        for sid in resized:
            cells[sid] = "cell2"
        failed = collections.Counter(failures(aio, set(ids) - resized))
        # One cycle at a time (back to cell1, the cell each server is not in).
        samples, cpu = [], []
        for sid in ids[:args.sample]:
            flavors[sid] = other_flavor(flavors[sid])
            c0 = time.process_time()
            try:
                with common.Timer() as t:
                    cycle(aio, client, sid, flavors[sid])
            except RuntimeError:
                failed.update(failures(aio, [sid]))
                flavors[sid] = other_flavor(flavors[sid])
                continue
            cpu.append(time.process_time() - c0)
            samples.append(t.elapsed)
            cells[sid] = other_cell(cells[sid])  # where the drain weigher must have sent it
        if args.profile:
            profile_cycles(aio, client, ids[args.sample:args.sample + args.profile],
                           flavors, cells)
        bad = check_books(aio, client, flavors, cells)
    finally:
        aio.stop()
        shutil.rmtree(data_dir, ignore_errors=True)

    ref = common.reference_or_none(["cross_cell_resize"], args.repeat, skip=args.skip_reference)
    ref_op = (ref or {}).get("cross_cell_resize", {})
    ref_cycle, ref_cpu = ref_op.get("median"), ref_op.get("cpu_median")
    s, c = common.summary(samples), common.summary(cpu)
    print(f"# Cross-cell resize + confirm, {args.servers} servers, 2 cells x {args.hosts} hosts "
          f"({common.machine_line()})")
    rows = [
        ("servers booted in cell1", f"{booted_in_cell1}/{args.servers}", "-", None),
        ("cycles/s (all servers at once, cell1 -> cell2)",
         f"{len(resized) / t_all.elapsed:.1f} ({t_all.elapsed:.1f} s)", "-", None),
        ("one cycle p50 (cell2 -> cell1)", common.fmt(s["p50"], "s"), common.fmt(ref_cycle, "s"),
         common.ratio(ref_cycle, s["p50"])),
        ("one cycle p95", common.fmt(s["p95"], "s"), "-", None),
        ("CPU, one cycle p50", common.fmt(c["p50"], "s"), common.fmt(ref_cpu, "s"),
         common.ratio(ref_cpu, c["p50"])),
        ("moves rolled back", sum(failed.values()), "-", None),
    ]
    rows += [(f"books: {check}", count, "-", None) for check, count in sorted(bad.items())]
    common.print_table("Cross-cell resize", rows)
    for message, count in failed.items():
        print(f"rolled back x{count}: {message}")
    if ref is not None and ref.get("failures"):
        print(f"reference failures: {ref['failures']}")


if __name__ == "__main__":
    main()
