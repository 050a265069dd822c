"""Evacuation and shelve + unshelve on the all-in-one, beside the reference's timing.

One cell of ``--hosts`` hosts. For each of ``--sample`` servers, one at a time:
- evacuate: its host forced down (os-services), then from the request to the
  migration 'done' with the server ACTIVE elsewhere; the host's compute
  service then starts again (cleaning up) and is forced up, untimed;
- shelve + unshelve: from the shelve request (offloaded at once) to the
  server ACTIVE again after unshelve.
Beside them the reference's functional harness timing the same
(``evacuate``: its latest microversion evacuates to SHUTOFF; ``shelve_unshelve``).
Ends by checking the books: every server ACTIVE with one allocation on the
host it shows, no migration holding an allocation.

    python3 bench/evacuate_shelve.py                  # 30 servers each, 4 hosts
    python3 bench/evacuate_shelve.py --sample 10 --skip-reference
"""
import argparse
import logging
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import common  # noqa: E402
from bench.live_migration import check_books  # noqa: E402
from bench.resize import boot, start  # noqa: E402


def force_down(client, host, down):
    (svc,) = client.expect("GET", f"/os-services?host={host}&binary=nova-compute")["services"]
    client.expect("PUT", f"/os-services/{svc['id']}", {"forced_down": down})


def host_of(client, sid):
    return client.expect("GET", f"/servers/{sid}")["server"]["OS-EXT-SRV-ATTR:host"]


def evacuate(aio, client, sid):
    """Seconds (wall, CPU) of one evacuation; the source is back afterwards."""
    source = host_of(client, sid)
    force_down(client, source, True)
    with common.Timer() as t:
        client.expect("POST", f"/servers/{sid}/action", {"evacuate": {}})
        aio.wait_idle(600)
    if host_of(client, sid) == source:
        raise RuntimeError(f"evacuation of {sid} failed")
    aio.computes[source].init_host()  # the host's service starts again and cleans up
    force_down(client, source, False)
    return t.elapsed, t.cpu


def shelve_unshelve(aio, client, sid):
    with common.Timer() as t:
        client.expect("POST", f"/servers/{sid}/action", {"shelve": None})
        aio.wait_idle(600)
        client.expect("POST", f"/servers/{sid}/action", {"unshelve": None})
        aio.wait_idle(600)
    if client.expect("GET", f"/servers/{sid}")["server"]["status"] != "ACTIVE":
        raise RuntimeError(f"unshelve of {sid} failed")
    return t.elapsed, t.cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=4)
    ap.add_argument("--sample", type=int, default=30, help="servers timed for each operation")
    ap.add_argument("--repeat", type=int, default=3, help="reference repetitions")
    ap.add_argument("--skip-reference", action="store_true")
    args = ap.parse_args()
    logging.basicConfig(level=logging.ERROR)
    data_dir = tempfile.mkdtemp(prefix="novella-bench-evacuate-")
    aio, client = start(data_dir, args.hosts)
    client.microversion = "2.79"
    try:
        ids = sorted(boot(aio, client, 2 * args.sample))
        evacuations = [evacuate(aio, client, sid) for sid in ids[:args.sample]]
        shelves = [shelve_unshelve(aio, client, sid) for sid in ids[args.sample:]]
        bad, stuck, migrations = check_books(aio, client, "evacuation")
    finally:
        aio.stop()
        shutil.rmtree(data_dir, ignore_errors=True)

    ref = common.reference_or_none(["evacuate", "shelve_unshelve"], args.repeat,
                                   skip=args.skip_reference) or {}
    print(f"# Evacuate, shelve + unshelve, 1 cell x {args.hosts} hosts, "
          f"{args.sample} servers each ({common.machine_line()})")
    rows = []
    for label, op, samples in (("evacuate", "evacuate", evacuations),
                               ("shelve + unshelve", "shelve_unshelve", shelves)):
        wall = common.summary([w for w, _c in samples])
        cpu = common.summary([c for _w, c in samples])
        ref_wall = ref.get(op, {}).get("median")
        ref_cpu = ref.get(op, {}).get("cpu_median")
        rows += [(f"{label}, one server p50", common.fmt(wall["p50"], "s"),
                  common.fmt(ref_wall, "s"), common.ratio(ref_wall, wall["p50"])),
                 (f"{label}, one server p95", common.fmt(wall["p95"], "s"), "-", None),
                 (f"{label}, CPU p50", common.fmt(cpu["p50"], "s"), common.fmt(ref_cpu, "s"),
                  common.ratio(ref_cpu, cpu["p50"]))]
    rows += [("servers not ACTIVE or mis-booked after the run", bad, "-", None),
             (f"evacuations not completed or holding allocations (of {migrations})", stuck,
              "-", None)]
    common.print_table("Evacuate, shelve + unshelve", rows)


if __name__ == "__main__":
    main()
