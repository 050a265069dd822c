"""SQL statements per boot and per resize+confirm on two source trees, side by side.

Each tree runs in its own processes (``PYTHONPATH`` and working directory set
to it), one all-in-one per setup (1 or 10 cells, quotas unlimited or default,
no periodic tasks). Every operation is done once to fill caches, then three
times with the counters on, from the API request until every cast is handled:

- boot: POST /servers, one server with one port on a shared network (and without);
- resize+confirm: a server without ports, flavor 1 <-> a 1024 MB flavor;
- bulk, one per request: 50 POSTs as above, then one wait (``bench/boot.py``);
- bulk, 50 per request: ``min_count = max_count = 50``, no ports (``bench/scale.py``).

Counted on every database: statements sent to the driver (SQLAlchemy
``before_cursor_execute``; BEGIN and COMMIT go straight to the driver and are
not among them; Connection executes are as many), ORM executes (``Session``
``do_orm_execute``) and transactions begun. Bulk figures are per server.

    git worktree add --detach /tmp/then 94dd796   # the code before the scale work
    python3 bench/statements_then_and_now.py /tmp/then .
"""
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading

OPS, BULK = 3, 50
SETUPS = [(1, "unlimited"), (10, "unlimited"), (1, "default"), (10, "default")]


def child(cells, quotas):
    import sqlalchemy as sa
    from sqlalchemy import orm
    from sqlalchemy.engine import Engine
    from bench.boot import ComputeClient  # the measured tree's, as novella's
    from novella.allinone import AllInOne
    from novella.context import get_admin_context

    counts, lock, on = collections.Counter(), threading.Lock(), [False]

    def count(kind, db=None):
        if on[0]:
            with lock:
                counts[kind] += 1
                if db:
                    counts["db:" + db] += 1

    def statement(conn, _cursor, sql, *_):
        if sql.lstrip().upper().startswith("BEGIN"):
            return count("begin_statement")
        db = os.path.basename(str(conn.engine.url.database or "memory")).rsplit(".", 1)[0]
        count("statements", "cell" if db.startswith("cell") and db != "cell0" else db)

    sa.event.listen(Engine, "before_cursor_execute", statement)
    sa.event.listen(Engine, "begin", lambda *a: count("transactions"))
    sa.event.listen(orm.Session, "do_orm_execute", lambda *a: count("orm_executes"))

    overrides = {None: {"service_down_time": 86400}}  # no heartbeats run here
    if quotas == "unlimited":
        overrides["quota"] = {"instances": -1, "cores": -1, "ram": -1}
    data_dir = tempfile.mkdtemp(prefix="statements-")
    aio = AllInOne(data_dir, cells=cells, hosts_per_cell=2,
                   log=None, config_overrides=overrides).start()

    api = ComputeClient(aio.compute_api_app, microversion="2.79").expect

    def server(name, networks, **extra):
        body = {"name": name, "imageRef": aio.demo_image["id"], "flavorRef": "1",
                "networks": networks, **extra}
        return api("POST", "/servers", {"server": body})

    def status(sid):
        return api("GET", f"/servers/{sid}")["server"]["status"]

    def measure(op, per=1, cleanup=None):
        """op() once to warm up, then OPS times counted; per-operation means."""
        totals = collections.Counter()
        for i in range(OPS + 1):
            counts.clear()
            on[0] = i > 0
            made = op()
            aio.wait_idle()
            on[0] = False
            totals.update(counts)
            for sid in made or []:
                assert status(sid) == "ACTIVE", sid
                if cleanup:
                    api("DELETE", f"/servers/{sid}")
            aio.wait_idle()
        return {k: v / OPS / per for k, v in sorted(totals.items())}

    net = aio.network_api.create_network(get_admin_context(), name="bench",
                                         cidr="10.128.0.0/16", shared=True)
    port_net = [{"uuid": net["id"]}]
    out = {"boot": measure(lambda: [server("b", port_net)["server"]["id"]], cleanup=True),
           "boot, no port": measure(lambda: [server("n", "none")["server"]["id"]],
                                    cleanup=True)}
    if quotas == "unlimited":
        api("POST", "/flavors", {"flavor": {"name": "r2", "ram": 1024, "vcpus": 1,
                                            "disk": 1, "id": "r2"}})
        sid = server("rz", "none")["server"]["id"]
        aio.wait_idle()
        flavor = ["1"]

        def resize_confirm():
            flavor[0] = "r2" if flavor[0] == "1" else "1"
            api("POST", f"/servers/{sid}/action", {"resize": {"flavorRef": flavor[0]}})
            aio.wait_idle()
            counting, on[0] = on[0], False  # the check is no part of the operation
            assert status(sid) == "VERIFY_RESIZE", status(sid)
            on[0] = counting
            api("POST", f"/servers/{sid}/action", {"confirmResize": None})
        out["resize+confirm"] = measure(resize_confirm)
        out["bulk, 1 per request"] = measure(
            lambda: [server(f"p{i}", port_net)["server"]["id"] for i in range(BULK)],
            per=BULK, cleanup=True)

        def bulk_min_count():
            before = {s["id"] for s in api("GET", "/servers?limit=1000")["servers"]}
            server("m", "none", min_count=BULK, max_count=BULK)
            aio.wait_idle()
            made = [s["id"] for s in api("GET", "/servers?limit=1000")["servers"]
                    if s["id"] not in before]
            assert len(made) == BULK, len(made)
            return made
        out[f"bulk, {BULK} per request"] = measure(bulk_min_count, per=BULK, cleanup=True)
    aio.stop()
    shutil.rmtree(data_dir, ignore_errors=True)
    print("RESULT " + json.dumps(out))


def run_tree(tree, cells, quotas):
    env = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", str(cells),
                           quotas], cwd=tree, env=env, capture_output=True, text=True)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode or not lines:
        print(f"{tree} {cells} cells {quotas}: failed\n{proc.stderr[-3000:]}", file=sys.stderr)
        return {}
    return json.loads(lines[-1][7:])


def main(old, new):
    rows = []
    for cells, quotas in SETUPS:
        results = [run_tree(t, cells, quotas) for t in (old, new)]
        for op in results[0].keys() | results[1].keys():
            a, b = (r.get(op, {}) for r in results)
            for key in sorted(a.keys() | b.keys()):
                x, y = a.get(key), b.get(key)
                ratio = f"{y / x:.2f}" if x and y is not None else "-"
                old_new = ["-" if v is None else f"{v:.1f}" for v in (x, y)]
                rows.append((op, f"{cells} cell{'s' * (cells > 1)}, quotas {quotas}", key,
                             *old_new, ratio))
    rows.sort(key=lambda r: (r[0], r[1], r[2] != "statements", r[2]))
    head = ("operation", "setup", "counter", "old", "new", "new/old")
    widths = [max(len(str(r[i])) for r in rows + [head]) for i in range(6)]
    for r in [head] + rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(int(sys.argv[2]), sys.argv[3])
    elif len(sys.argv) == 3:
        main(*sys.argv[1:])
    else:
        sys.exit(__doc__)
