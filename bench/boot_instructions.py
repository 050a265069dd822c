#!/usr/bin/env python3
"""Instructions per boot as the fleet grows, counted by callgrind.

CPU time per boot moves with whatever else the machine is doing; the count
of instructions a boot executes does not (same code, same data, same
result to a few parts in a thousand). For each size of ``--sizes`` the
all-in-one (``--cells`` cells, the hosts split evenly, SQLite, in-process
transport, no periodic work) is started in a child process run under
``valgrind --tool=callgrind --instr-atstart=no``: start-up and three
warm-up boots run uncounted, then instrumentation is switched on
(``callgrind_control -i on``) for ``--boots`` boots, each from the POST to
the last cast handled, and off again. The parent prints instructions per
boot at each size and the growth from the smallest.

Instructions leave out the kernel's work (the SQLite writes' system calls,
thread switches), which CPU time counts: a boot's fixed cost is larger in
CPU time than in instructions, so the growth in instructions is the upper
bound of the growth in CPU time.

With ``--stages`` the child then counts, apart, the scheduler's stages of
one boot's request (the last one's spec), each run ``--boots`` times: the
candidates query as placement answers it (``placement``), decoding that
answer as the scheduler does (``decode``, the freeing of it included), the host states
(``host states``) and the filters and weighers (``filter+weigh``).

    python3 bench/boot_instructions.py                      # 100 and 10,000 hosts
    python3 bench/boot_instructions.py --sizes 100,1000,10000 --boots 24
    python3 bench/boot_instructions.py --sizes 100,1000 --stages
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))


def child(args):
    """Runs under valgrind: boots ``args.boots`` servers with instrumentation on."""
    import logging
    logging.basicConfig(level=logging.WARNING)
    from bench.boot import ComputeClient, bench_network, server_body
    from novella.allinone import AllInOne

    aio = AllInOne(tempfile.mkdtemp(prefix="novella-bench-instr-"), cells=args.cells,
                   hosts_per_cell=max(1, args.hosts // args.cells), log=None,
                   config_overrides={"quota": {"instances": -1, "cores": -1, "ram": -1}}).start()
    api = ComputeClient(aio.compute_api_app, microversion="2.79")
    net_id = bench_network(aio, "10.128.0.0/16")["id"]

    if args.stages:  # the spec of the last request scheduled, for count_stages
        import copy
        import inspect
        real = aio.scheduler.select_destinations
        signature = inspect.signature(real)

        def recording(*a, **kw):
            spec = signature.bind(*a, **kw).arguments["request_spec"]
            aio.scheduler.last_spec = copy.deepcopy(spec)
            return real(*a, **kw)
        aio.scheduler.select_destinations = recording

    def boot(i):
        server = api.expect("POST", "/servers", server_body(aio, f"i{i}", "1", net_id))["server"]
        aio.wait_idle()
        return server["id"]

    for i in range(3):  # caches filled
        api.expect("DELETE", f"/servers/{boot(i)}")
        aio.wait_idle()
    control = ["callgrind_control", "-i"]
    subprocess.run(control + ["on", str(os.getpid())], check=True, capture_output=True)
    booted = [boot(i) for i in range(args.boots)]
    subprocess.run(control + ["off", str(os.getpid())], check=True, capture_output=True)
    servers = [api.expect("GET", f"/servers/{sid}")["server"] for sid in booted]
    statuses = {s["status"] for s in servers}
    if statuses != {"ACTIVE"}:
        faults = {(s.get("fault") or {}).get("message")
                  for s in servers if s["status"] != "ACTIVE"}
        raise SystemExit(f"boots ended in {sorted(statuses)}: {sorted(map(str, faults))}")
    if args.stages:
        subprocess.run(["callgrind_control", "-d", "boots", str(os.getpid())], check=True,
                       capture_output=True)
        count_stages(aio, args.boots)
    os._exit(0)  # the count is taken; stopping the fleet is not measured


STAGES = ("placement", "decode", "host states", "filter+weigh")


def count_stages(aio, repeat):
    """Each stage of the scheduler's work for one request, counted apart
    (one callgrind dump per stage, ``repeat`` runs each)."""
    from novella.placement import client as placement_client
    sched = aio.scheduler
    spec = sched.last_spec
    sched._refresh_instance_group(spec)
    rr = sched.resource_request(spec)
    pc = sched.placement
    params = []
    for g in rr.query_groups():
        params.extend(placement_client.RequestGroup.from_dict(g).query())
    params += [("limit", str(rr.limit)), ("root_required", ",".join(rr.root_required))]

    def query():
        return pc.request("GET", "/allocation_candidates", params=params,
                          microversion=pc.microversion).content
    content = query()
    candidates = placement_client.AllocationCandidates(content, pc.microversion)
    hosts = sched._candidate_hosts(candidates, spec)
    runs = {"placement": query,
            "decode": lambda: placement_client.AllocationCandidates(content, pc.microversion),
            "host states": lambda: sched._candidate_hosts(candidates, spec),
            "filter+weigh": lambda: sched._filter_and_weigh(hosts, spec, len(candidates))}
    for name in STAGES:
        runs[name]()
        subprocess.run(["callgrind_control", "-i", "on", str(os.getpid())], check=True,
                       capture_output=True)
        for _ in range(repeat):
            runs[name]()
        subprocess.run(["callgrind_control", "-i", "off", str(os.getpid())], check=True,
                       capture_output=True)
        subprocess.run(["callgrind_control", "-d", name, str(os.getpid())], check=True,
                       capture_output=True)


def measure(args, hosts, stages):
    """Instructions per boot at ``hosts`` hosts (a child under callgrind)."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no",
               f"--callgrind-out-file={tmp}/callgrind.out", os.path.realpath(sys.executable),
               __file__, "--child", "--hosts", str(hosts), "--cells", str(args.cells),
               "--boots", str(args.boots)] + (["--stages"] if args.stages else [])
        t0 = time.perf_counter()
        run = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp)
        found = re.search(r"Collected : (\d+)", run.stderr)
        if run.returncode != 0 or not found:
            raise SystemExit(f"{hosts} hosts: child failed\n{run.stdout}\n{run.stderr[-3000:]}")
        print(f"[{hosts} hosts: {time.perf_counter() - t0:.0f} s under valgrind]",
              file=sys.stderr, flush=True)
        if not args.stages:
            return int(found.group(1)) / args.boots
        # One dump per part: the boots, then each stage (see count_stages).
        per = {}
        for path in sorted(os.listdir(tmp)):
            with open(os.path.join(tmp, path)) as f:
                text = f.read()
            trigger = re.search(r"^desc: Trigger: Client Request: dump (.*)$|"
                                r"^desc: Trigger: dump (.*)$", text, re.M)
            totals = re.search(r"^totals: (\d+)", text, re.M)
            if trigger and totals:
                per[trigger.group(1) or trigger.group(2)] = int(totals.group(1)) / args.boots
        stages[hosts] = per
        return per["boots"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100,10000", help="fleet sizes (hosts), comma-separated")
    ap.add_argument("--cells", type=int, default=10)
    ap.add_argument("--boots", type=int, default=24, help="boots counted at each size")
    ap.add_argument("--stages", action="store_true",
                    help="also count the scheduler's stages of one request apart")
    ap.add_argument("--hosts", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args)
    sizes = [int(s) for s in args.sizes.split(",")]
    stages = {}
    per_boot = {n: measure(args, n, stages) for n in sizes}
    first = per_boot[sizes[0]]
    print(f"# bench/boot_instructions.py: {args.cells} cells, {args.boots} boots per size")
    print("| hosts | instructions per boot | x (from the smallest) |")
    print("|---:|---:|---:|")
    for n in sizes:
        print(f"| {n} | {per_boot[n] / 1e6:.1f} M | {per_boot[n] / first:.2f}x |")
    if stages:
        print("\n| hosts | " + " | ".join(STAGES) + " |")
        print("|---:|" + "---:|" * len(STAGES))
        for n in sizes:
            print(f"| {n} | " + " | ".join(f"{stages[n].get(s, 0) / 1e6:.2f} M"
                                          for s in STAGES) + " |")


if __name__ == "__main__":
    main()
