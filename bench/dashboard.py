#!/usr/bin/env python3
"""The dashboard's data at fleet scale: ``GET /v1/fleet`` at 10,000 hosts.

The all-in-one (SQLite, in-process transport, ``--cells`` cells sharing
``--hosts`` simulated hosts, as bench/scale.py builds a fleet) with
``--servers`` servers booted in bulk (m1.tiny) and ``--disabled`` hosts
disabled with a reason; its optimize endpoint served on a real port of
127.0.0.1. Timed over HTTP with an administrator's token (noauth2), as the
page asks:

- the first answer (no reading of Placement yet: it waits 0.2 s
  for one, then answers from the hosts' compute node rows), and how long
  until the answers give Placement's figures (every provider's inventories
  and usages read once);
- then ``--repeats`` answers one second apart, as the page polls: the
  response time p50 and max, and the body's size;
- one host's drill-down (``/v1/fleet/hosts/{uuid}``), p50;
- how long one reading of Placement took (``usage_read``): how old, at most
  about twice that, the usage an answer shows is.

    python3 bench/dashboard.py                          # 10,000 hosts, 10 cells
    python3 bench/dashboard.py --hosts 1000 --servers 2000
"""
import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

import requests

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.boot import ComputeClient  # noqa: E402
from bench.scale import boot_bulk  # noqa: E402

HEADERS = {"X-Auth-Token": "admin", "Accept": "application/json"}


def timed_get(url):
    t0 = time.perf_counter()
    r = requests.get(url, headers=HEADERS, timeout=120)
    elapsed = time.perf_counter() - t0
    r.raise_for_status()
    return elapsed, r


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--hosts", type=int, default=10000)
    p.add_argument("--cells", type=int, default=10)
    p.add_argument("--servers", type=int, default=5000)
    p.add_argument("--disabled", type=int, default=20)
    p.add_argument("--repeats", type=int, default=10)
    args = p.parse_args(argv)
    from novella.allinone import AllInOne
    from novella.service import HTTPServer
    data_dir = tempfile.mkdtemp(prefix="novella-bench-dashboard-")
    t0 = time.monotonic()
    aio = AllInOne(data_dir, cells=args.cells, hosts_per_cell=args.hosts // args.cells, log=None,
                   config_overrides={"quota": {"instances": -1, "cores": -1, "ram": -1},
                                     "api": {"auth_strategy": "noauth2"}}).start()
    server = HTTPServer(aio.optimize_app, "127.0.0.1", 0, "optimize").start()
    try:
        print(f"{args.hosts} hosts in {args.cells} cells started in "
              f"{time.monotonic() - t0:.0f} s", flush=True)
        api = ComputeClient(aio.compute_api_app, microversion="2.53")
        t0 = time.monotonic()
        boot_bulk(aio, api, args.servers, "dash")
        services = api.expect("GET", "/os-services?binary=nova-compute")["services"]
        for svc in services[:args.disabled]:
            api.expect("PUT", f"/os-services/{svc['id']}",
                       {"status": "disabled", "disabled_reason": "bench: disk replacement"})
        print(f"{args.servers} servers booted, {args.disabled} hosts disabled in "
              f"{time.monotonic() - t0:.0f} s", flush=True)
        url = f"{server.url}/v1/fleet"
        t_first = time.monotonic()
        first, r = timed_get(url)
        fleet = r.json()["fleet"]
        hosts = [h for c in fleet["cells"] for h in c["hosts"]]
        assert len(hosts) == args.hosts, len(hosts)
        servers = fleet["totals"]["servers"]   # on a host (one that failed to build is not)
        first_source = fleet["usage_read"]["source"]
        print(f"first answer {first:.2f} s (usage from {first_source})", flush=True)
        while fleet["usage_read"]["source"] != "placement":
            time.sleep(1.0)
            fleet = timed_get(url)[1].json()["fleet"]
        print(f"Placement's figures {time.monotonic() - t_first:.1f} s after the first "
              f"request (one reading: {fleet['usage_read']['seconds']:.1f} s)", flush=True)
        times, sizes = [], []
        for _ in range(args.repeats):
            time.sleep(1.0)
            elapsed, r = timed_get(url)
            times.append(elapsed)
            sizes.append(len(r.content))
        busiest = max(hosts, key=lambda h: h["servers"])
        drill = [timed_get(f"{server.url}/v1/fleet/hosts/{busiest['provider_uuid']}")[0]
                 for _ in range(5)]
        reading = r.json()["fleet"]["usage_read"]["seconds"]
        print("\n| hosts | servers | first answer | answer p50 | answer max | body | "
              "drill-down p50 | Placement reading |")
        print("|---|---|---|---|---|---|---|---|")
        print(f"| {args.hosts} | {servers} | {first:.2f} s ({first_source}) | "
              f"{statistics.median(times):.3f} s | {max(times):.3f} s | "
              f"{statistics.median(sizes) / 1e6:.2f} MB | {statistics.median(drill):.3f} s | {reading:.1f} s |",
              flush=True)
    finally:
        server.stop()
        aio.stop()
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
