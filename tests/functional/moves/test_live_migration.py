"""Live migration inside a cell of a server with a bandwidth port and a data volume.

Two hosts, each reporting 10000 kbps each way on physnet0. At the end of a
live migration, after a failure at each step, and after an abort or a forced
completion while the memory is copied, the tests check placement
(allocations by consumer, bandwidth usage by provider), the port's bindings
and the provider its profile names, the volume's attachments and BDM, what
each host's hypervisor holds, and the migration record.
"""
import threading
import time

import pytest
import webob

from novella.compute import live_migrate
from novella.conductor import journal
from novella.conductor.manager import ConductorManager
from novella.conductor.tasks.base import TaskList
from novella.conf import CONF
from novella.context import get_admin_context
from novella.db import cells, records
from novella.virt import simulated
from tests.functional.moves.test_bandwidth import BW, NONE, TINY, _bandwidth_used, _bound, _bw, _held, _port
from tests.functional.moves.test_volumes_and_ports import _attached_on, _guest

IDLE = {rc: 0 for rc in BW}


@pytest.fixture
def cloud(make_cloud):
    return make_cloud(hosts=2, simulated={"resource_provider_bandwidths": ["physnet0:10000:10000"]})


def _server(cloud):
    """A server on a bandwidth port, with a data volume attached."""
    port = _port(cloud)
    sid = cloud.boot(networks=[{"port": port["id"]}])
    vol = cloud.aio.volume_api.create(get_admin_context(), 1, name="data")
    status, body = cloud.api("POST", f"/servers/{sid}/os-volume_attachments",
                             {"volumeAttachment": {"volumeId": vol["id"]}})
    assert status == 200, body
    cloud.aio.wait_idle()
    return sid, port, [vol["id"]]


def _live_migrate(cloud, sid, host=None, version="2.79", expect=202, token="admin:admin"):
    status, body = cloud.api("POST", f"/servers/{sid}/action",
                             {"os-migrateLive": {"host": host, "block_migration": "auto"}},
                             version=version, token=token)
    assert status == expect, body
    cloud.aio.wait_idle()
    return body


def _on(cloud, sid, port, volumes, host, other):
    """Everything of the server is on ``host`` and nothing on ``other``."""
    srv = cloud.server(sid)
    assert (srv["status"], srv["OS-EXT-SRV-ATTR:host"], srv["OS-EXT-STS:task_state"]) == (
        "ACTIVE", host, None)
    assert _held(cloud, sid) == {host: TINY, _bw(host): BW}
    assert _bandwidth_used(cloud) == {_bw(host): BW, _bw(other): IDLE}
    assert _bound(cloud, port) == (host, [_bw(host)])
    bindings = cloud.aio.network_api.list_port_bindings(get_admin_context(), port["id"])
    assert {b["host"]: b["status"] for b in bindings} == {host: "ACTIVE"}
    _attached_on(cloud, sid, volumes, host)
    assert _guest(host, sid) == (sorted(volumes), [port["id"]])
    assert simulated.driver_for(host).get_info({"uuid": sid})["state"] == 1  # running
    assert _guest(other, sid) is None
    usages = cloud.usages()
    assert usages[host]["VCPU"] == 1 and usages[other]["VCPU"] == 0


def test_live_migration_moves_everything_and_frees_the_source(cloud):
    sid, port, volumes = _server(cloud)
    src = cloud.host_of(sid)
    dest = next(h for h in cloud.aio.computes if h != src)
    _on(cloud, sid, port, volumes, src, dest)

    _live_migrate(cloud, sid)
    _on(cloud, sid, port, volumes, dest, src)
    (mig,) = cloud.migrations(sid)
    assert (mig["migration_type"], mig["status"], mig["source_compute"], mig["dest_compute"]) \
        == ("live-migration", "completed", src, dest)
    assert _held(cloud, mig["uuid"]) == NONE
    assert cloud.events(sid, "live-migration") == {
        "conductor_live_migrate_instance": "Success",
        "compute_check_can_live_migrate_destination": "Success",
        "compute_live_migration": "Success",
        "compute_post_live_migration_at_destination": "Success",
        "compute_post_live_migration_at_source": "Success"}

    # And back again, to the host named (2.30+ forms).
    _live_migrate(cloud, sid, host=src, version="2.30")
    _on(cloud, sid, port, volumes, src, dest)


@pytest.mark.parametrize("side,method", [
    ("dest", "pre_live_migration"),
    ("source", "live_migration"),
    ("dest", "post_live_migration_at_destination"),
])
def test_a_failure_at_each_step_leaves_the_server_running_on_the_source(cloud, side, method):
    sid, port, volumes = _server(cloud)
    src = cloud.host_of(sid)
    dest = next(h for h in cloud.aio.computes if h != src)
    simulated.inject_fault(src if side == "source" else dest, method, instance_uuid=sid)
    _live_migrate(cloud, sid)
    assert not simulated.pending_faults(src if side == "source" else dest)
    _on(cloud, sid, port, volumes, src, dest)
    (mig,) = cloud.migrations(sid)
    assert mig["status"] == "error"
    assert _held(cloud, mig["uuid"]) == NONE
    assert "injected fault" in cloud.fault(sid) or "Exhausted all hosts" in cloud.fault(sid)
    # The host is fine again: the next attempt goes through.
    _live_migrate(cloud, sid)
    _on(cloud, sid, port, volumes, dest, src)


def test_bad_requests_change_nothing(cloud):
    sid, port, volumes = _server(cloud)
    src = cloud.host_of(sid)
    dest = next(h for h in cloud.aio.computes if h != src)
    _live_migrate(cloud, sid, token="demo:demo", expect=404)         # another project's
    own = cloud.boot(token="demo:demo", networks="none")  # two shared networks: "auto" is 409
    _live_migrate(cloud, own, token="demo:demo", expect=403)         # admins only
    assert cloud.migrations(own) == []
    _live_migrate(cloud, sid, host=src, expect=400)                 # the source itself
    _live_migrate(cloud, sid, host="nowhere", expect=400)           # unknown host
    status, body = cloud.api("POST", f"/servers/{sid}/action",      # 2.25+ has no disk_over_commit
                             {"os-migrateLive": {"host": None, "block_migration": "auto",
                                                 "disk_over_commit": False}}, version="2.25")
    assert status == 400, body
    status, body = cloud.api("POST", f"/servers/{sid}/action",      # before 2.25 it is required
                             {"os-migrateLive": {"host": None, "block_migration": False}},
                             version="2.1")
    assert status == 400, body
    assert cloud.action(sid, {"os-stop": None})[0] == 202
    cloud.aio.wait_idle()
    body = _live_migrate(cloud, sid, expect=409)                    # not running
    assert "vm_state" in body["conflictingRequest"]["message"]
    assert cloud.migrations(sid) == []
    assert cloud.host_of(sid) == src and _guest(dest, sid) is None


# --- abort (DELETE /servers/{id}/migrations/{id}) and force complete ---------------------------

COPY_SECONDS = 60  # long enough that only an abort or a forced completion ends the copy


@pytest.fixture
def slow_cloud(make_cloud):
    """Two hosts as ``cloud``, whose live migrations copy memory for a minute."""
    return make_cloud(hosts=2, simulated={"resource_provider_bandwidths": ["physnet0:10000:10000"],
                                          "live_migration_copy_seconds": COPY_SECONDS})


def _start(cloud, sid):
    """Ask for a live migration and return at once (the move runs on)."""
    status, body = cloud.api("POST", f"/servers/{sid}/action",
                             {"os-migrateLive": {"host": None, "block_migration": "auto"}},
                             version="2.79")
    assert status == 202, body


def _in_progress(cloud, sid, status):
    """The server's live migration (GET /servers/{id}/migrations) once it is ``status``."""
    deadline = time.monotonic() + 30
    while True:
        code, body = cloud.api("GET", f"/servers/{sid}/migrations", version="2.80")
        assert code == 200, body
        found = [m for m in body["migrations"] if m["status"] == status]
        if found:
            return found[0]
        assert time.monotonic() < deadline, body
        time.sleep(0.01)


def _abort(cloud, sid, mid, version="2.24", token="admin:admin", roles=None):
    return _send(cloud, "DELETE", f"/servers/{sid}/migrations/{mid}", None, version, token,
                 roles)


def _force(cloud, sid, mid, version="2.22", token="admin:admin", roles=None,
           body=None):
    return _send(cloud, "POST", f"/servers/{sid}/migrations/{mid}/action",
                 {"force_complete": None} if body is None else body, version, token, roles)


def _send(cloud, method, path, body, version, token, roles):
    req = webob.Request.blank("/v2.1" + path, method=method)
    req.headers["X-Auth-Token"] = token
    req.headers["OpenStack-API-Version"] = f"compute {version}"
    if roles:
        req.headers["X-Roles"] = roles
    if body is not None:
        req.json_body = body
        req.content_type = "application/json"
    resp = req.get_response(cloud.aio.compute_api_app)
    return resp.status_int, (resp.json_body if resp.body else None)


def _mid_move(cloud, sid, port, src, dest, mig):
    """While the memory is copied: the migration holds the source, the instance the
    destination; the port is bound on both (the destination's binding inactive);
    the guest runs only on the source."""
    assert _held(cloud, mig["uuid"]) == {src: TINY, _bw(src): BW}
    assert _held(cloud, sid) == {dest: TINY, _bw(dest): BW}
    assert _bandwidth_used(cloud) == {_bw(src): BW, _bw(dest): BW}
    bindings = cloud.aio.network_api.list_port_bindings(get_admin_context(), port["id"])
    assert {b["host"]: b["status"] for b in bindings} == {src: "ACTIVE", dest: "INACTIVE"}
    assert _guest(dest, sid) is None and _guest(src, sid) is not None
    srv = cloud.server(sid)
    assert (srv["status"], srv["OS-EXT-STS:task_state"]) == ("MIGRATING", "migrating")


class _Held:
    """The source host's live_migration waits for ``go`` (the migration stays 'preparing')."""

    def __init__(self, compute, monkeypatch):
        self.reached, self.go = threading.Event(), threading.Event()
        real = compute.live_migration

        def held(*args, **kwargs):
            self.reached.set()
            assert self.go.wait(30)
            return real(*args, **kwargs)
        monkeypatch.setattr(compute, "live_migration", held)


def test_abort_puts_everything_back_on_the_source(slow_cloud):
    cloud = slow_cloud
    sid, port, volumes = _server(cloud)
    src = cloud.host_of(sid)
    dest = next(h for h in cloud.aio.computes if h != src)
    _start(cloud, sid)
    mig = _in_progress(cloud, sid, "running")
    _mid_move(cloud, sid, port, src, dest, mig)
    # The copy's figures, as the driver reports them while it runs.
    deadline = time.monotonic() + 30
    while (shown := _in_progress(cloud, sid, "running"))["memory_total_bytes"] is None:
        assert time.monotonic() < deadline, shown
        time.sleep(0.01)
    assert shown["memory_total_bytes"] == TINY["MEMORY_MB"] << 20
    assert shown["memory_processed_bytes"] + shown["memory_remaining_bytes"] == \
        shown["memory_total_bytes"]

    started = time.monotonic()
    status, body = _abort(cloud, sid, mig["id"])
    assert (status, body) == (202, None)
    cloud.aio.wait_idle()
    assert time.monotonic() - started < COPY_SECONDS / 2  # the copy did not run its course

    _on(cloud, sid, port, volumes, src, dest)
    (m,) = cloud.migrations(sid)
    assert (m["uuid"], m["status"]) == (mig["uuid"], "cancelled")
    assert _held(cloud, mig["uuid"]) == NONE
    assert cloud.fault(sid) == ""  # asked for: not a failure
    assert cloud.events(sid, "live_migration_cancel") == {
        "compute_live_migration_abort": "Success"}
    assert cloud.events(sid, "live-migration")["compute_live_migration"] == "Error"
    code, body = cloud.api("GET", f"/servers/{sid}/migrations", version="2.80")
    assert body["migrations"] == []

    # The next live migration is not aborted: the abort belonged to the last one.
    CONF.set_override("live_migration_copy_seconds", 0, group="simulated")
    _live_migrate(cloud, sid)
    _on(cloud, sid, port, volumes, dest, src)
    assert cloud.migrations(sid)[0]["status"] == "completed"


def test_force_complete_finishes_the_move_at_once(slow_cloud):
    cloud = slow_cloud
    sid, port, volumes = _server(cloud)
    src = cloud.host_of(sid)
    dest = next(h for h in cloud.aio.computes if h != src)
    _start(cloud, sid)
    mig = _in_progress(cloud, sid, "running")
    _mid_move(cloud, sid, port, src, dest, mig)

    started = time.monotonic()
    status, body = _force(cloud, sid, mig["id"])
    assert (status, body) == (202, None)
    cloud.aio.wait_idle()
    assert time.monotonic() - started < COPY_SECONDS / 2

    _on(cloud, sid, port, volumes, dest, src)
    (m,) = cloud.migrations(sid)
    assert (m["status"], m["source_compute"], m["dest_compute"]) == ("completed", src, dest)
    assert _held(cloud, mig["uuid"]) == NONE
    assert cloud.events(sid, "live_migration_force_complete") == {
        "compute_live_migration_force_complete": "Success"}
    assert cloud.events(sid, "live-migration")["compute_live_migration"] == "Success"


def test_abort_before_the_copy_starts_2_65(cloud, monkeypatch):
    sid, port, volumes = _server(cloud)
    src = cloud.host_of(sid)
    dest = next(h for h in cloud.aio.computes if h != src)
    held = _Held(cloud.aio.computes[src], monkeypatch)
    _start(cloud, sid)
    assert held.reached.wait(30)
    mig = _in_progress(cloud, sid, "preparing")

    status, body = _abort(cloud, sid, mig["id"], version="2.64")   # 'running' only
    assert status == 400 and "preparing" in body["badRequest"]["message"], body
    status, body = _force(cloud, sid, mig["id"])                    # never before 'running'
    assert status == 400 and "preparing" in body["badRequest"]["message"], body
    status, body = _abort(cloud, sid, mig["id"], version="2.65")
    assert (status, body) == (202, None)
    deadline = time.monotonic() + 30
    while live_migrate.steering_of(cloud.aio.computes[src], mig["uuid"]) is None:  # the cast arrived
        assert time.monotonic() < deadline
        time.sleep(0.01)
    held.go.set()
    cloud.aio.wait_idle()

    _on(cloud, sid, port, volumes, src, dest)
    (m,) = cloud.migrations(sid)
    assert m["status"] == "cancelled"
    assert _held(cloud, mig["uuid"]) == NONE
    assert cloud.fault(sid) == ""


def test_abort_and_force_complete_refused(slow_cloud):
    cloud = slow_cloud
    sid, port, volumes = _server(cloud)
    src = cloud.host_of(sid)
    dest = next(h for h in cloud.aio.computes if h != src)
    own = cloud.boot(token="demo:demo", networks="none")  # two shared networks: "auto" is 409

    # Not migrating: 409 (the task state), whatever the migration id.
    status, body = _abort(cloud, sid, 1)
    assert status == 409 and "task_state None" in body["conflictingRequest"]["message"], body
    status, body = _force(cloud, sid, 1)
    assert status == 409 and "task_state None" in body["conflictingRequest"]["message"], body
    # A cold migration of the server, over: it is no live migration to steer.
    assert cloud.action(sid, {"migrate": None})[0] == 202
    cloud.aio.wait_idle()
    assert cloud.action(sid, {"confirmResize": None})[0] == 204
    cloud.aio.wait_idle()
    (cold,) = cloud.migrations(sid)
    src, dest = dest, src

    _start(cloud, sid)
    mig = _in_progress(cloud, sid, "running")
    for version in ("2.1", "2.21"):                                 # before 2.22 / 2.24
        assert _force(cloud, sid, mig["id"], version=version)[0] == 404
    assert _abort(cloud, sid, mig["id"], version="2.23")[0] == 404
    assert _abort(cloud, "f" * 8 + "-0000-4000-8000-" + "0" * 12, mig["id"])[0] == 404
    assert _force(cloud, "f" * 8 + "-0000-4000-8000-" + "0" * 12, mig["id"])[0] == 404
    assert _abort(cloud, sid, 999999)[0] == 404                     # no such migration
    assert _abort(cloud, sid, "nope")[0] == 404
    assert _force(cloud, sid, 999999)[0] == 400                     # (400 here, as the reference)
    assert _abort(cloud, sid, mig["id"], token="demo:demo")[0] == 404   # another project's
    assert _force(cloud, sid, mig["id"], token="demo:demo")[0] == 404
    status, body = _abort(cloud, sid, cold["id"])                   # not a live migration
    assert status == 400 and "confirmed" in body["badRequest"]["message"], body
    status, body = _force(cloud, sid, cold["id"])
    assert status == 400 and "not live-migration" in body["badRequest"]["message"], body
    for bad in ({"force_complete": {}}, {"force_complete": None, "x": 1}, {"other": None}):
        assert _force(cloud, sid, mig["id"], body=bad)[0] == 400

    # A member of the server's project may not (403); a manager may, unless locked (409).
    for call in (_abort, _force):
        assert call(cloud, own, 1, token="demo:demo")[0] == 403
        assert call(cloud, own, 1, token="demo:demo", roles="manager,member,reader")[0] == 409
    records.update_instance(cells.cell_database(cloud.aio.cells[0]), own, locked=True)
    for call in (_abort, _force):
        status, body = call(cloud, own, 1, token="demo:demo", roles="manager,member,reader")
        assert status == 409 and "locked" in body["conflictingRequest"]["message"], body
    # The member's server goes: the hosts' usages below are the migrating server's alone.
    records.update_instance(cells.cell_database(cloud.aio.cells[0]), own, locked=False)
    assert cloud.api("DELETE", f"/servers/{own}")[0] == 204  # done by the wait below

    # None of that touched the move; it still runs, and is aborted at last.
    mig_now = _in_progress(cloud, sid, "running")
    assert mig_now["uuid"] == mig["uuid"]
    _mid_move(cloud, sid, port, src, dest, mig)
    assert _abort(cloud, sid, mig["id"])[0] == 202
    cloud.aio.wait_idle()
    _on(cloud, sid, port, volumes, src, dest)
    assert cloud.migrations(sid)[0]["status"] == "cancelled"
    # Over: nothing more to steer.
    assert _abort(cloud, sid, mig["id"])[0] == 409
    assert _force(cloud, sid, mig["id"])[0] == 409


def test_a_conductor_dying_right_after_an_abort_leaves_the_move_cancelled(slow_cloud,
                                                                         monkeypatch):
    """The abort stopped the copy and the conductor recorded the step's failure,
    then died before any rollback: the one that takes the move over rolls it back,
    and the migration still ends 'cancelled'."""
    cloud = slow_cloud
    sid, port, volumes = _server(cloud)
    src = cloud.host_of(sid)
    dest = next(h for h in cloud.aio.computes if h != src)
    died = threading.Event()
    real_boundary = TaskList._boundary

    def boundary(tasks, index, task, status):
        real_boundary(tasks, index, task, status)
        if (task.name, status) == ("LiveMigrate", "failed") and \
                tasks.journal is not None and tasks.journal.instance_uuid == sid:
            died.set()
            threading.Event().wait()  # this thread never runs another statement
    monkeypatch.setattr(TaskList, "_boundary", boundary)
    entry = cloud.aio.conductor.live_migrate_instance
    monkeypatch.setattr(cloud.aio.conductor, "live_migrate_instance",  # a thread of its own
                        lambda *a, **kw: threading.Thread(target=entry, args=a, kwargs=kw,
                                                          daemon=True).start())
    _start(cloud, sid)
    mig = _in_progress(cloud, sid, "running")
    assert _abort(cloud, sid, mig["id"])[0] == 202
    assert died.wait(30)
    cloud.aio.wait_idle()
    assert cloud.migrations(sid)[0]["status"] == "running"  # nothing rolled back yet

    fresh = ConductorManager(CONF, cloud.aio.api_db, cloud.aio.placement,
                             network_api=cloud.aio.network_api,
                             volume_api=cloud.aio.volume_api, image_api=cloud.aio.image_api)
    journal.expire_others(cloud.aio.api_db, fresh.owner)  # the dead one's lease ran out
    assert fresh.recover_operations()
    cloud.aio.wait_idle()
    _on(cloud, sid, port, volumes, src, dest)
    assert cloud.migrations(sid)[0]["status"] == "cancelled"
    assert _held(cloud, mig["uuid"]) == NONE
    assert cloud.fault(sid) == ""
