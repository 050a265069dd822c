"""Drain a cell through the Infrastructure Optimization API, at several parallelisms.

The all-in-one (in process, no HTTP listeners) with two cells of ``--hosts``
simulated hosts; ``--servers`` servers (m1.tiny) booted evenly on cell1's
hosts. For each parallelism (``--parallel``, default 1, 8, 32) the whole
occupied cell is drained into the other one: a ``cell_drain`` audit (the
planner checks every server against Placement's candidates), its plan
started with ``parallel_total`` = ``parallel_per_node`` = the parallelism, and
followed to its end; the next run drains the servers back (the hosts the
previous run disabled are enabled first). Each run prints the planning time,
the plan's wall time, servers moved per second, the process CPU time per
server (every service runs in this one process), and the books check: every
server ACTIVE in the target cell with exactly its own allocation on its
host, no migration holding an allocation, no hidden copy, every provider's
usage equal to the flavors of its servers (``bench/cross_cell.py``'s check).

No reference is measured beside it: OpenStack Watcher plans from its own model
of the cluster and cannot move a server across cells, so there is no run of
the reference doing the same work to compare with.

    python3 bench/drain.py                              # 1000 servers, 2 cells x 10 hosts
    python3 bench/drain.py --servers 200 --parallel 8 32
"""
import argparse
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import cross_cell  # noqa: E402


def optimize(aio, method, path, body=None):
    import webob
    req = webob.Request.blank(path, method=method)
    req.headers["X-Auth-Token"] = "admin:admin"
    req.headers["OpenStack-API-Version"] = "infra-optim 1.5"
    if body is not None:
        req.json_body = body
        req.content_type = "application/json"
    resp = req.get_response(aio.optimize_app)
    assert resp.status_int < 300, resp.text
    return resp.json_body if resp.body else None


def boot(aio, client, n, hosts):
    """``n`` servers spread evenly over cell1's ``hosts`` hosts."""
    client.microversion, saved = "2.74", client.microversion
    try:
        per_host = [n // hosts + (1 if i < n % hosts else 0) for i in range(hosts)]
        for i, count in enumerate(per_host):
            for start in range(0, count, 50):
                k = min(50, count - start)
                client.expect("POST", "/servers", {"server": {
                    "name": f"d{i}-{start}", "flavorRef": "1", "imageRef": aio.demo_image["id"],
                    "networks": "none", "host": f"cell1-host{i + 1}",
                    "min_count": k, "max_count": k}})
                aio.wait_idle(900)
    finally:
        client.microversion = saved
    return {s["id"]: "1" for s in client.list_servers()}


def drain(aio, source, parallel):
    """(planning seconds, plan wall seconds, plan CPU seconds of this process, the plan)."""
    t0 = time.monotonic()
    audit = optimize(aio, "POST", "/v1/audits", {
        "audit_type": "ONESHOT", "strategy": "cell_drain",
        "parameters": {"source_cell": source, "parallel_total": parallel,
                       "parallel_per_node": parallel}})
    while audit["state"] in ("PENDING", "ONGOING"):
        time.sleep(0.05)
        audit = optimize(aio, "GET", f"/v1/audits/{audit['uuid']}")
    planned = time.monotonic() - t0
    if audit["state"] != "SUCCEEDED":
        raise SystemExit(f"the plan does not fit: {audit['status_message']}")
    [plan] = optimize(aio, "GET", f"/v1/action_plans?audit_uuid={audit['uuid']}")[
        "action_plans"]
    t1, cpu = time.monotonic(), time.process_time()
    optimize(aio, "POST", f"/v1/action_plans/{plan['uuid']}/start")
    while plan["state"] not in ("SUCCEEDED", "FAILED", "CANCELLED"):
        time.sleep(0.2)
        plan = optimize(aio, "GET", f"/v1/action_plans/{plan['uuid']}")
    return planned, time.monotonic() - t1, time.process_time() - cpu, plan


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--servers", type=int, default=1000)
    p.add_argument("--hosts", type=int, default=10, help="simulated hosts per cell")
    p.add_argument("--parallel", type=int, nargs="+", default=[1, 8, 32])
    p.add_argument("--copy-seconds", type=float, default=0.0,
                   help="[simulated] resize_disk_copy_seconds: each move's disk copy time "
                        "(the time parallel moves overlap)")
    p.add_argument("--keep", action="store_true", help="keep the data directory")
    args = p.parse_args(argv)
    data_dir = tempfile.mkdtemp(prefix="novella-bench-drain-")
    from novella.conf import CONF
    CONF.set_override("resize_disk_copy_seconds", args.copy_seconds, group="simulated")
    aio, client = cross_cell.start(data_dir, args.hosts)
    for name in ("instances", "cores", "ram"):
        CONF.set_override(name, -1, group="quota")
    try:
        t0 = time.monotonic()
        flavors = boot(aio, client, args.servers, args.hosts)
        print(f"{len(flavors)} servers booted on cell1's {args.hosts} hosts in "
              f"{time.monotonic() - t0:.0f} s; disk copy {args.copy_seconds} s per move",
              flush=True)
        source = "cell1"
        print("\n| parallel_total | servers | planning | drain wall time | servers/s | "
              "CPU per server | books |")
        print("|---|---|---|---|---|---|---|")
        for parallel in args.parallel:
            target = cross_cell.other_cell(source)
            cross_cell.set_cell_enabled(client, target, True)
            planned, wall, cpu, plan = drain(aio, source, parallel)
            bad = cross_cell.check_books(aio, client, flavors,
                                         {sid: target for sid in flavors})
            problems = {k: v for k, v in bad.items() if v}
            books = "exact" if not problems and plan["state"] == "SUCCEEDED" else \
                f"{plan['state']}: {problems}"
            print(f"| {parallel} | {len(flavors)} | {planned:.1f} s | {wall:.1f} s | "
                  f"{len(flavors) / wall:.1f} | {cpu / len(flavors) * 1000:.0f} ms | {books} |",
                  flush=True)
            source = target
    finally:
        aio.stop()
        if not args.keep:
            shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
