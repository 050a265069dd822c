"""Executing a drain: parallelism limits, a failed move retried on an alternate
or recorded with its reason, pause, resume and cancel (the source hosts enabled
again), and a plan taken over after its engine died, with no server moved twice
and the books exact."""
import collections
import json
import threading
import time

import pytest
import sqlalchemy as sa

from novella.db import cell_models as cm
from novella.db import cells as cells_mod
from novella.db import optimize_models as om
from novella.optimize.applier import Engine
from novella.virt import simulated

ENDED = {"confirmed", "completed", "error", "failed", "reverted", "cancelled", "done"}


@pytest.fixture
def slow(make_dcloud):
    """Cross-cell moves that take a while (each copies its disk for 0.2 s)."""
    cloud = make_dcloud(simulated={"resize_disk_copy_seconds": 0.2})
    cloud.allow_cross_cell()
    return cloud


def _servers(cloud, n, stopped=()):
    sids = []
    for i in range(n):
        sid = cloud.boot(f"s{i}", availability_zone=f"nova:cell1-host{1 + i % 2}")
        if i in stopped:
            status, _ = cloud.action(sid, {"os-stop": None})
            assert status == 202
        sids.append(sid)
    cloud.aio.wait_idle()
    return {sid: cloud.server(sid)["status"] for sid in sids}


def _plan(cloud, **params):
    audit = cloud.audit("cell_drain", source_cell="cell1", **params)
    assert audit["state"] == "SUCCEEDED", audit["status_message"]
    [plan] = cloud.plan_of(audit)
    return plan["uuid"]


def _moves(cloud, plan_uuid):
    return {a["input_parameters"]["resource_id"]: a for a in cloud.actions(plan_uuid)
            if a["action_type"] == "migrate"}


class InFlight(threading.Thread):
    """Samples the cells' migration records: the most moves in flight at once,
    in all and per source host."""

    def __init__(self, cloud):
        super().__init__(daemon=True)
        self.cloud, self.done = cloud, threading.Event()
        self.most, self.most_per_host = 0, 0

    def run(self):
        while not self.done.is_set():
            flying = {}
            for cell in self.cloud.aio.cells:
                with cells_mod.cell_database(cell).session() as s:
                    for uuid, status, src in s.execute(sa.select(
                            cm.Migration.uuid, cm.Migration.status,
                            cm.Migration.source_compute)):
                        if status not in ENDED:
                            flying[uuid] = src
            self.most = max(self.most, len(flying))
            per = collections.Counter(flying.values())
            self.most_per_host = max([self.most_per_host, *per.values()])
            time.sleep(0.01)

    def stop(self):
        self.done.set()
        self.join()


def _check_drained(cloud, states):
    """Each server in cell2 in its state, its allocation only there, moved once;
    no migration holds an allocation; the source hosts are disabled."""
    target_rps = {cloud.rp(h) for h in cloud.aio.computes if h.startswith("cell2-")}
    for sid, status in states.items():
        server = cloud.server(sid)
        assert server["status"] == status, sid
        assert cloud.mapped_cell(sid) == "cell2"
        assert list(cloud.instance_rows(sid)) == ["cell2"]
        assert set(cloud.allocations(sid)) <= target_rps and cloud.allocations(sid)
        migrations = cloud.migrations(sid)
        # moved once (a move undone before it began may have been asked again)
        assert [m["status"] for m in migrations if m["status"] != "error"] == ["confirmed"], \
            migrations
    assert cloud.migration_consumers() == set()
    for host in ("cell1-host1", "cell1-host2"):
        service = cloud.service(host)
        assert service.disabled and service.disabled_reason == "watcher_maintaining"
    usages = cloud.usages()
    assert all(u.get("VCPU", 0) == 0 for name, u in usages.items() if name.startswith("cell1"))


def test_drain_runs_within_its_parallelism_limits(slow):
    states = _servers(slow, 6, stopped={1, 4})
    plan_uuid = _plan(slow, parallel_total=2, parallel_per_node=1)
    sampler = InFlight(slow)
    sampler.start()
    plan = slow.start(plan_uuid)
    sampler.stop()
    assert plan["state"] == "SUCCEEDED", plan["status_message"]
    assert sampler.most == 2 and sampler.most_per_host == 1
    _check_drained(slow, states)
    assert {a["state"] for a in slow.actions(plan_uuid)} == {"SUCCEEDED"}


def test_one_move_at_a_time(slow):
    states = _servers(slow, 3)
    plan_uuid = _plan(slow, parallel_total=1)
    sampler = InFlight(slow)
    sampler.start()
    assert slow.start(plan_uuid)["state"] == "SUCCEEDED"
    sampler.stop()
    assert sampler.most == 1
    _check_drained(slow, states)


def test_a_failed_move_is_retried_on_an_alternate(dcloud):
    states = _servers(dcloud, 1)
    [sid] = states
    plan_uuid = _plan(dcloud)
    planned = _moves(dcloud, plan_uuid)[sid]["input_parameters"]["destination_node"]
    simulated.inject_fault(planned, "spawn", instance_uuid=sid)
    plan = dcloud.start(plan_uuid)
    assert plan["state"] == "SUCCEEDED", plan["status_message"]
    move = _moves(dcloud, plan_uuid)[sid]
    assert move["state"] == "SUCCEEDED"
    assert dcloud.host_of(sid) not in (planned, "cell1-host1")
    assert sorted(m["status"] for m in dcloud.migrations(sid)) == ["confirmed", "error"]
    assert dcloud.server(sid)["status"] == "ACTIVE"
    assert dcloud.migration_consumers() == set()


def test_a_move_failing_everywhere_is_recorded_and_the_plan_goes_on(dcloud):
    states = _servers(dcloud, 2)
    doomed, fine = list(states)
    plan_uuid = _plan(dcloud, parallel_total=1)
    for host in ("cell2-host1", "cell2-host2"):
        simulated.inject_fault(host, "spawn", instance_uuid=doomed, times=None)
    plan = dcloud.start(plan_uuid)
    assert plan["state"] == "FAILED"
    assert "1 of 4 actions did not succeed" in plan["status_message"]
    moves = _moves(dcloud, plan_uuid)
    assert moves[doomed]["state"] == "FAILED"
    assert moves[doomed]["status_message"].startswith("The move failed: migration ")
    assert moves[doomed]["status_message"].count("ended error") == 3
    assert moves[fine]["state"] == "SUCCEEDED"
    # The server that could not move is back where it was, its books there.
    assert dcloud.server(doomed)["status"] == "ACTIVE"
    assert dcloud.host_of(doomed) == "cell1-host1" and dcloud.mapped_cell(doomed) == "cell1"
    assert set(dcloud.allocations(doomed)) == {dcloud.rp("cell1-host1")}
    assert dcloud.host_of(fine).startswith("cell2-")
    assert dcloud.migration_consumers() == set()


def test_on_failure_stop_cancels_the_moves_not_started(dcloud):
    states = _servers(dcloud, 3)
    first = list(states)[0]
    plan_uuid = _plan(dcloud, parallel_total=1, on_failure="stop")
    order = [sid for sid in _moves(dcloud, plan_uuid)]
    first = order[0]
    for host in ("cell2-host1", "cell2-host2"):
        simulated.inject_fault(host, "spawn", instance_uuid=first, times=None)
    plan = dcloud.start(plan_uuid)
    assert plan["state"] == "FAILED" and "on_failure is stop" in plan["status_message"]
    moves = _moves(dcloud, plan_uuid)
    assert moves[first]["state"] == "FAILED"
    assert {moves[s]["state"] for s in order[1:]} == {"CANCELLED"}
    assert all(dcloud.host_of(s).startswith("cell1-") for s in states)
    assert all(dcloud.migrations(s) == [] for s in order[1:])


def _succeeded(cloud, plan_uuid):
    return sum(a["state"] == "SUCCEEDED" for a in _moves(cloud, plan_uuid).values())


def _wait(what, fn, timeout=60):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if fn():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def test_pause_resume_and_cancel(slow):
    states = _servers(slow, 5)
    plan_uuid = _plan(slow, parallel_total=1)
    slow.start(plan_uuid, wait=False)
    _wait("a first move", lambda: _succeeded(slow, plan_uuid) >= 1)

    def patch(state):
        status, body, _ = slow.optimize("PATCH", f"/v1/action_plans/{plan_uuid}", [
            {"op": "replace", "path": "/state", "value": state}])
        assert status == 200, body
    patch("SUSPENDED")
    # The move in flight ends; no other starts while the plan is suspended.
    _wait("the move in flight", lambda: not any(
        a["state"] == "ONGOING" for a in _moves(slow, plan_uuid).values()))
    paused_at = _succeeded(slow, plan_uuid)
    time.sleep(1.0)
    assert _succeeded(slow, plan_uuid) == paused_at
    assert slow.plan(plan_uuid)["state"] == "SUSPENDED"
    patch("ONGOING")
    _wait("a move after resume", lambda: _succeeded(slow, plan_uuid) > paused_at)
    patch("CANCELLING")
    plan = slow.wait_plan(plan_uuid, {"CANCELLED"})
    assert plan["state"] == "CANCELLED"
    moves = _moves(slow, plan_uuid)
    moved = {s for s, a in moves.items() if a["state"] == "SUCCEEDED"}
    assert {a["state"] for s, a in moves.items() if s not in moved} == {"CANCELLED"}
    assert 2 <= len(moved) < len(states)
    for sid, status in states.items():
        assert slow.server(sid)["status"] == status
        assert slow.mapped_cell(sid) == ("cell2" if sid in moved else "cell1")
        assert len(slow.migrations(sid)) == (1 if sid in moved else 0)
    # The hosts the plan disabled are enabled again.
    for host in ("cell1-host1", "cell1-host2"):
        assert not slow.service(host).disabled
    assert slow.migration_consumers() == set()


def test_a_host_disabled_before_the_plan_stays_disabled_on_cancel(dcloud):
    _servers(dcloud, 1)
    status, body = dcloud.api("PUT", f"/os-services/{dcloud.service('cell1-host2').uuid}",
                              {"status": "disabled", "disabled_reason": "broken fan"},
                              version="2.53")
    assert status == 200, body
    plan_uuid = _plan(dcloud)
    # Suspend before anything runs, then cancel: the disabling actions ran first.
    status, body, _ = dcloud.optimize("POST", f"/v1/action_plans/{plan_uuid}/start")
    assert status == 200
    status, body, _ = dcloud.optimize("PATCH", f"/v1/action_plans/{plan_uuid}", [
        {"op": "replace", "path": "/state", "value": "CANCELLED"}])
    if status == 400:    # already running: cancel it as a running plan
        status, body, _ = dcloud.optimize("PATCH", f"/v1/action_plans/{plan_uuid}", [
            {"op": "replace", "path": "/state", "value": "CANCELLING"}])
    assert status == 200, body
    dcloud.aio.optimize_engine.wait_idle()
    assert dcloud.plan(plan_uuid)["state"] == "CANCELLED"
    assert not dcloud.service("cell1-host1").disabled
    assert dcloud.service("cell1-host2").disabled
    assert dcloud.service("cell1-host2").disabled_reason == "broken fan"


def _as_if_the_engine_died(cloud, plan_uuid):
    """The plan's lease ran out with its owner gone."""
    with cloud.aio.api_db.session(write=True) as s:
        s.execute(sa.update(om.ActionPlan).where(om.ActionPlan.uuid == plan_uuid).values(
            state="ONGOING", hostname="dead-engine", lease_until=None))


def _record(cloud, plan_uuid, disabled=None, moved=None):
    """Write the actions as the dead engine had left them: ``disabled`` {host: progress}
    of the hosts' actions (SUCCEEDED when the progress says the change was made and
    ``done``), ``moved`` {server: progress} of a move ONGOING."""
    with cloud.aio.api_db.session(write=True) as s:
        for a in s.scalars(sa.select(om.Action).where(om.Action.action_plan_uuid == plan_uuid)):
            key = json.loads(a.input_parameters)["resource_id"]
            progress = (disabled or {}).get(key) or (moved or {}).get(key)
            if progress is None:
                continue
            a.state = "SUCCEEDED" if progress.pop("done", False) else "ONGOING"
            a.progress = json.dumps(dict(json.loads(a.progress), **progress))


def _disable(cloud, host):
    status, _ = cloud.api("PUT", f"/os-services/{cloud.service(host).uuid}",
                          {"status": "disabled", "disabled_reason": "watcher_maintaining"},
                          version="2.53")
    assert status == 200


HOSTS_DONE = {h: {"was_disabled": False, "disabled_here": True, "done": True}
              for h in ("cell1-host1", "cell1-host2")}


def _first_move_asked(cloud, moves):
    """The hosts disabled and the first server's move asked for, as the dead engine did."""
    for host in HOSTS_DONE:
        _disable(cloud, host)
    sid = list(moves)[0]
    dest = moves[sid]["input_parameters"]["destination_node"]
    status, body = cloud.action(sid, {"migrate": {"host": dest}})
    assert status == 202, body
    cloud.aio.wait_idle()
    return sid, dest


def _nothing_started(cloud, plan_uuid, moves):
    """The engine died as the plan started: nothing recorded, nothing done."""


def _host_disabled_not_recorded(cloud, plan_uuid, moves):
    """It disabled cell1-host1 (its intent recorded) and died before recording it done."""
    _disable(cloud, "cell1-host1")
    _record(cloud, plan_uuid, disabled={"cell1-host1": {"was_disabled": False,
                                                          "disabled_here": True}})


def _move_asked_not_recorded(cloud, plan_uuid, moves):
    """It asked for the first move and died before recording the migration it made."""
    sid, dest = _first_move_asked(cloud, moves)
    _record(cloud, plan_uuid, disabled=json.loads(json.dumps(HOSTS_DONE)), moved={sid: {
        "requested": True, "before": [], "attempt": 0, "host": dest, "migration": None}})


def _move_finished_not_confirmed(cloud, plan_uuid, moves):
    """The first move reached VERIFY_RESIZE, recorded; the engine died before confirming."""
    sid, dest = _first_move_asked(cloud, moves)
    [migration] = cloud.migrations(sid)
    assert migration["status"] == "finished"
    _record(cloud, plan_uuid, disabled=json.loads(json.dumps(HOSTS_DONE)), moved={sid: {
        "requested": True, "before": [], "attempt": 0, "host": dest,
        "migration": migration["uuid"]}})


def _confirm_sent(cloud, plan_uuid, moves):
    """It sent the first move's confirm (recorded as being sent) and died."""
    sid, dest = _first_move_asked(cloud, moves)
    status, body = cloud.action(sid, {"confirmResize": None})
    assert status == 204, body
    cloud.aio.wait_idle()
    [migration] = cloud.migrations(sid)
    _record(cloud, plan_uuid, disabled=json.loads(json.dumps(HOSTS_DONE)), moved={sid: {
        "requested": True, "before": [], "attempt": 0, "host": dest,
        "migration": migration["uuid"], "confirming": True}})


def _move_accepted_cast_lost(cloud, plan_uuid, moves):
    """The process died after the API accepted the first move (its migration row and
    task state written) and before the conductor began it: the cast was lost with it.
    The conductor's start-up recovery undoes the accepted move; the drain asks again."""
    from novella.conductor import rpcapi
    for host in HOSTS_DONE:
        _disable(cloud, host)
    sid = list(moves)[0]
    dest = moves[sid]["input_parameters"]["destination_node"]
    cast = rpcapi.ConductorAPI.migrate_server
    rpcapi.ConductorAPI.migrate_server = lambda *args, **kwargs: None
    try:
        status, body = cloud.action(sid, {"migrate": {"host": dest}})
    finally:
        rpcapi.ConductorAPI.migrate_server = cast
    assert status == 202, body
    [migration] = cloud.migrations(sid)
    assert migration["status"] == "pre-migrating"
    _record(cloud, plan_uuid, disabled=json.loads(json.dumps(HOSTS_DONE)), moved={sid: {
        "requested": True, "before": [], "attempt": 0, "host": dest, "migration": None}})
    assert cloud.aio.conductor.recover_operations(previous_owners=True) == [migration["uuid"]]
    assert cloud.migrations(sid)[0]["status"] == "error"
    assert cloud.server(sid)["OS-EXT-STS:task_state"] is None


def _confirm_accepted_cast_lost(cloud, plan_uuid, moves):
    """The engine asked for the first move's confirm; the process died after the API
    set the migration confirming and before the conductor began it. The conductor's
    start-up recovery runs the confirm the API accepted."""
    from novella.conductor import rpcapi
    sid, dest = _first_move_asked(cloud, moves)
    cast = rpcapi.ConductorAPI.confirm_resize
    rpcapi.ConductorAPI.confirm_resize = lambda *args, **kwargs: None
    try:
        status, body = cloud.action(sid, {"confirmResize": None})
    finally:
        rpcapi.ConductorAPI.confirm_resize = cast
    assert status == 204, body
    [migration] = cloud.migrations(sid)
    assert migration["status"] == "confirming"
    _record(cloud, plan_uuid, disabled=json.loads(json.dumps(HOSTS_DONE)), moved={sid: {
        "requested": True, "before": [], "attempt": 0, "host": dest,
        "migration": migration["uuid"], "confirming": True}})
    assert cloud.aio.conductor.recover_operations(previous_owners=True) == [migration["uuid"]]
    assert cloud.migrations(sid)[0]["status"] == "confirmed"
    assert cloud.server(sid)["status"] == "ACTIVE"


@pytest.mark.parametrize("died", [_nothing_started, _host_disabled_not_recorded,
                                  _move_asked_not_recorded, _move_accepted_cast_lost,
                                  _move_finished_not_confirmed, _confirm_sent,
                                  _confirm_accepted_cast_lost],
                         ids=lambda f: f.__name__.strip("_"))
def test_a_plan_left_by_a_dead_engine_is_finished_without_moving_twice(dcloud, died):
    """Wherever the engine died, a new engine finishes the plan from what the
    actions recorded: each server moved once, the books exact, the hosts disabled."""
    states = _servers(dcloud, 2)
    plan_uuid = _plan(dcloud)
    died(dcloud, plan_uuid, _moves(dcloud, plan_uuid))
    _as_if_the_engine_died(dcloud, plan_uuid)
    engine = Engine(dcloud.aio.optimize_engine.conf, dcloud.aio.api_db, dcloud.aio.placement,
                    dcloud.aio.compute_api_app, hostname="second-engine")
    try:
        engine.start()
        engine.wait_idle()
    finally:
        engine.stop()
    plan = dcloud.plan(plan_uuid)
    assert plan["state"] == "SUCCEEDED", plan["status_message"]
    _check_drained(dcloud, states)
    # A host the dead engine disabled is known as disabled by the plan (a cancel
    # would enable it again), not as disabled before it.
    for a in dcloud.actions(plan_uuid):
        if a["action_type"] == "change_nova_service_state":
            with dcloud.aio.api_db.session() as s:
                progress = json.loads(s.scalar(sa.select(om.Action.progress).where(
                    om.Action.uuid == a["uuid"])))
            assert progress["disabled_here"] is True and progress["was_disabled"] is False


def test_host_maintenance_live_migrates_running_servers_in_their_cell(dcloud):
    running = dcloud.boot("r", availability_zone="nova:cell1-host1")
    stopped = dcloud.boot("s", availability_zone="nova:cell1-host1")
    status, _ = dcloud.action(stopped, {"os-stop": None})
    dcloud.aio.wait_idle()
    audit = dcloud.audit("host_maintenance", maintenance_node="cell1-host1",
                         backup_node="cell1-host2")
    assert audit["state"] == "SUCCEEDED", audit["status_message"]
    [plan] = dcloud.plan_of(audit)
    assert dcloud.start(plan["uuid"])["state"] == "SUCCEEDED"
    for sid, status, kind in ((running, "ACTIVE", "live-migration"),
                              (stopped, "SHUTOFF", "migration")):
        assert dcloud.server(sid)["status"] == status
        assert dcloud.host_of(sid) == "cell1-host2" and dcloud.mapped_cell(sid) == "cell1"
        [migration] = dcloud.migrations(sid)
        assert migration["migration_type"] == kind
        assert migration["status"] in ("completed", "confirmed")
        assert set(dcloud.allocations(sid)) == {dcloud.rp("cell1-host2")}
    assert dcloud.service("cell1-host1").disabled
    assert not dcloud.service("cell1-host2").disabled
    assert dcloud.migration_consumers() == set()


def test_an_auto_triggered_audit_runs_its_plan(dcloud):
    states = _servers(dcloud, 2)
    status, audit, _ = dcloud.optimize("POST", "/v1/audits", {
        "audit_type": "ONESHOT", "strategy": "cell_drain", "auto_trigger": True,
        "parameters": {"source_cell": "cell1"}})
    assert status == 201 and audit["auto_trigger"] is True
    dcloud.aio.optimize_engine.wait_idle()
    [plan] = dcloud.plan_of(audit)
    assert plan["state"] == "SUCCEEDED", plan["status_message"]
    _check_drained(dcloud, states)
