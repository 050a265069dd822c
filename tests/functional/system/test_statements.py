"""SQL statements per boot and per resize+confirm, counted on every database.

The all-in-one is shaped as ``bench/scale.py`` measures it (ten cells, quotas
unlimited, a server with one port on a shared network for the boot, a server
without ports for the resize), and the statements of each operation are
counted by a SQLAlchemy ``before_cursor_execute`` listener from the request
to the last cast handled. The limits are the counts measured when they were
set (docs/benchmarks.md, "Statements per boot and per resize+confirm"): a
change that adds a statement to either operation fails here and must say why
in that page. Each operation's end state is checked too, so a count cannot
be met by doing less.
"""
import collections
import os
import threading

import pytest
import sqlalchemy as sa
import webob
from sqlalchemy.engine import Engine

from novella.allinone import AllInOne
from novella.context import get_admin_context

CELLS = 10
OPS = 3
BOOT_LIMIT = 54
RESIZE_CONFIRM_LIMIT = 82


class Counter:
    def __init__(self):
        self.on = False
        self.counts = collections.Counter()
        self.lock = threading.Lock()

    def __call__(self, conn, _cursor, _statement, _params, _context, _many):
        if not self.on:
            return
        db = os.path.basename(str(conn.engine.url.database or "memory")).rsplit(".", 1)[0]
        db = "cell" if db.startswith("cell") and db != "cell0" else db
        with self.lock:
            self.counts[db] += 1

    def per_op(self):
        return {db: n / OPS for db, n in self.counts.items()}, sum(self.counts.values()) / OPS


@pytest.fixture
def aio(tmp_path):
    aio = AllInOne(str(tmp_path / "data"), cells=CELLS, hosts_per_cell=2, log=None,
                   config_overrides={"quota": {"instances": -1, "cores": -1, "ram": -1}}).start()
    counter = Counter()
    sa.event.listen(Engine, "before_cursor_execute", counter)
    aio.counter = counter
    yield aio
    sa.event.remove(Engine, "before_cursor_execute", counter)
    aio.stop()


def _api(aio, method, path, body=None):
    req = webob.Request.blank("/v2.1" + path, method=method)
    req.headers["X-Auth-Token"] = "admin:admin"
    req.headers["OpenStack-API-Version"] = "compute 2.79"
    if body is not None:
        req.json_body = body
        req.content_type = "application/json"
    resp = req.get_response(aio.compute_api_app)
    assert resp.status_int < 300, resp.body
    return resp.json_body if resp.body else None


def _server(aio, sid):
    return _api(aio, "GET", f"/servers/{sid}")["server"]


def _memory_allocated(aio, consumer):
    allocations = aio.placement.get(f"/allocations/{consumer}")["allocations"]
    return [a["resources"].get("MEMORY_MB") for a in allocations.values()]


def test_statements_per_boot(aio):
    net = aio.network_api.create_network(get_admin_context(), name="bench",
                                         cidr="10.128.0.0/16", shared=True)

    def boot(name):
        sid = _api(aio, "POST", "/servers", {"server": {
            "name": name, "imageRef": aio.demo_image["id"], "flavorRef": "1",
            "networks": [{"uuid": net["id"]}]}})["server"]["id"]
        aio.wait_idle()
        return sid

    _api(aio, "DELETE", f"/servers/{boot('warm-up')}")  # caches filled
    aio.wait_idle()
    booted = []
    for i in range(OPS):
        aio.counter.on = True
        booted.append(boot(f"vm{i}"))
        aio.counter.on = False
    for sid in booted:
        server = _server(aio, sid)
        assert server["status"] == "ACTIVE"
        assert [a["addr"] for a in server["addresses"]["bench"]]
        assert _memory_allocated(aio, sid) == [512]
        ports = aio.network_api.list_ports(get_admin_context(), device_id=sid)
        assert [p["binding:host_id"] for p in ports] == [server["OS-EXT-SRV-ATTR:host"]]
    per_db, total = aio.counter.per_op()
    print("statements per boot", total, per_db)
    assert total <= BOOT_LIMIT, per_db


def test_statements_per_resize_and_confirm(aio):
    _api(aio, "POST", "/flavors", {"flavor": {"name": "r2", "ram": 1024, "vcpus": 1,
                                              "disk": 1, "id": "r2"}})
    sid = _api(aio, "POST", "/servers", {"server": {
        "name": "rz", "imageRef": aio.demo_image["id"], "flavorRef": "1",
        "networks": "none"}})["server"]["id"]
    aio.wait_idle()
    flavor = "1"

    def cycle():
        nonlocal flavor
        flavor = "r2" if flavor == "1" else "1"
        _api(aio, "POST", f"/servers/{sid}/action", {"resize": {"flavorRef": flavor}})
        aio.wait_idle()
        _api(aio, "POST", f"/servers/{sid}/action", {"confirmResize": None})
        aio.wait_idle()

    cycle()  # caches filled
    for _ in range(OPS):
        aio.counter.on = True
        cycle()
        aio.counter.on = False
        server = _server(aio, sid)
        assert (server["status"], server["flavor"]["original_name"]) == (
            "ACTIVE", "r2" if flavor == "r2" else "m1.tiny")
        assert _memory_allocated(aio, sid) == [1024 if flavor == "r2" else 512]
        migrations = _api(aio, "GET", f"/os-migrations?instance_uuid={sid}")["migrations"]
        assert {m["status"] for m in migrations} == {"confirmed"}
        assert all(_memory_allocated(aio, m["uuid"]) == [] for m in migrations)
    per_db, total = aio.counter.per_op()
    print("statements per resize+confirm", total, per_db)
    assert total <= RESIZE_CONFIRM_LIMIT, per_db
