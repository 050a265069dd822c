"""Every conductor operation by name, and how a fresh conductor finishes one.

An operation's name (its ``kind`` in the journal) gives its state class, its
task list, the conductor's action event, and which way recovery takes it
when its conductor died in the middle:

    build, migrate,                 back: every step that started is undone, newest
    migrate-cross-cell,               first (the in-flight one too: each undo copes with
    live-migrate, evacuate,           a step that did nothing or half), so the server is
    unshelve                          where it began, with a fault (a build: in cell0,
                                      ERROR, as when no host is found); except once a
                                      step of no return completed (or, in flight,
                                      ``settled()`` says it did), from where it goes
                                      forward
    confirm, revert (in a cell      forward: the steps not done are run (each is safe to
    or across cells)                  run again), so the server ends confirmed or reverted

A crash while undoing carries on undoing; a crash after the last step only
records the end. A request no conductor began (its cast lost) is settled the
same way by the conductor that claims it (ConductorManager.recover_operations),
as if its conductor had died in its first step. The journal
(novella/conductor/journal.py) says which steps started, completed or were
undone, and holds the state they shared.
"""
import collections
import logging

from novella.compute.states import migration_status as ms
from novella.conductor.journal import Journal
from novella.conductor.tasks import build as build_tasks
from novella.conductor.tasks import common
from novella.conductor.tasks import cross_cell as cross_cell_tasks
from novella.conductor.tasks import evacuate as evacuate_tasks
from novella.conductor.tasks import live_migrate as live_migrate_tasks
from novella.conductor.tasks import resize as resize_tasks
from novella.conductor.tasks import shelve as shelve_tasks
from novella.conductor.tasks.base import TaskList
from novella.context import RequestContext
from novella.db import migration_records
from novella.db import records

LOG = logging.getLogger(__name__)

BACK, FORWARD = "back", "forward"

Operation = collections.namedtuple("Operation", "state tasks event recovery")

OPERATIONS = {
    "build": Operation(build_tasks.Build, build_tasks.build_tasks, None, BACK),
    "migrate": Operation(common.Move, resize_tasks.resize_tasks,
                         resize_tasks.CONDUCTOR_EVENT, BACK),
    "migrate-cross-cell": Operation(common.Move, cross_cell_tasks.migrate_tasks,
                                    resize_tasks.CONDUCTOR_EVENT, BACK),
    "live-migrate": Operation(common.Move, live_migrate_tasks.live_migrate_tasks,
                              live_migrate_tasks.CONDUCTOR_EVENT, BACK),
    "evacuate": Operation(common.Move, evacuate_tasks.evacuate_tasks,
                          evacuate_tasks.CONDUCTOR_EVENT, BACK),
    "unshelve": Operation(shelve_tasks.Unshelve, shelve_tasks.unshelve_tasks,
                          shelve_tasks.CONDUCTOR_EVENT, BACK),
    "confirm": Operation(common.Resized, resize_tasks.confirm_tasks, None, FORWARD),
    "confirm-cross-cell": Operation(common.Resized, cross_cell_tasks.confirm_tasks, None,
                                    FORWARD),
    "revert": Operation(common.Resized, resize_tasks.revert_tasks, None, FORWARD),
    "revert-cross-cell": Operation(common.Resized, cross_cell_tasks.revert_tasks, None,
                                   FORWARD),
}


class ConductorDied(Exception):
    """Why a recovered operation was undone: the conductor running it died."""

    def __init__(self, operation):
        self.message = (f"The conductor running {operation['kind']} of server "
                        f"{operation['instance_uuid']} stopped; the operation was undone.")
        super().__init__(self.message)


def recover(conductor, operation, exc=None):
    """Finish ``operation`` (a journal row its dead owner left) forward or back;
    ``exc``: why it is undone, if it goes back (default: its conductor died)."""
    kind = OPERATIONS[operation["kind"]]
    ctxt = RequestContext.from_dict(operation["context"])
    state = kind.state.restore(conductor, ctxt, operation["state"])
    steps = operation["steps"]
    tasks = TaskList(f"recover {operation['kind']} {operation['instance_uuid']}",
                     kind.tasks(state),
                     journal=Journal(conductor.api_db, conductor.owner, conductor.lease,
                                     operation["kind"], operation["instance_uuid"], ctxt, state,
                                     operation_uuid=operation["uuid"], steps=steps),
                     forward=kind.recovery == FORWARD)
    _follow_routes(tasks, steps)
    statuses = [status for _name, status in steps]
    for index, (task, status) in enumerate(zip(tasks.tasks, statuses)):
        if status == "started" and task.no_return and task.settled():
            statuses[index] = "done"  # it acted; only its end was never recorded
            tasks.journal.step(index, task.name, "done")
    undoing = any(status in ("undoing", "undone", "failed") for status in statuses)
    past_no_return = any(task.no_return for task, status in zip(tasks.tasks, statuses)
                         if status == "done")
    forward = not undoing and (kind.recovery == FORWARD or past_no_return)
    LOG.info("recovering %s of %s %s from %s", operation["kind"], operation["instance_uuid"],
             "forward" if forward else "back", steps)
    if forward:
        start = next((i for i, status in enumerate(statuses) if status != "done"),
                     len(statuses))
        _carry_on(conductor, ctxt, kind, state, lambda: tasks.run(start=start))
    else:
        exc = exc or ConductorDied(operation)
        in_flight = [(i, task) for i, (task, status) in enumerate(zip(tasks.tasks, statuses))
                     if status in ("started", "done", "undoing")]
        _carry_on(conductor, ctxt, kind, state, lambda: _undo(tasks, in_flight, exc))


def _follow_routes(tasks, steps):
    """Rebuild the steps a route chose (such as the cross-cell ones) as the owner had them."""
    index = 0
    while index < min(len(steps), len(tasks.tasks)):
        task = tasks.tasks[index]
        if getattr(task, "routes", False) and steps[index][1] in ("done", "undoing"):
            tasks.tasks[index + 1:index + 1] = task.execute() or []
        index += 1


def _undo(tasks, in_flight, exc):
    tasks.undo(in_flight, exc)
    raise exc


def _carry_on(conductor, ctxt, kind, state, run):
    """Run what is left, then end the operation's action as its entry point would."""
    if kind.recovery == FORWARD:
        conductor._resized_ended(ctxt, state, run)
        return
    try:
        run()
        result = "Success"
    except Exception as exc:  # noqa: BLE001 - undone; the fault and the migration say why
        result = "Error"
        if isinstance(state, build_tasks.Build):  # the server must still show why
            conductor._bury_in_cell0(ctxt, state.instance_uuid, state.request_spec,
                                     state.build_request, exc)
        elif isinstance(state, common.Move):
            conductor.move_failed(ctxt, state, exc)
    if state.cell_db is not None:
        records.finish_open_events(state.cell_db, ctxt, state.instance_uuid, result)
    if isinstance(state, shelve_tasks.Unshelve):
        common.free_what_a_delete_left(conductor, ctxt, state.instance_uuid, None,
                                       state.places())
    if isinstance(state, common.Move):
        conductor._move_ended(ctxt, state)
        if result == "Error":
            # The migration may have had no undo to say so (it never left the status
            # the API gave it).
            migration_records.update(state.cell_db, state.migration_uuid,
                                     expected_status=(ms.PRE_MIGRATING, ms.ACCEPTED),
                                     status=ms.ERROR)
