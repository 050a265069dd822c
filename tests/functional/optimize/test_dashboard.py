"""GET /v1/fleet (novella/api/optimize/dashboard.py) against the books, without a browser:
a move across cells in flight, a host's nested providers, a cell that does not answer,
and what one answer costs in statements and Placement requests as the fleet grows.
The page itself is tested in a browser by tests/e2e/test_dashboard.py."""
import datetime
import threading
import time

import sqlalchemy as sa

from novella.db import api_models as am


def _fleet(cloud, token="admin:admin", source="placement"):
    """The fleet's answer with usage from ``source`` (the first answers of a slow
    reading of Placement come from the hosts' own reports: asked again)."""
    deadline = time.monotonic() + 30
    while True:
        status, body, _ = cloud.optimize("GET", "/v1/fleet", token=token)
        assert status == 200, body
        if source is None or body["fleet"]["usage_read"]["source"] == source:
            return body["fleet"]
        assert time.monotonic() < deadline, body["fleet"]["usage_read"]


def _hosts(fleet):
    return {h["host"]: h for cell in fleet["cells"] for h in cell["hosts"]}


def _host(cloud, fleet_host):
    """The drill-down of one host of the fleet: its servers listed, its classes in full."""
    status, body, _ = cloud.optimize("GET", f"/v1/fleet/hosts/{fleet_host['provider_uuid']}")
    assert status == 200, body
    return body["host"]


def _used(cloud, host):
    """{rc: used} of the host's provider, as Placement says."""
    return cloud.aio.placement.get_provider_usages(cloud.rp(host))[1]


def test_a_move_across_cells_in_flight_is_shown_once(make_dcloud):
    cloud = make_dcloud(hosts_per_cell=1)
    cloud.allow_cross_cell()
    sid = cloud.boot(flavor="1")
    src = cloud.host_of(sid)
    status, body = cloud.action(sid, {"resize": {"flavorRef": "2"}})
    assert status == 202, body
    cloud.aio.wait_idle()
    assert cloud.server(sid)["status"] == "VERIFY_RESIZE"
    dest = cloud.host_of(sid)
    assert cloud.cell_of_host(dest).name != cloud.cell_of_host(src).name

    fleet = _fleet(cloud)
    # both cells hold the migration's row (the source's hidden): one move in flight
    moves = [m for cell in fleet["cells"] for m in cell["migrations"]]
    (mig,) = cloud.migrations(sid)
    assert [(m["uuid"], m["instance_uuid"], m["status"], m["source_compute"],
             m["dest_compute"], m["cross_cell_move"]) for m in moves] == [
        (mig["uuid"], sid, "finished", src, dest, True)]
    assert fleet["totals"] == {"cells": 2, "hosts": 2, "servers": 1, "migrations": 1}
    hosts = _hosts(fleet)
    # the server where its visible row is; the source still holds the migration's share
    assert [s["id"] for s in _host(cloud, hosts[dest])["servers"]] == [sid]
    assert _host(cloud, hosts[dest])["servers"][0]["status"] == "VERIFY_RESIZE"
    assert _host(cloud, hosts[src])["servers"] == []
    assert (hosts[dest]["servers"], hosts[src]["servers"]) == (1, 0)   # counted
    for host in (src, dest):
        assert {rc: r["used"] for rc, r in hosts[host]["resources"].items()} == _used(cloud, host)
    assert hosts[src]["resources"]["MEMORY_MB"]["used"] == 512
    assert hosts[dest]["resources"]["MEMORY_MB"]["used"] == 2048

    status, body = cloud.action(sid, {"confirmResize": None})
    assert status == 204, body
    cloud.aio.wait_idle()
    fleet = _fleet(cloud)
    hosts = _hosts(fleet)
    assert fleet["totals"]["migrations"] == 0
    assert all(r["used"] == 0 for r in hosts[src]["resources"].values())
    assert hosts[dest]["resources"]["MEMORY_MB"]["used"] == 2048


def test_a_hosts_nested_providers_are_summed_per_resource_class(dcloud):
    placement = dcloud.aio.placement
    root = dcloud.rp("cell1-host1")
    nic = placement.create_resource_provider(name="cell1-host1:nic", parent_provider_uuid=root)
    placement.set_inventory(nic["uuid"], {"NET_BW_EGR_KILOBIT_PER_SEC": {
        "total": 10000, "reserved": 1000, "allocation_ratio": 2.0}})
    consumer = "9d4c4b0e-2f7e-4a51-8f0c-3c1e8d9b7a01"
    placement.put_allocations(consumer, {nic["uuid"]: {"NET_BW_EGR_KILOBIT_PER_SEC": 300},
                                         root: {"VCPU": 2}}, "proj", "user")
    hosts = _hosts(_fleet(dcloud))
    assert _host(dcloud, hosts["cell1-host1"])["resources"]["NET_BW_EGR_KILOBIT_PER_SEC"] == {
        "total": 10000, "reserved": 1000, "allocation_ratio": 2.0, "capacity": 18000,
        "used": 300}
    assert hosts["cell1-host1"]["resources"]["VCPU"]["used"] == 2
    # the child is no host of its own
    assert "cell1-host1:nic" not in {h["hypervisor_hostname"] for h in hosts.values()}
    assert len(hosts) == 4

    placement.delete_allocations(consumer)   # no generation moves: usages are read anew
    hosts = _hosts(_fleet(dcloud))
    assert hosts["cell1-host1"]["resources"]["NET_BW_EGR_KILOBIT_PER_SEC"]["used"] == 0
    assert hosts["cell1-host1"]["resources"]["VCPU"]["used"] == 0


def _set_connection(api_db, cell_name, url):
    with api_db.session(write=True) as s:
        s.execute(sa.update(am.CellMapping).where(am.CellMapping.name == cell_name).values(
            database_connection=url,
            updated_at=datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)))


def test_a_cell_that_does_not_answer_is_named_and_the_others_shown(dcloud, tmp_path):
    sid = dcloud.boot(host="cell1-host1")
    cell2 = next(c for c in dcloud.aio.cells if c.name == "cell2")
    good = cell2.database_connection
    _set_connection(dcloud.aio.api_db, "cell2", f"sqlite:///{tmp_path}/no/such/dir/cell2.db")
    try:
        fleet = _fleet(dcloud)
    finally:
        _set_connection(dcloud.aio.api_db, "cell2", good)
    cells = {c["name"]: c for c in fleet["cells"]}
    assert cells["cell2"]["hosts"] == [] and "did not answer" in cells["cell2"]["error"]
    assert cells["cell1"]["error"] is None
    assert [s["id"] for s in _host(dcloud, _hosts(fleet)["cell1-host1"])["servers"]] == [sid]
    assert len(_fleet(dcloud)["cells"][1]["hosts"]) == 2   # answers again


def test_one_answer_costs_the_same_statements_whatever_the_hosts(make_dcloud, monkeypatch):
    cloud = make_dcloud(hosts_per_cell=1)
    for i in range(3):
        cloud.boot(f"vm{i}")
    statements, requests = [], []

    def count(conn, cursor, statement, *args):
        statements.append(statement)
    from novella.db import cells as cells_mod
    engines = set()

    def listen():
        for cell in cloud.aio.cells:
            engine = cells_mod.cell_database(cell).engine
            if engine not in engines:
                sa.event.listen(engine, "before_cursor_execute", count)
                engines.add(engine)
    placement = cloud.aio.placement
    real_request = placement.request

    def request(method, path, **kw):
        requests.append((method, path.rsplit("/", 1)[-1] if path.count("/") > 1 else path))
        return real_request(method, path, **kw)
    monkeypatch.setattr(placement, "request", request)

    def answer():
        listen()
        statements.clear()
        requests.clear()
        _fleet(cloud)
        return len(statements), sorted(requests)

    _fleet(cloud)   # the first reading of Placement done: each answer below waits for its own
    small = answer()
    # providers unchanged since: their inventories are not read again
    again = answer()
    assert again[0] == small[0]
    assert again[1] == sorted([("GET", "/resource_providers")] + [("GET", "usages")] * 2)
    for i in range(3):
        cloud.aio.add_compute(f"cell{1 + i % 2}-extra{i}")
    for i in range(4):
        cloud.boot(f"more{i}")
    grown = answer()
    # the new providers' inventories are read (and those whose allocations moved)
    assert ("GET", "inventories") in grown[1]
    large = answer()
    # three statements a cell, two cells, whatever their hosts and servers
    assert small[0] == grown[0] == large[0] == 6
    # one listing and each provider's usages
    assert large[1] == sorted([("GET", "/resource_providers")] + [("GET", "usages")] * 5)
    for engine in engines:
        sa.event.remove(engine, "before_cursor_execute", count)


def test_plans_are_named_by_source_and_target_with_their_times(dcloud):
    dcloud.allow_cross_cell()
    for i in range(2):
        dcloud.boot(f"d{i}", availability_zone=f"nova:cell1-host{1 + i}")
    dcloud.aio.wait_idle()
    audit = dcloud.audit("cell_drain", source_cell="cell1", target_cells=["cell2"])
    assert audit["state"] == "SUCCEEDED", audit["status_message"]
    [plan] = dcloud.plan_of(audit)
    (shown,) = _fleet(dcloud)["plans"]
    # not started: named, no times
    assert shown == {"uuid": plan["uuid"], "state": "RECOMMENDED", "audit_name": audit["name"],
                     "name": "drain cell1 -> cell2", "started_at": None, "elapsed_s": None,
                     "remaining_s": None}
    before = datetime.datetime.now(datetime.timezone.utc)
    assert dcloud.start(plan["uuid"])["state"] == "SUCCEEDED"
    after = datetime.datetime.now(datetime.timezone.utc)
    (shown,) = _fleet(dcloud)["plans"]
    started = datetime.datetime.fromisoformat(shown["started_at"])
    assert before - datetime.timedelta(seconds=1) <= started <= after
    # ended: elapsed is from the first action's start to the plan's end, nothing remains
    assert 0 <= shown["elapsed_s"] <= (after - before).total_seconds() + 1
    assert shown["state"] == "SUCCEEDED" and shown["remaining_s"] is None


def test_a_running_plans_remaining_time_is_at_the_pace_of_the_moves_done(dcloud):
    """A plan ONGOING for 60 s with 3 of its 4 actions ended: about 20 s remain."""
    from novella.db import optimize_models as om
    now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    with dcloud.aio.api_db.session(write=True) as s:
        s.add(om.Audit(uuid="a0000000-0000-4000-8000-000000000001", name="drain-az",
                       audit_type="ONESHOT", state="SUCCEEDED", goal="hardware_maintenance",
                       strategy="cell_drain", scope="[]", context="{}",
                       parameters='{"source_zone": "az1", "target_zones": ["az2", "az3"]}'))
        s.add(om.ActionPlan(uuid="b0000000-0000-4000-8000-000000000001",
                            audit_uuid="a0000000-0000-4000-8000-000000000001",
                            strategy="cell_drain", state="ONGOING", efficacy_indicators="[]",
                            global_efficacy="[]", parameters="{}", context="{}"))
        for i, state in enumerate(["SUCCEEDED", "FAILED", "SUCCEEDED", "PENDING"]):
            s.add(om.Action(uuid=f"c0000000-0000-4000-8000-00000000000{i}",
                            action_plan_uuid="b0000000-0000-4000-8000-000000000001",
                            position=i, action_type="migrate", state=state,
                            input_parameters="{}", parents="[]", progress="{}",
                            updated_at=now - datetime.timedelta(seconds=60 - 10 * i)))
    (shown,) = _fleet(dcloud)["plans"]
    assert shown["name"] == "drain az1 -> az2, az3" and shown["state"] == "ONGOING"
    assert 60 <= shown["elapsed_s"] < 70
    assert shown["remaining_s"] == round(shown["elapsed_s"] / 3, 1)


def test_failed_audits_are_shown_with_their_reasons(dcloud):
    for i in range(2):
        dcloud.boot(f"d{i}", availability_zone=f"nova:cell1-host{1 + i}")
    dcloud.aio.wait_idle()
    for host in ("cell2-host1", "cell2-host2"):   # nowhere to go
        status, body = dcloud.api("PUT", f"/os-services/{dcloud.service(host).uuid}",
                                  {"status": "disabled", "disabled_reason": "racked out"})
        assert status == 200, body
    audit = dcloud.audit("cell_drain", source_cell="cell1", target_cells=["cell2"])
    assert audit["state"] == "FAILED" and audit["status_message"]
    fleet = _fleet(dcloud)
    assert [(a["uuid"], a["name"], a["plan_name"], a["reason"]) for a in fleet["failed_audits"]] \
        == [(audit["uuid"], audit["name"], "drain cell1 -> cell2", audit["status_message"])]
    assert fleet["plans"] == []
    # the disabled hosts carry their reason in the fleet's answer, not only in a drill-down
    hosts = _hosts(fleet)
    assert {h: (hosts[h]["status"], hosts[h]["disabled_reason"])
            for h in ("cell2-host1", "cell2-host2")} == {
        h: ("disabled", "racked out") for h in ("cell2-host1", "cell2-host2")}


def test_a_host_shows_only_the_classes_it_has_and_its_use(dcloud):
    placement = dcloud.aio.placement
    root = dcloud.rp("cell1-host1")
    nic = placement.create_resource_provider(name="cell1-host1:nic", parent_provider_uuid=root)
    # all of it reserved: no capacity and no use, so no row
    placement.set_inventory(nic["uuid"], {"NET_BW_IGR_KILOBIT_PER_SEC": {
        "total": 1000, "reserved": 1000}})
    sid = dcloud.boot("one", availability_zone="nova:cell1-host1")
    dcloud.aio.wait_idle()
    host = _hosts(_fleet(dcloud))["cell1-host1"]
    assert "NET_BW_IGR_KILOBIT_PER_SEC" not in host["resources"]
    assert set(host["resources"]) == {"VCPU", "MEMORY_MB", "DISK_GB"}
    assert all(set(r) == {"used", "capacity"} for r in host["resources"].values())
    assert host["use"] == round(max(r["used"] / r["capacity"]
                                    for r in host["resources"].values()), 3) > 0
    assert host["servers"] == 1
    assert [s["id"] for s in _host(dcloud, host)["servers"]] == [sid]


def test_while_placement_is_first_read_the_hosts_own_reports_answer(make_dcloud, monkeypatch):
    """A large fleet's first reading of Placement takes long: the answers given meanwhile
    show each host's standard classes as its compute node row reports them, and say
    so; once the reading ends, Placement's figures."""
    cloud = make_dcloud(hosts_per_cell=1)
    sid = cloud.boot("one", availability_zone="nova:cell1-host1")
    cloud.aio.wait_idle()
    placement, release = cloud.aio.placement, threading.Event()
    real_usages = placement.get_provider_usages

    def slow_usages(uuid, *args, **kw):
        release.wait(30)
        return real_usages(uuid, *args, **kw)
    monkeypatch.setattr(placement, "get_provider_usages", slow_usages)
    try:
        fleet = _fleet(cloud, source=None)
        assert fleet["usage_read"] == {"at": None, "seconds": None, "source": "hosts"}
        host = _hosts(fleet)["cell1-host1"]
        flavor = cloud.api("GET", f"/servers/{sid}")[1]["server"]["flavor"]
        assert host["resources"]["VCPU"]["used"] == flavor["vcpus"]
        assert host["resources"]["MEMORY_MB"]["used"] == flavor["ram"]
        assert set(host["resources"]) == {"VCPU", "MEMORY_MB", "DISK_GB"}
        assert host["servers"] == 1
        drill = _host(cloud, host)
        assert [s["id"] for s in drill["servers"]] == [sid]
        assert drill["resources"]["VCPU"]["used"] == flavor["vcpus"]
    finally:
        release.set()
    host = _hosts(_fleet(cloud))["cell1-host1"]
    assert host["resources"]["VCPU"]["used"] == _used(cloud, "cell1-host1")["VCPU"]
