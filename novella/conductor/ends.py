"""How each kind of operation ends: one function per kind, run by its entry point
and by a fresh conductor recovering it alike (novella/conductor/operations.py).

``end(conductor, ctxt, operation, state, run, resumed=False)`` calls ``run()``
(the operation's task list, run or carried on), then records how it ended.
``resumed``: a fresh conductor carries on what a dead one began; the events
of the action the dead one left open end with it (a first run records the
conductor's event around its steps instead), and a confirm or a revert
carried on sends no notifications of its own.

    build          a failure: the server buried in cell0 (ERROR, a fault), as
                   when no host is found
    move           a failure: undone and recorded, not raised (the fault, the
                   migration in error, compute_task.*.error); either way the
                   action ends and a delete that came meanwhile has the last word
    unshelve       a failure: undone (the server stays shelved, with a fault); the
                   action ends, a delete that came meanwhile has the last word
    confirm,       a failure: the migration in error, a fault, raised; a host that
    revert         does not answer leaves it to a later turn of recovery
"""
import contextlib
import logging

from novella.compute import states
from novella.compute.states import migration_status as ms
from novella.conductor.tasks import build as build_tasks
from novella.conductor.tasks import common
from novella.conductor.tasks.base import Unfinished
from novella.db import cells as cells_mod
from novella.db import instance_copy
from novella.db import migration_records
from novella.db import records
from novella.rpc import notifications
from novella.rpc import notifier as notifier_mod

LOG = logging.getLogger(__name__)


def _run(ctxt, operation, state, run, resumed):
    """``run()`` under the operation's conductor event (resumed: the events left open
    end with it); the exception it raised (its steps undone), or None."""
    failure = None
    try:
        if operation.event is None or resumed:
            run()
        else:
            with records.action_event(state.cell_db, ctxt, state.instance_uuid, operation.event):
                run()
    except Exception as exc:  # noqa: BLE001 - undone; each kind's end records why
        failure = exc
    if resumed and state.cell_db is not None:
        records.finish_open_events(state.cell_db, ctxt, state.instance_uuid,
                                   "Error" if failure else "Success")
    return failure


def end_build(conductor, ctxt, operation, build, run, resumed=False):
    failure = _run(ctxt, operation, build, run, resumed)
    if isinstance(failure, build_tasks.BuildRequestNotFound):
        LOG.info("server %s was deleted while it was scheduled", build.instance_uuid)
    elif failure is not None:  # undone; the server must still show why
        LOG.error("build of %s failed", build.instance_uuid, exc_info=failure)
        build_failed(conductor, ctxt, build, failure)


def build_failed(conductor, ctxt, build, exc):
    """Bury a failed build (``bury_in_cell0``); a failure to do so is logged, never
    raised: the other servers of the request must still be built (their claims are
    held)."""
    try:
        bury_in_cell0(conductor, ctxt, build.instance_uuid, build.request_spec,
                      build.build_request, exc)
    except Exception:  # noqa: BLE001 - its build request stays: the server shows BUILD
        LOG.exception("could not record the failed build of %s in cell0", build.instance_uuid)


def bury_in_cell0(conductor, ctxt, instance_uuid, spec, build_request, exc):
    """A server that got no host: in cell0, ERROR, with a fault, mapped there."""
    cell0 = cells_mod.cell_by_uuid(conductor.api_db, cells_mod.CELL0_UUID)
    cell0_db = cells_mod.cell_database(cell0)
    build_tasks.create_instance(cell0_db, ctxt, instance_uuid, build_request, spec,
                                action="create", vm_state=states.ERROR, task_state=None)
    records.failed_event(cell0_db, ctxt, instance_uuid, build_tasks.CONDUCTOR_EVENT, exc,
                         finish_action=True)
    records.add_fault(cell0_db, instance_uuid, exc)
    build_tasks.map_instance(conductor.api_db, instance_uuid, cell0.id)
    if not build_tasks.delete_build_request(conductor.api_db, instance_uuid):
        # Deleted by its user meanwhile: it is gone from cell0 too.
        build_tasks.soft_delete_instance(cell0_db, instance_uuid)
    conductor._notify(ctxt, notifications.event_type(notifications.BUILD_INSTANCES, "error"),
                      notifier_mod.compute_task_payload(instance_uuid, spec, states.ERROR, exc))


def end_move(conductor, ctxt, operation, move, run, resumed=False):
    failure = _run(ctxt, operation, move, run, resumed)
    if failure is not None:
        LOG.info("%s %s of %s failed: %s", operation.name, move.migration_uuid,
                 move.instance_uuid, failure)
        _move_failed(conductor, ctxt, move, failure)
    if not common.end_request(conductor, ctxt, move.cell, move.instance_uuid,
                              move.migration_uuid, move.places()) and move.moved:
        # The events recorded in the source cell join the server's copy.
        instance_copy.sync_actions(move.cell_db, move.target_db, move.instance_uuid)
    if failure is not None:
        # The migration may have had no undo to say so (it never left the status
        # the API gave it).
        migration_records.update(move.cell_db, move.migration_uuid,
                                 expected_status=(ms.PRE_MIGRATING, ms.ACCEPTED),
                                 status=ms.ERROR)


def _move_failed(conductor, ctxt, move, exc):
    """compute_task.migrate_server.error (rebuild_server for an evacuation)."""
    task = (notifications.REBUILD_SERVER if move.migration["migration_type"] == "evacuation"
            else notifications.MIGRATE_SERVER)
    db = move.target_db if move.moved else move.cell_db
    try:
        with db.read_session() as s:
            state = records.get_instance(s, move.instance_uuid, read_deleted=True).vm_state
    except Exception:  # noqa: BLE001 - a notification never breaks an operation
        state = None
    # The request spec as the scheduler was given it (the destination asked for).
    spec = dict(move.request_spec, requested_destination=getattr(
        move, "requested_destination", None))
    conductor._notify(ctxt, notifications.event_type(task, "error"),
                      notifier_mod.compute_task_payload(move.instance_uuid, spec, state, exc))


def end_unshelve(conductor, ctxt, operation, unshelve, run, resumed=False):
    _run(ctxt, operation, unshelve, run, resumed)  # a failure: undone, the server shelved
    if not resumed:
        records.finish_action(unshelve.cell_db, ctxt, unshelve.instance_uuid)
    common.free_what_a_delete_left(conductor, ctxt, unshelve.instance_uuid, None,
                                   unshelve.places())


def end_resized(conductor, ctxt, operation, resized, run, resumed=False):
    """Across cells a first run sends the .start and .end notifications, as no one
    host sees the whole of it. (Nothing is returned: the migration says how it ended.)"""
    if not operation.cross_cell or resumed:
        _resized_ended(conductor, ctxt, resized, run)
        return
    name = (notifications.RESIZE_CONFIRM if operation.request == "confirm"
            else notifications.RESIZE_REVERT)
    with notifications.action(lambda event_type, fault=None: conductor.notify_instance(
            ctxt, resized.instance_db, resized.instance_uuid, event_type, fault=fault), name):
        _resized_ended(conductor, ctxt, resized, run)


def _resized_ended(conductor, ctxt, resized, run):
    """``run()`` the rest of a confirm or revert, then record how it ended (unless
    it waits for a host, to be carried on by recovery)."""
    try:
        run()
    except Unfinished:
        return
    except Exception as exc:
        migration_records.update(resized.instance_db, resized.migration_uuid, status=ms.ERROR)
        with contextlib.suppress(records.InstanceNotFound):
            records.add_fault(resized.instance_db, resized.instance_uuid, exc)
        _resized_closed(conductor, ctxt, resized)
        raise
    _resized_closed(conductor, ctxt, resized)


def _resized_closed(conductor, ctxt, resized):
    common.end_request(conductor, ctxt, resized.instance_cell, resized.instance_uuid,
                       resized.migration_uuid, resized.places())
