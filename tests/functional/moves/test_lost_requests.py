"""A request whose cast was lost is settled by separately-run conductors, exactly once.

The API records a request (the migration row, the task state, the instance
action) and casts it to the conductors; here the cast is lost (kept aside, as
a message the broker dropped with the process that took it). Two conductors
on the same databases, not the all-in-one's (``recover_operations()`` without
``previous_owners``: none of them may assume the others dead), stand for
separately-run ``novella serve conductor`` services:

- before ``[conductor] lost_request_timeout`` has passed since the request
  was accepted, neither touches it; after, exactly one settles it: a move or
  an unshelve is refused (the books those before the request, the migration
  in error), a confirm or a revert is carried out (the books of a clean run);
- two conductors settling at once: one claims it, the other does nothing;
- the cast arriving late (it was only slow), after the settle: nothing of it
  runs and nothing changes;
- a conductor beginning the request while another settles it: exactly one
  acts, either way round, and the books are that one's.

Each case asserts the server's state, task state and host, Placement
allocations by consumer (instance and migration) and every provider's usage,
the migration's status, the guest files, the port bindings, the instance
action's events and message, and the journal's rows; deleting the server then
leaves every provider at zero.
"""
import datetime
import threading
import types

import pytest
import sqlalchemy as sa

from novella.conductor import journal
from novella.conductor import lost_requests
from novella.conductor.manager import ConductorManager
from novella.conductor.operations import FORWARD as FORWARD_RECOVERY
from novella.conductor.tasks import resize as resize_tasks
from novella.conf import CONF
from novella.db import api_models as am
from novella.db import cell_models as cm
from novella.db import cells as cells_mod
from novella.db import records
from tests.functional.moves import test_crash_recovery as harness

BOUND = 300
OPERATIONS = {name: harness.OPERATIONS[name] for name in harness.MOVES}
# The user's instance action of each request (the case's name), and the conductor's
# event in it.
ACTIONS = {name: (name, case[2].event) for name, case in OPERATIONS.items()}
# Carried out when settled; the others are refused.
FORWARD = tuple(name for name, case in OPERATIONS.items()
                if case[2].recovery == FORWARD_RECOVERY)


class Casts:
    """The all-in-one's conductor entry points; ``lose()`` makes the next cast vanish
    (kept in ``lost`` as (method name, args, kwargs), to be delivered late)."""

    def __init__(self, cloud, monkeypatch):
        self.losing = False
        self.lost = []
        for name in harness.CONDUCTOR_METHODS:
            monkeypatch.setattr(cloud.aio.conductor, name,
                                self._wrap(name, getattr(cloud.aio.conductor, name)))

    def _wrap(self, name, method):
        def cast(*args, **kwargs):
            if not self.losing:
                return method(*args, **kwargs)
            self.losing = False
            self.lost.append((name, args, kwargs))
            return None
        return cast

    def deliver(self, conductor):
        """The lost cast arrives, at ``conductor``."""
        name, args, kwargs = self.lost[-1]
        return getattr(conductor, name)(*args, **kwargs)


class Claims:
    """Conductors meeting at ``Journal.claim``: with ``meet(n)`` armed, each of the
    next ``n`` claims waits there until all ``n`` arrived (they then insert at once);
    ``hold()`` stops the next claim just after it was written, until the event it
    returns is set; ``dying = True``: the next claimer stops there for good."""

    def __init__(self, monkeypatch):
        self.barrier = None
        self.holding = None
        self.dying = False  # the next claimer dies just after its claim was written
        self.held = threading.Event()
        real = journal.Journal.claim
        claims = self

        def claim(journal_self, first_step, done=()):
            barrier = claims.barrier
            if barrier is not None:
                barrier.wait(timeout=30)
            result = real(journal_self, first_step, done)
            if claims.dying:
                claims.dying = False
                claims.held.set()
                threading.Event().wait()  # a process death: no other statement runs
            holding, claims.holding = claims.holding, None
            if holding is not None:
                claims.held.set()
                holding.wait(timeout=60)
            return result
        monkeypatch.setattr(journal.Journal, "claim", claim)

    def meet(self, n):
        self.barrier = threading.Barrier(n)

    def hold(self):
        self.holding = threading.Event()
        self.held.clear()
        return self.holding


@pytest.fixture
def lcloud(make_cloud):
    return make_cloud(hosts=2, conductor={"lost_request_timeout": BOUND})


def _conductor(cloud):
    """A conductor of its own (another ``novella serve conductor``) on the cloud's
    databases and services."""
    return ConductorManager(CONF, cloud.aio.api_db, cloud.aio.placement,
                            network_api=cloud.aio.network_api, volume_api=cloud.aio.volume_api,
                            image_api=cloud.aio.image_api)


_UNPATCHED_NOW = lost_requests._now


def _clock(monkeypatch, seconds):
    """The conductors' clock for lost requests reads ``seconds`` later than now."""
    monkeypatch.setattr(lost_requests, "_now",
                        lambda: _UNPATCHED_NOW() + datetime.timedelta(seconds=seconds))


def _settle_at_once(monkeypatch, claims, *calls):
    """Conductors racing to settle: past the bound, ``calls`` at once (met at ``claims``)."""
    _clock(monkeypatch, BOUND + 1)
    if claims is not None:
        claims.meet(len(calls))
    results = {}
    threads = [threading.Thread(target=lambda i=i, call=call: results.__setitem__(
        i, call())) for i, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    if claims is not None:
        claims.barrier = None
    return [results[i] for i in range(len(calls))]


def _action(cloud, sid, name):
    """(message, {event: result}) of the server's latest action ``name``."""
    status, body = cloud.api("GET", f"/servers/{sid}/os-instance-actions")
    assert status == 200, body
    req_id = next(a["request_id"] for a in body["instanceActions"] if a["action"] == name)
    status, body = cloud.api("GET", f"/servers/{sid}/os-instance-actions/{req_id}")
    assert status == 200, body
    action = body["instanceAction"]
    return action["message"], {e["event"]: e["result"] for e in action["events"]}


def _journal_rows(cloud, sid):
    with cloud.aio.api_db.read_session() as s:
        return [(r.uuid, r.kind, r.status, r.steps) for r in s.scalars(
            sa.select(am.Operation).where(am.Operation.instance_uuid == sid)
            .order_by(am.Operation.id))]


def _everything(cloud, sid, source, operation):
    """The books (harness.books), the request's action and the journal's rows."""
    return {"books": harness.books(cloud, sid, source),
            "action": _action(cloud, sid, ACTIONS[operation][0]),
            "journal": _journal_rows(cloud, sid)}


def _start(cloud, casts, operation, lose=True):
    """A new server brought to where ``operation`` starts, then the request, its cast
    lost (``lose``). Returns (server, source host, books before the request)."""
    prepare, request, _kind = OPERATIONS[operation]
    sid = cloud.boot(flavor="1")
    source = cloud.host_of(sid)
    if prepare is not None:
        prepare(cloud, types.SimpleNamespace(wait=lambda cloud: cloud.aio.wait_idle()), sid)
    before = harness.books(cloud, sid, source)
    casts.losing = lose
    status, body = request(cloud, sid)
    assert status in (200, 202, 204), body
    cloud.aio.wait_idle()
    assert not casts.losing, "the request was not cast"
    return sid, source, before


def _clean_run(cloud, casts, operation):
    """The books and the action's events of the request run to its end."""
    sid, source, _ = _start(cloud, casts, operation, lose=False)
    finished = harness.books(cloud, sid, source)
    events = _action(cloud, sid, ACTIONS[operation][0])
    _delete_and_check_empty(cloud, sid)
    return finished, events


def _delete_and_check_empty(cloud, sid):
    harness._hosts_back_up(cloud)
    assert cloud.api("DELETE", f"/servers/{sid}")[0] == 204
    cloud.aio.wait_idle()
    assert all(not any(used.values()) for used in cloud.usages().values()), cloud.usages()


def _migrated(operation):
    """The API records a request of ``operation`` in a migration (all but an unshelve)."""
    return bool(OPERATIONS[operation][2].migration_statuses)


def _request_id(cloud, sid, operation):
    """What settling the request returns: its migration, or the server (an unshelve)."""
    return cloud.migrations(sid)[0]["uuid"] if _migrated(operation) else sid


def _check_settled(cloud, operation, sid, source, before, finished):
    """The books of the request settled: refused (as before it, the migration in error,
    the conductor's event and the action in error, a fault saying why) or carried out
    (as a clean run, its events those of a clean run)."""
    after = harness.books(cloud, sid, source)
    message, events = _action(cloud, sid, ACTIONS[operation][0])
    if operation in FORWARD:
        assert after == finished[0], operation
        assert (message, events) == finished[1], operation
    else:
        expected = dict(before, migration="error") if _migrated(operation) else before
        assert after == expected, operation
        assert (message, events) == ("Error", {ACTIONS[operation][1]: "Error"}), operation
        assert "never begun by a conductor" in cloud.fault(sid)
    assert after["task_state"] is None
    [claim] = [row for row in _journal_rows(cloud, sid)
               if row[0] == _claim_key(cloud, sid, operation)]
    assert claim[2] == ("done" if operation in FORWARD else "undone"), claim


def _claim_key(cloud, sid, operation):
    request = OPERATIONS[operation][2].request
    if not _migrated(operation):  # an unshelve: named after its action's request id
        status, body = cloud.api("GET", f"/servers/{sid}/os-instance-actions")
        req_id = next(a["request_id"] for a in body["instanceActions"]
                      if a["action"] == operation)
        return journal.request_key(request, sid, req_id)
    return journal.request_key(request, cloud.migrations(sid)[0]["uuid"])


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_a_lost_request_is_settled_once_after_the_bound_and_a_late_cast_changes_nothing(
        lcloud, monkeypatch, operation):
    cloud = lcloud
    casts, claims = Casts(cloud, monkeypatch), Claims(monkeypatch)
    finished = _clean_run(cloud, casts, operation)

    sid, source, before = _start(cloud, casts, operation)
    pending = _everything(cloud, sid, source, operation)
    one, two = _conductor(cloud), _conductor(cloud)

    # Not yet lost: the bound has not passed (a second before it).
    _clock(monkeypatch, BOUND - 1)
    assert one.recover_operations() == [] and two.recover_operations() == []
    assert _everything(cloud, sid, source, operation) == pending

    # Past the bound: both conductors settle at once; exactly one does.
    results = _settle_at_once(monkeypatch, claims, one.recover_operations,
                              two.recover_operations)
    cloud.aio.wait_idle()
    assert sorted(results) == [[], [_request_id(cloud, sid, operation)]], results
    _check_settled(cloud, operation, sid, source, before, finished)
    settled = _everything(cloud, sid, source, operation)

    # Nothing left to settle, for either.
    assert one.recover_operations() == [] and two.recover_operations() == []
    # The cast was only slow: it arrives now, at a third conductor. Nothing changes.
    casts.deliver(_conductor(cloud))
    cloud.aio.wait_idle()
    assert _everything(cloud, sid, source, operation) == settled
    _delete_and_check_empty(cloud, sid)


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_a_settle_racing_the_conductor_that_begins_the_request(lcloud, monkeypatch,
                                                                 operation):
    """The lost cast arrives while another conductor settles the request: first
    together at the claim (either may win: the books are the winner's), then the
    beginner holding its claim while the settler looks (the settler does nothing, the
    request runs to its end)."""
    cloud = lcloud
    casts, claims = Casts(cloud, monkeypatch), Claims(monkeypatch)
    finished = _clean_run(cloud, casts, operation)
    _clock(monkeypatch, BOUND + 1)

    # Together at the claim.
    sid, source, before = _start(cloud, casts, operation)
    beginner, settler = _conductor(cloud), _conductor(cloud)
    _, settled = _settle_at_once(monkeypatch, claims, lambda: casts.deliver(beginner),
                                 settler.recover_operations)
    cloud.aio.wait_idle()
    claimed = [row for row in _journal_rows(cloud, sid)
               if row[0] == _claim_key(cloud, sid, operation)]
    assert len(claimed) == 1, claimed
    if settled:  # the settler won: the beginner did nothing
        _check_settled(cloud, operation, sid, source, before, finished)
    else:        # the beginner won: the request ran to its end
        assert harness.books(cloud, sid, source) == finished[0], operation
        assert _action(cloud, sid, ACTIONS[operation][0]) == finished[1], operation
    _delete_and_check_empty(cloud, sid)

    # The beginner has claimed and not yet acted when the settler looks.
    sid, source, before = _start(cloud, casts, operation)
    held = claims.hold()
    thread = threading.Thread(target=lambda: casts.deliver(beginner))
    thread.start()
    assert claims.held.wait(60)
    try:
        assert settler.recover_operations() == []
    finally:
        held.set()
    thread.join(120)
    cloud.aio.wait_idle()
    assert harness.books(cloud, sid, source) == finished[0], operation
    assert _action(cloud, sid, ACTIONS[operation][0]) == finished[1], operation
    _delete_and_check_empty(cloud, sid)


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_a_settler_dying_after_its_claim_is_taken_over(lcloud, monkeypatch, operation):
    """The conductor settling a lost request dies right after its claim was written:
    its claim is an operation like any other, which another conductor takes over once
    its lease has run out, and settles as the dead one would have (the fault says a
    conductor stopped; no conductor event was recorded)."""
    cloud = lcloud
    casts, claims = Casts(cloud, monkeypatch), Claims(monkeypatch)
    finished = _clean_run(cloud, casts, operation)
    _clock(monkeypatch, BOUND + 1)
    sid, source, before = _start(cloud, casts, operation)

    claims.dying = True
    threading.Thread(target=_conductor(cloud).recover_operations, daemon=True).start()
    assert claims.held.wait(60)
    fresh = _conductor(cloud)
    journal.expire_others(cloud.aio.api_db, fresh.owner)  # the dead one's lease ran out
    key = _claim_key(cloud, sid, operation)
    assert fresh.recover_operations() == [key]
    cloud.aio.wait_idle()

    after = harness.books(cloud, sid, source)
    message, events = _action(cloud, sid, ACTIONS[operation][0])
    if operation in FORWARD:
        assert after == finished[0], operation
        assert (message, events) == finished[1], operation
    else:
        expected = dict(before, migration="error") if _migrated(operation) else before
        assert after == expected, operation
        assert (message, events) == ("Error", {}), operation
        assert "stopped; the operation was undone" in cloud.fault(sid)
    [claim] = [row for row in _journal_rows(cloud, sid) if row[0] == key]
    assert claim[2] == ("done" if operation in FORWARD else "undone"), claim
    # Nothing left to settle; the cast arriving late changes nothing.
    settled = _everything(cloud, sid, source, operation)
    assert fresh.recover_operations() == []
    casts.deliver(fresh)
    cloud.aio.wait_idle()
    assert _everything(cloud, sid, source, operation) == settled
    _delete_and_check_empty(cloud, sid)


def test_a_request_whose_server_moved_on_only_ends_its_records(lcloud, monkeypatch):
    """A resize whose cast was lost, then the server's state reset by an admin (the
    usual way out of a stuck task state) and a new request accepted: settling the lost
    one ends its migration and action in error and leaves the server and the new
    request alone."""
    cloud = lcloud
    casts = Casts(cloud, monkeypatch)
    sid, source, before = _start(cloud, casts, "resize")
    [lost] = cloud.migrations(sid)
    status, body = cloud.action(sid, {"os-resetState": {"state": "active"}})
    assert status == 202, body
    casts.losing = True
    assert cloud.action(sid, {"migrate": None})[0] == 202
    cloud.aio.wait_idle()
    pending = harness.books(cloud, sid, source)
    assert pending["task_state"] == "resize_prep"

    # The clock past the bound for the lost request, not yet for the new one.
    at = _migration_created_at(cloud, sid, lost["uuid"]) + datetime.timedelta(seconds=BOUND)
    monkeypatch.setattr(lost_requests, "_now", lambda: at)
    assert _conductor(cloud).recover_operations() == [lost["uuid"]]
    statuses = {m["uuid"]: m["status"] for m in cloud.migrations(sid)}
    assert statuses.pop(lost["uuid"]) == "error"
    assert list(statuses.values()) == ["pre-migrating"]
    after = harness.books(cloud, sid, source)
    assert dict(after, migration=None) == dict(pending, migration=None)
    assert _action(cloud, sid, "resize") == ("Error", {resize_tasks.CONDUCTOR_EVENT: "Error"})

    # The new request, delivered, runs as usual.
    casts.deliver(_conductor(cloud))
    cloud.aio.wait_idle()
    assert cloud.server(sid)["status"] == "VERIFY_RESIZE"
    _delete_and_check_empty(cloud, sid)


def _migration_created_at(cloud, sid, migration_uuid):
    db = cells_mod.cell_database(cells_mod.instance_cell(cloud.aio.api_db, sid))
    with db.read_session() as s:
        return s.scalar(sa.select(cm.Migration.created_at).where(
            cm.Migration.uuid == migration_uuid))


def _create(cloud, casts, lose=True):
    casts.losing = lose
    status, body = harness._build(cloud, None)
    assert status == 202, body
    cloud.aio.wait_idle()
    assert not casts.losing, "the create was not cast"
    return body["server"]["id"]


def _build_books(cloud, sid):
    """The books of a build (no source host), its create action and journal rows."""
    books = harness.books(cloud, sid, None)
    if books["status"] == "BUILD":
        return {"books": books, "journal": _journal_rows(cloud, sid)}
    return {"books": books, "action": _action(cloud, sid, "create"),
            "journal": _journal_rows(cloud, sid)}


def _check_buried(cloud, sid):
    """A build settled as lost: in cell0, ERROR, a fault saying why, nothing held."""
    books = harness.books(cloud, sid, None)
    assert dict(books, flavor=None) == {
        "status": "ERROR", "task_state": None, "bindings": set(), "devices": set(),
        "cell": "cell0", "host": None, "flavor": None, "allocations": {}, "usages": {},
        "guests": set(), "migration": None}
    assert "never begun by a conductor" in cloud.fault(sid)
    assert _action(cloud, sid, "create") == (
        "Error", {"conductor_schedule_and_build_instances": "Error"})
    [claim] = [row for row in _journal_rows(cloud, sid)
               if row[0] == journal.request_key("build", sid)]
    assert claim[2] == "undone", claim


def test_a_lost_create_is_buried_in_cell0_once_after_the_bound(lcloud, monkeypatch):
    """A create whose cast was lost (its build request left in the API database) is
    settled as a build no host took: in cell0, ERROR, with a fault; by one of two
    conductors, after the bound only; the late cast then builds nothing."""
    cloud = lcloud
    casts, claims = Casts(cloud, monkeypatch), Claims(monkeypatch)
    sid = _create(cloud, casts)
    pending = _build_books(cloud, sid)
    assert pending["books"]["status"] == "BUILD"
    one, two = _conductor(cloud), _conductor(cloud)

    _clock(monkeypatch, BOUND - 1)
    assert one.recover_operations() == [] and two.recover_operations() == []
    assert _build_books(cloud, sid) == pending

    results = _settle_at_once(monkeypatch, claims, one.recover_operations,
                              two.recover_operations)
    cloud.aio.wait_idle()
    assert sorted(results) == [[], [sid]], results
    _check_buried(cloud, sid)
    settled = _build_books(cloud, sid)

    casts.deliver(_conductor(cloud))
    cloud.aio.wait_idle()
    assert _build_books(cloud, sid) == settled
    _delete_and_check_empty(cloud, sid)


def test_a_create_settled_while_its_conductor_begins_it(lcloud, monkeypatch):
    """The create's late cast and a settler at the claim together: the winner's books
    (buried in cell0, or ACTIVE on a host); then a beginner holding its claim while
    the settler looks: the settler does nothing and the server is built."""
    cloud = lcloud
    casts, claims = Casts(cloud, monkeypatch), Claims(monkeypatch)
    _clock(monkeypatch, BOUND + 1)
    beginner, settler = _conductor(cloud), _conductor(cloud)

    sid = _create(cloud, casts)
    _, settled = _settle_at_once(monkeypatch, claims, lambda: casts.deliver(beginner),
                                 settler.recover_operations)
    cloud.aio.wait_idle()
    if settled:
        _check_buried(cloud, sid)
    else:
        assert cloud.server(sid)["status"] == "ACTIVE"
        assert _action(cloud, sid, "create")[0] is None
    assert len([row for row in _journal_rows(cloud, sid)
                if row[0] == journal.request_key("build", sid)]) == 1
    _delete_and_check_empty(cloud, sid)

    sid = _create(cloud, casts)
    held = claims.hold()
    thread = threading.Thread(target=lambda: casts.deliver(beginner))
    thread.start()
    assert claims.held.wait(60)
    try:
        assert settler.recover_operations() == []
    finally:
        held.set()
    thread.join(120)
    cloud.aio.wait_idle()
    books = harness.books(cloud, sid, None)
    assert (books["status"], books["cell"], books["task_state"]) == ("ACTIVE", "cell1", None)
    assert set(books["allocations"]) == {"instance"}
    _delete_and_check_empty(cloud, sid)


class _Failing:
    """A module whose function ``name`` fails (the next write of the API's request)."""

    def __init__(self, module, name):
        self._module, self._name = module, name

    def __getattr__(self, attr):
        if attr == self._name:
            def fail(*args, **kwargs):
                raise RuntimeError(f"{self._name} failed")
            return fail
        return getattr(self._module, attr)


# The task state each request leaves when the API never writes its next record (the
# migration's, which it makes for a move and updates for a revert): (that write, the
# task state, the action).
STRANDED = {name: ("create" if case[2].request == "move" else "update",
                   case[2].task_states[0], name)
            for name, case in OPERATIONS.items() if case[2].may_strand}


@pytest.mark.parametrize("operation", sorted(STRANDED))
def test_a_request_the_api_never_recorded_in_full_is_cleared_once(lcloud, monkeypatch,
                                                                   operation):
    """The API set the task state and recorded the action, then its next write (the
    migration row; a revert's 'reverting') failed, as if the process died between the
    two: no cast was sent. After the bound, one of two conductors clears the task
    state (the books those before the request, the action in error, a fault); the
    server may then be asked again."""
    from novella.api.compute.handlers import migrate as migrate_handlers
    from novella.db import migration_records
    cloud = lcloud
    casts = Casts(cloud, monkeypatch)
    finished, _events = _clean_run(cloud, casts, operation)
    prepare, request, _kind = OPERATIONS[operation]
    method, task_state, action = STRANDED[operation]
    sid = cloud.boot(flavor="1")
    source = cloud.host_of(sid)
    if prepare is not None:
        prepare(cloud, types.SimpleNamespace(wait=lambda cloud: cloud.aio.wait_idle()), sid)
    before = harness.books(cloud, sid, source)
    monkeypatch.setattr(migrate_handlers, "migration_records",
                        _Failing(migration_records, method))
    status, body = request(cloud, sid)
    assert status == 500, (status, body)
    monkeypatch.setattr(migrate_handlers, "migration_records", migration_records)
    cloud.aio.wait_idle()
    stuck = harness.books(cloud, sid, source)
    assert stuck["task_state"] == task_state
    assert dict(stuck, status=None, task_state=None) == dict(before, status=None,
                                                             task_state=None)
    one, two = _conductor(cloud), _conductor(cloud)

    _clock(monkeypatch, BOUND - 1)
    assert one.recover_operations() == [] and two.recover_operations() == []
    assert harness.books(cloud, sid, source) == stuck

    results = _settle_at_once(monkeypatch, None, one.recover_operations,
                              two.recover_operations)
    assert sorted(results) == [[], [sid]], results
    assert harness.books(cloud, sid, source) == before
    assert _action(cloud, sid, action)[0] == "Error"
    assert "was not recorded in full" in cloud.fault(sid)
    assert one.recover_operations() == [] and two.recover_operations() == []

    # Asked again, it runs as usual.
    assert request(cloud, sid)[0] in (202, 204)
    cloud.aio.wait_idle()
    assert harness.books(cloud, sid, source) == finished
    _delete_and_check_empty(cloud, sid)


def test_a_delete_before_the_move_started_ends_its_migration_in_error(lcloud, monkeypatch):
    """The request's cast is not delivered yet (its migration 'pre-migrating') when the
    server is deleted: the migration ends in 'error' at once, not 'pre-migrating' for
    ever; the request delivered late finds the server gone and changes nothing."""
    cloud = lcloud
    casts = Casts(cloud, monkeypatch)
    sid, source, _before = _start(cloud, casts, "resize")
    [migration] = cloud.migrations(sid)
    assert migration["status"] == "pre-migrating"
    assert cloud.api("DELETE", f"/servers/{sid}")[0] == 204
    cloud.aio.wait_idle()
    assert cloud.api("GET", f"/servers/{sid}")[0] == 404
    assert [m["status"] for m in cloud.migrations(sid)] == ["error"]
    for consumer in (sid, migration["uuid"]):
        assert cloud.allocations(consumer) == {}
    with pytest.raises(records.InstanceNotFound):   # a cast's error: logged, nothing done
        casts.deliver(cloud.aio.conductor)
    cloud.aio.wait_idle()
    assert [m["status"] for m in cloud.migrations(sid)] == ["error"]
    for consumer in (sid, migration["uuid"]):
        assert cloud.allocations(consumer) == {}
    assert all(not any(used.values()) for used in cloud.usages().values()), cloud.usages()
