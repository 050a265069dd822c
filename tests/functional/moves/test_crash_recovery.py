"""The conductor dies at every step boundary of every move; a fresh one finishes it.

For each operation a clean run records the step boundaries its task list
passes (so a new step gets its crash cases without anyone writing them).
Then, for each boundary — a step recorded as started but not yet acting,
and a step that acted but is not yet recorded done — a new server makes
the same move and its conductor stops there as a process death stops it:
its thread never runs another statement (no undo, no ``finally``, no
database write). A fresh conductor on the same databases takes the
operation over once the dead one's lease has run out and finishes it
forward or back. The books must then be exactly those of the server before
the move (undone) or after a clean run (finished): the server's state and
host, its cell mapping, Placement allocations by consumer (instance and
migration) and the usage of every provider, its ports' bindings (host,
status, whether the profile names an allocation, the device it names), the
devices (SR-IOV VFs) each host counts as claimed, the migration's final
status and the guest files on the simulated hosts. Deleting the server then leaves every provider at
zero.
"""
import json
import os
import threading

import pytest
import sqlalchemy as sa

from novella.conductor import journal
from novella.conductor.manager import ConductorManager
from novella.conductor.operations import FORWARD, OPERATIONS as DECLARED
from novella.conductor.rpcapi import ConductorAPI
from novella.conductor.tasks.base import TaskList
from novella.conf import CONF
from novella.context import get_admin_context
from novella.db import api_models as am
from novella.db import cells as cells_mod

FINAL_MIGRATION = {"error", "confirmed", "reverted", "completed", "finished", "done"}
# The conductor's entry points: what the API casts to.
CONDUCTOR_METHODS = tuple(name for name in vars(ConductorAPI) if not name.startswith("_"))


class Crash:
    """Where the conductor dies: ``(step index, 'started' | 'done')``, or None (a clean run),
    in the operations of ``server`` (a server's uuid, or a journal kind: 'build', any build)."""

    def __init__(self):
        self.server = None
        self.at = None
        self.boundaries = []          # what a clean run passed: (index, name, status)
        self.reached = threading.Event()
        self.threads = []

    def boundary(self, real, tasks, index, task, status):
        mine = tasks.journal is not None and self.server in (tasks.journal.instance_uuid,
                                                             tasks.journal.kind)
        if mine and self.at is None:
            self.boundaries.append((index, task.name, status))
            # What the journal saves of the state comes back equal after a recovery.
            saved = tasks.journal.state.record()
            assert json.loads(journal.encode(saved)) == saved, (tasks.name, task.name)
        dies = mine and self.at == (index, status)
        if dies and status == "done":
            self._die()              # it acted, and nothing says so
        real(tasks, index, task, status)
        if dies and status == "started":
            self._die()              # recorded as started, and then nothing

    def _die(self):
        self.at = None               # one death: the conductor that recovers lives
        self.reached.set()
        threading.Event().wait()     # this thread never runs another statement

    def detached(self, method):
        """The conductor's entry point in a thread of its own, which may die; unarmed,
        it runs in the caller's (a delete waits for the confirmation it asks for)."""
        def run(*args, **kwargs):
            if self.server is None:
                return method(*args, **kwargs)
            if self.at == "cast":
                return None          # the cast died with the process that sent it
            thread = threading.Thread(target=method, args=args, kwargs=kwargs, daemon=True)
            self.threads.append(thread)
            thread.start()
        return run

    def arm(self, server, at):
        """The next operation of ``server`` dies at ``at`` (None: it runs to its end;
        'cast': the request to the conductor is lost, nothing of it begins)."""
        self.threads, self.server, self.at = [], server, at
        self.reached.clear()

    def wait(self, cloud):
        """Until the conductor's threads since ``arm`` ended, or the armed crash came."""
        cloud.aio.wait_idle()  # the casts have handed the operations to their threads
        for thread in list(self.threads):
            while thread.is_alive() and not self.reached.is_set():
                thread.join(0.02)
        cloud.aio.wait_idle()


def arm_crashes(cloud, monkeypatch):
    """The cloud's conductor may die at a step boundary (see Crash)."""
    crash = Crash()
    real = TaskList._boundary
    monkeypatch.setattr(TaskList, "_boundary",
                        lambda tasks, index, task, status: crash.boundary(real, tasks, index,
                                                                          task, status))
    for name in CONDUCTOR_METHODS:
        monkeypatch.setattr(cloud.aio.conductor, name,
                            crash.detached(getattr(cloud.aio.conductor, name)))
    return crash


@pytest.fixture
def crashing(cloud, monkeypatch):
    return arm_crashes(cloud, monkeypatch)


def _resize(cloud, sid):
    return cloud.action(sid, {"resize": {"flavorRef": "2"}})


def _resized(cloud, crash, sid):
    assert _resize(cloud, sid)[0] == 202
    crash.wait(cloud)
    cloud.aio.wait_idle()
    assert cloud.server(sid)["status"] == "VERIFY_RESIZE"


def _shelved(cloud, crash, sid):
    assert cloud.action(sid, {"shelve": None})[0] == 202
    cloud.aio.wait_idle()
    assert cloud.server(sid)["status"] == "SHELVED_OFFLOADED"


def _host_down(cloud, crash, sid):
    _force_down(cloud, cloud.host_of(sid), True)


def _force_down(cloud, host, down):
    status, body = cloud.api("GET", f"/os-services?host={host}&binary=nova-compute",
                             version="2.53")
    assert status == 200, body
    status, body = cloud.api("PUT", f"/os-services/{body['services'][0]['id']}",
                             {"forced_down": down}, version="2.53")
    assert status == 200, body


def _hosts_back_up(cloud):
    """Every host forced down starts again (cleaning up what was evacuated from it)."""
    status, body = cloud.api("GET", "/os-services?binary=nova-compute", version="2.53")
    for service in body["services"]:
        if service["forced_down"]:
            cloud.aio.computes[service["host"]].init_host()
            _force_down(cloud, service["host"], False)


def _build(cloud, sid):
    status, body = cloud.api("POST", "/servers", {"server": {
        "name": "vm", "flavorRef": "1", "imageRef": cloud.aio.demo_image["id"],
        "networks": "auto"}})
    return status, body


# How the API is asked for each instance action it records for a declared operation:
# (what brings the server to where the request starts, the request).
REQUESTS = {
    "create": (None, _build),
    "resize": (None, _resize),
    "migrate": (None, lambda cloud, sid: cloud.action(sid, {"migrate": None})),
    "live-migration": (None, lambda cloud, sid: cloud.action(
        sid, {"os-migrateLive": {"host": None, "block_migration": "auto"}}, version="2.30")),
    "confirmResize": (_resized, lambda cloud, sid: cloud.action(sid, {"confirmResize": None})),
    "revertResize": (_resized, lambda cloud, sid: cloud.action(sid, {"revertResize": None})),
    "evacuate": (_host_down, lambda cloud, sid: cloud.action(sid, {"evacuate": {}},
                                                             version="2.79")),
    "unshelve": (_shelved, lambda cloud, sid: cloud.action(sid, {"unshelve": None})),
}


def cases(cross_cell=False, requests=REQUESTS):
    """{instance action: (prepare, request, operation)}: every declared operation
    (novella/conductor/operations.py) inside a cell (``cross_cell``: across cells),
    once for each action the API records for it (a new operation's action needs
    its request in ``requests``)."""
    return {action: requests[action] + (operation,)
            for operation in DECLARED.values()
            if operation.cross_cell == cross_cell for action in operation.actions.values()}


OPERATIONS = cases()
# The cases of a server that exists before the request (all but its build).
MOVES = sorted(name for name, case in OPERATIONS.items() if case[2].request != "build")


def books(cloud, sid, source):
    """Everything a move changes, with hosts named by role (the server's source or not)."""
    def role(host):
        return None if host is None else ("source" if host == source else "other")
    server = cloud.server(sid)
    migrations = cloud.migrations(sid)
    consumers = {"instance": sid}
    if migrations:
        consumers["migration"] = migrations[0]["uuid"]
    def label(provider):  # a host's provider (or one under it, named after it) by role
        host, _, rest = provider.partition(":")
        return role(host) + (":" + rest if rest else "")
    names = {rp["uuid"]: label(rp["name"])
             for rp in cloud.aio.placement.list_resource_providers()}
    allocations = {}
    for name, consumer in consumers.items():
        held = {names[rp]: a["resources"] for rp, a in cloud.allocations(consumer).items()}
        if held:
            allocations[name] = held
    usages = {label(provider): used for provider, used in cloud.usages().items()
              if any(used.values())}
    root = next(iter(cloud.aio.computes.values())).driver.root
    guests = {(role(host), copy) for host in cloud.aio.computes
              for copy, path in (("guest", sid), ("resize copy", sid + "_resize"))
              if os.path.exists(os.path.join(root, host, path))}
    ctxt = get_admin_context()
    network = cloud.aio.network_api
    bindings = {(role(b["host"]), b["status"], bool((b.get("profile") or {}).get("allocation")),
                 (b.get("profile") or {}).get("pci_slot"))
                for port in network.list_ports(ctxt, device_id=sid)
                for b in network.list_port_bindings(ctxt, port["id"])}
    devices = {(role(host), address) for host, compute in cloud.aio.computes.items()
               for address in compute.rt.usage()["pci"]}
    mapped = cells_mod.instance_cell(cloud.aio.api_db, sid)
    return {"status": server["status"], "task_state": server["OS-EXT-STS:task_state"],
            "bindings": bindings, "devices": devices, "cell": mapped.name if mapped else None,
            "host": role(server["OS-EXT-SRV-ATTR:host"]),
            "flavor": server["flavor"]["original_name"], "allocations": allocations,
            "usages": usages, "guests": guests,
            "migration": migrations[0]["status"] if migrations else None}


def _operation_row(cloud, sid, operation):
    with cloud.aio.api_db.read_session() as s:
        return s.scalars(sa.select(am.Operation).where(
            am.Operation.instance_uuid == sid, am.Operation.kind == operation.name)
            .order_by(am.Operation.id.desc())).first()


def _boot(cloud):
    return cloud.boot(flavor="1")


def _start(cloud, crash, operation, at=None, operations=OPERATIONS, boot=_boot):
    """A new server, brought to where ``operation`` starts; the request sent, its
    conductor armed to die at ``at``. Returns (server, its source host, books before);
    a build makes the server, which had no books before."""
    prepare, request, declared = operations[operation]
    crash.arm(None, None)
    if declared.request == "build":
        crash.arm(declared.name, at)
        status, body = request(cloud, None)
        assert status == 202, body
        return body["server"]["id"], None, None
    sid = boot(cloud)
    source = cloud.host_of(sid)
    if prepare is not None:
        prepare(cloud, crash, sid)
    before = books(cloud, sid, source)
    crash.arm(sid, at)
    status, body = request(cloud, sid)
    assert status in (200, 202, 204), body
    return sid, source, before


def _delete_and_check_empty(cloud, crash, sid):
    crash.arm(None, None)
    _hosts_back_up(cloud)
    assert cloud.api("DELETE", f"/servers/{sid}")[0] == 204
    cloud.aio.wait_idle()
    assert all(not any(used.values()) for used in cloud.usages().values()), cloud.usages()


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_a_conductor_dying_at_any_step_boundary_leaves_exact_books(cloud, crashing, operation):
    crash_at_every_boundary(cloud, crashing, operation, OPERATIONS)


@pytest.mark.parametrize("operation", MOVES)
def test_a_conductor_dying_in_a_move_of_a_server_with_a_bandwidth_port(make_cloud, monkeypatch,
                                                                       operation):
    """The same, for a server whose port asks for bandwidth: its allocation on the
    host's bandwidth provider and its binding's allocation key are in the books."""
    from tests.functional.moves import test_bandwidth as bandwidth
    cloud = make_cloud(hosts=2, simulated={"resource_provider_bandwidths":
                                           ["physnet0:10000:10000"]})
    crash_at_every_boundary(cloud, arm_crashes(cloud, monkeypatch), operation, OPERATIONS,
                            boot=lambda cloud: bandwidth._boot(cloud, bandwidth._port(cloud)))


@pytest.mark.parametrize("operation", MOVES)
def test_a_request_whose_cast_died_with_the_process_is_settled_at_start_up(cloud, crashing,
                                                                            operation):
    cast_lost(cloud, crashing, operation, OPERATIONS)


def cast_lost(cloud, crash, operation, operations, boot=_boot):
    """The process dies after the API accepted the request and before any conductor
    began it (an all-in-one's casts die with it). At the next start-up a move never
    begun is undone, and a confirm or revert the API accepted is run: the books are
    those before the request (the migration in error) or those of a clean run."""
    sid, source, _ = _start(cloud, crash, operation, operations=operations, boot=boot)
    crash.wait(cloud)
    finished = books(cloud, sid, source)
    _delete_and_check_empty(cloud, crash, sid)

    sid, source, before = _start(cloud, crash, operation, at="cast", operations=operations,
                                 boot=boot)
    cloud.aio.wait_idle()
    fresh = ConductorManager(CONF, cloud.aio.api_db, cloud.aio.placement,
                             network_api=cloud.aio.network_api, volume_api=cloud.aio.volume_api,
                             image_api=cloud.aio.image_api)
    assert fresh.recover_operations(previous_owners=True), f"{operation}: nothing recovered"
    cloud.aio.wait_idle()
    after = books(cloud, sid, source)
    declared = operations[operation][2]
    if declared.recovery == FORWARD:
        expected = finished
    elif not declared.migration_statuses:  # an unshelve: no migration, it stays shelved
        expected = before
    else:
        expected = dict(before, migration="error")
    assert after == expected, operation
    _delete_and_check_empty(cloud, crash, sid)


def crash_at_every_boundary(cloud, crash, operation, operations, boot=_boot):
    """The harness: a clean run, then a death and a recovery at each of its boundaries."""
    declared = operations[operation][2]
    # A clean run: the boundaries to crash at, and the books it ends with.
    sid, source, _ = _start(cloud, crash, operation, operations=operations, boot=boot)
    crash.wait(cloud)
    cloud.aio.wait_idle()
    finished = books(cloud, sid, source)
    assert _operation_row(cloud, sid, declared).status == "done"
    _delete_and_check_empty(cloud, crash, sid)
    points = sorted({(index, name, status) for index, name, status in crash.boundaries
                     if status in ("started", "done")})
    assert len(points) >= 2, points  # every step: started and done

    for index, name, status in points:
        sid, source, before = _start(cloud, crash, operation, at=(index, status),
                                     operations=operations, boot=boot)
        crash.wait(cloud)
        assert crash.reached.is_set(), f"{operation}: never reached {name} {status}"
        cloud.aio.wait_idle()

        fresh = ConductorManager(CONF, cloud.aio.api_db, cloud.aio.placement,
                                 network_api=cloud.aio.network_api,
                                 volume_api=cloud.aio.volume_api,
                                 image_api=cloud.aio.image_api)
        journal.expire_others(cloud.aio.api_db, fresh.owner)  # the dead one's lease ran out
        assert fresh.recover_operations(), f"{operation}: nothing to recover at {name} {status}"
        cloud.aio.wait_idle()

        row = _operation_row(cloud, sid, declared)
        assert row.status in ("done", "undone"), (operation, name, status, row.status)
        after = books(cloud, sid, source)
        expected = finished if row.status == "done" else before
        if row.status == "undone" and before is None:  # a build: in cell0, in ERROR
            expected = dict(finished, status="ERROR", host=None, allocations={}, usages={},
                            guests=set(), bindings=set(), devices=set(), cell="cell0")
        elif row.status == "undone" and before["migration"] is None and after["migration"]:
            expected = dict(before, migration="error")  # a move that was undone says so
        if row.status == "undone":
            assert cloud.fault(sid), "an undone move leaves a fault saying why"
        assert after == expected, (operation, name, status, row.status, row.steps)
        assert after["task_state"] is None
        assert after["migration"] in FINAL_MIGRATION | {None}
        _delete_and_check_empty(cloud, crash, sid)


def test_an_operation_journaled_under_its_former_name_is_recovered(cloud, crashing):
    """A resize whose row was written under its former kind ('migrate') and whose
    conductor died: a fresh conductor reads it as a resize and undoes it."""
    sid, source, before = _start(cloud, crashing, "resize", at=(1, "started"))
    crashing.wait(cloud)
    assert crashing.reached.is_set()
    cloud.aio.wait_idle()
    with cloud.aio.api_db.session(write=True) as s:
        s.execute(sa.update(am.Operation).where(am.Operation.instance_uuid == sid)
                  .values(kind="migrate"))
    fresh = ConductorManager(CONF, cloud.aio.api_db, cloud.aio.placement,
                             network_api=cloud.aio.network_api, volume_api=cloud.aio.volume_api,
                             image_api=cloud.aio.image_api)
    journal.expire_others(cloud.aio.api_db, fresh.owner)
    assert fresh.recover_operations()
    cloud.aio.wait_idle()
    with cloud.aio.api_db.read_session() as s:
        row = s.scalars(sa.select(am.Operation).where(am.Operation.instance_uuid == sid)
                        .order_by(am.Operation.id.desc())).first()
    assert (row.kind, row.status) == ("migrate", "undone")
    assert books(cloud, sid, source) == dict(before, migration="error")
    _delete_and_check_empty(cloud, crashing, sid)
