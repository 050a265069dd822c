"""Every conductor operation, declared once; how one begins and how a fresh conductor
finishes it.

An ``Operation`` says all there is to know of one: its name (its ``kind`` in
the journal), its state class and task list (novella/conductor/tasks: one
module per operation), the request it begins (``journal.request_key``) and
what the API records when it accepts one (the instance action, the task
state, the migration's type and status), the conductor's event, how it ends
(novella/conductor/ends.py, for its entry point and its recovery alike),
how a request of it whose cast was lost is loaded (lost_requests.py), and
which way recovery takes it when its conductor died in the middle:

    build, resize,                  back: every step that started is undone, newest
    cross-cell resize,                first (the in-flight one too: each undo copes with
    live migration, evacuation,       a step that did nothing or half), so the server is
    unshelve                          where it began, with a fault (a build: in cell0,
                                      ERROR, as when no host is found); except once a
                                      step of no return completed (or, in flight,
                                      ``settled()`` says it did), from where it goes
                                      forward
    confirm, revert (in a cell      forward: the steps not done are run (each is safe to
    or across cells)                  run again), so the server ends confirmed or reverted

A crash while undoing carries on undoing; a crash after the last step only
records the end. A request no conductor began (its cast lost) is settled the
same way by the conductor that claims it (novella/conductor/lost_requests.py),
as if its conductor had died in its first step. The journal
(novella/conductor/journal.py) says which steps started, completed or were
undone, and holds the state they shared.

Adding an operation: one entry below, its task module, its compute module.
"""
import dataclasses
import datetime
import itertools
import json
import logging
import types
import typing

import sqlalchemy as sa

from novella.compute.states import migration_status as ms
from novella.compute.states import task_states
from novella.conductor import ends
from novella.conductor import journal
from novella.conductor.tasks import build as build_tasks
from novella.conductor.tasks import common
from novella.conductor.tasks import cross_cell as cross_cell_tasks
from novella.conductor.tasks import evacuate as evacuate_tasks
from novella.conductor.tasks import live_migrate as live_migrate_tasks
from novella.conductor.tasks import resize as resize_tasks
from novella.conductor.tasks import shelve as shelve_tasks
from novella.conductor.tasks.base import TaskList
from novella.context import RequestContext
from novella.db import api_models as am
from novella.db import cells as cells_mod
from novella.db import migration_records
from novella.db import records
from novella.db import request_specs

LOG = logging.getLogger(__name__)

BACK, FORWARD = "back", "forward"


@dataclasses.dataclass(frozen=True)
class Operation:
    name: str                # its kind in the journal
    state: type              # what its steps share (a tasks.common.Recorded)
    tasks: typing.Callable   # tasks(state): its steps, in order
    request: str             # the request it begins: journal.request_key's kind
    actions: dict            # {migration type (None: it has none): the API's instance action}
    end: typing.Callable     # end(conductor, ctxt, operation, state, run, resumed=False)
    lost: typing.Callable    # lost(conductor, request): (context, state) of a lost request
    recovery: str = BACK     # which way a fresh conductor takes it (see above)
    event: str = None        # the conductor's event in the action, around its steps
    task_states: tuple = ()  # the task state the API sets when it accepts one
    migration_statuses: tuple = ()  # the status the API gives its migration then
    cross_cell: bool = False  # it carries a server from one cell into another
    # The API sets its task state before it writes the migration (or its status), a
    # step apart: a request of it may be left stranded there (lost_requests.py).
    may_strand: bool = False

    @property
    def migration_types(self):
        return tuple(kind for kind in self.actions if kind is not None)

    def action(self, migration_type=None):
        """The instance action the API recorded for a request of it."""
        return self.actions.get(migration_type) or self.actions[None]


# -- what an operation starts from ---------------------------------------------------------

def _what_the_conductor_reads(row):
    """The instance row's values the conductor goes by (its flavor among them)."""
    return types.SimpleNamespace(
        flavor=records.flavor_of(row),
        **{k: getattr(row, k) for k in ("uuid", "project_id", "user_id", "host", "node",
                                        "availability_zone", "vm_state", "task_state",
                                        "power_state")})


def instance(conductor, instance_uuid):
    """(cell mapping, cell database, what the conductor reads of the server)."""
    cell = cells_mod.instance_cell(conductor.api_db, instance_uuid)
    cell_db = cells_mod.cell_database(cell)
    with cell_db.read_session() as s:
        row = records.get_instance(s, instance_uuid)
    return cell, cell_db, _what_the_conductor_reads(row)


_BUILD_REQUEST = sa.select(
    am.BuildRequest.instance, am.BuildRequest.block_device_mappings, am.BuildRequest.tags
).where(am.BuildRequest.instance_uuid == sa.bindparam("b_uuid"))


def load_build_request(api_db, instance_uuid, default_bdms=None, default_tags=None):
    """{"instance", "block_device_mappings", "tags"} of a build request, or None if gone."""
    with api_db.reader() as conn:
        br = conn.execute(_BUILD_REQUEST, {"b_uuid": instance_uuid}).first()
        if br is None:
            return None
        bdms = json.loads(br.block_device_mappings) if br.block_device_mappings else None
        tags = json.loads(br.tags) if br.tags else None
        return {"instance": json.loads(br.instance),
                "block_device_mappings": bdms if bdms is not None else list(default_bdms or []),
                "tags": tags if tags is not None else list(default_tags or [])}


def _recordable(migration):
    """The migration as its operation's state holds it: its times as ISO 8601 text (the
    journal saves JSON)."""
    return {key: value.isoformat() if isinstance(value, datetime.datetime) else value
            for key, value in migration.items()}


def load_move(conductor, ctxt, instance_uuid, migration_uuid, host=None, flavor=None,
              clean_shutdown=True):
    """The state of a move about to start; ``flavor``: the new one (a resize)."""
    cell, spec = request_specs.get_with_cell(conductor.api_db, instance_uuid)
    migration, row = migration_records.get_with_instance(
        cells_mod.cell_database(cell), migration_uuid, instance_uuid)
    inst = _what_the_conductor_reads(row)
    return common.Move(conductor, ctxt, cell, inst, _recordable(migration),
                       flavor or inst.flavor, spec,
                       target_host=host, clean_shutdown=clean_shutdown)


def load_resized(conductor, ctxt, instance_uuid, migration_uuid):
    """The state of a confirm or a revert of a move in VERIFY_RESIZE."""
    cell = cells_mod.instance_cell(conductor.api_db, instance_uuid)
    migration, inst = migration_records.get_with_instance(
        cells_mod.cell_database(cell), migration_uuid, instance_uuid)
    return common.Resized(conductor, ctxt, instance_uuid, _recordable(migration),
                          inst.power_state, cell=cell)


def load_unshelve(conductor, ctxt, instance_uuid, host=None):
    cell, _db, inst = instance(conductor, instance_uuid)
    return shelve_tasks.Unshelve(conductor, ctxt, cell, inst,
                                 request_specs.get(conductor.api_db, instance_uuid), host=host)


def _lost_build(conductor, request):
    build_request = load_build_request(conductor.api_db, request.instance_uuid)
    if build_request is None:
        return None  # deleted by its user meanwhile: nothing to settle
    spec = request_specs.get(conductor.api_db, request.instance_uuid)
    ctxt = RequestContext(user_id=spec.get("user_id"), project_id=request.ctxt.project_id,
                          roles=["admin"], is_admin=True)
    return ctxt, build_tasks.Build(conductor, ctxt, request.instance_uuid, spec, build_request)


def _lost_move(conductor, request):
    return request.ctxt, load_move(conductor, request.ctxt, request.instance_uuid,
                                   request.migration["uuid"])


def _lost_resized(conductor, request):
    return request.ctxt, load_resized(conductor, request.ctxt, request.instance_uuid,
                                      request.migration["uuid"])


def _lost_unshelve(conductor, request):
    # (the latest unshelve of the server is the one)
    return request.ctxt, load_unshelve(conductor, request.ctxt, request.instance_uuid)


# -- the operations ------------------------------------------------------------------------

# One name per operation (docs/architecture.md, "Names"): a move's is its migration
# type (a cold migration is a resize to the same flavor, as its compute steps are).
BUILD, UNSHELVE = "build", "unshelve"
RESIZE, CROSS_CELL_RESIZE = "resize", "cross-cell-resize"
LIVE_MIGRATION, EVACUATION = "live-migration", "evacuation"
CONFIRM, CROSS_CELL_CONFIRM = "confirm-resize", "confirm-cross-cell-resize"
REVERT, CROSS_CELL_REVERT = "revert-resize", "revert-cross-cell-resize"
# The names journal rows were written under before: read as the operation's.
ALIASES = {"migrate": RESIZE, "migrate-cross-cell": CROSS_CELL_RESIZE,
           "live-migrate": LIVE_MIGRATION, "evacuate": EVACUATION,
           "confirm": CONFIRM, "confirm-cross-cell": CROSS_CELL_CONFIRM,
           "revert": REVERT, "revert-cross-cell": CROSS_CELL_REVERT}

_MOVE = dict(state=common.Move, request="move", end=ends.end_move, lost=_lost_move)
_RESIZE = dict(_MOVE, actions={"resize": "resize", "migration": "migrate"},
               event=resize_tasks.CONDUCTOR_EVENT, task_states=(task_states.RESIZE_PREP,),
               migration_statuses=(ms.PRE_MIGRATING,), may_strand=True)
_RESIZED = dict(state=common.Resized, end=ends.end_resized, lost=_lost_resized,
                recovery=FORWARD)
_CONFIRM = dict(_RESIZED, request="confirm", actions={None: "confirmResize"},
                migration_statuses=(ms.CONFIRMING,))
_REVERT = dict(_RESIZED, request="revert", actions={None: "revertResize"},
               task_states=(task_states.RESIZE_REVERTING,),
               migration_statuses=(ms.REVERTING,), may_strand=True)

OPERATIONS = {operation.name: operation for operation in (
    Operation(BUILD, build_tasks.Build, build_tasks.build_tasks, request="build",
              actions={None: "create"}, end=ends.end_build, lost=_lost_build),
    Operation(RESIZE, tasks=resize_tasks.resize_tasks, **_RESIZE),
    Operation(CROSS_CELL_RESIZE, tasks=cross_cell_tasks.migrate_tasks, cross_cell=True,
              **_RESIZE),
    Operation(LIVE_MIGRATION, tasks=live_migrate_tasks.live_migrate_tasks,
              actions={"live-migration": "live-migration"},
              event=live_migrate_tasks.CONDUCTOR_EVENT, task_states=(task_states.MIGRATING,),
              migration_statuses=(ms.ACCEPTED,), may_strand=True, **_MOVE),
    Operation(EVACUATION, tasks=evacuate_tasks.evacuate_tasks,
              actions={"evacuation": "evacuate"}, event=evacuate_tasks.CONDUCTOR_EVENT,
              task_states=(task_states.REBUILDING,), migration_statuses=(ms.ACCEPTED,),
              **_MOVE),
    Operation(UNSHELVE, shelve_tasks.Unshelve, shelve_tasks.unshelve_tasks,
              request="unshelve", actions={None: "unshelve"}, end=ends.end_unshelve,
              lost=_lost_unshelve, event=shelve_tasks.CONDUCTOR_EVENT,
              task_states=(task_states.UNSHELVING,)),
    Operation(CONFIRM, tasks=resize_tasks.confirm_tasks, **_CONFIRM),
    Operation(CROSS_CELL_CONFIRM, tasks=cross_cell_tasks.confirm_tasks, cross_cell=True,
              **_CONFIRM),
    Operation(REVERT, tasks=resize_tasks.revert_tasks, **_REVERT),
    Operation(CROSS_CELL_REVERT, tasks=cross_cell_tasks.revert_tasks, cross_cell=True,
              **_REVERT),
)}


def named(kind):
    """The operation a journal row of ``kind`` is of (its name, or a former one)."""
    return OPERATIONS[ALIASES.get(kind, kind)]


def kinds_of(request):
    """The journal kinds (names and former names) of the operations that may have
    begun a ``request``."""
    names = tuple(op.name for op in OPERATIONS.values() if op.request == request)
    return names + tuple(alias for alias, name in ALIASES.items() if name in names)


def of_request(request):
    """The operation that carries out a ``request`` ('build', 'unshelve') the API
    accepted."""
    return next(op for op in OPERATIONS.values() if op.request == request)


def of_migration(migration):
    """The operation that carries out the request the API recorded in ``migration``
    (a dict: its status, type and whether it crossed cells), or None."""
    return next((op for op in OPERATIONS.values()
                 if migration["status"] in op.migration_statuses
                 and (not op.migration_types
                      or migration["migration_type"] in op.migration_types)
                 and op.cross_cell == bool(migration["cross_cell_move"])), None)


# -- beginning one ------------------------------------------------------------------------

def begin(conductor, ctxt, operation, state, *ids):
    """The journaled task list of ``operation`` beginning the request named by ``ids``
    (``journal.request_key``), claimed; None, and nothing done, if another conductor
    began it or settled it as lost (this cast came late)."""
    tasks = TaskList(f"{operation.name} {state.instance_uuid}", operation.tasks(state),
                     journal=journal.Journal(conductor.api_db, conductor.owner, conductor.lease,
                                             operation.name, state.instance_uuid, ctxt, state)
                     .begin(journal.request_key(operation.request, *ids)),
                     forward=operation.recovery == FORWARD)
    # The steps before the first that acts are recorded done with the claim.
    quiet = list(itertools.takewhile(lambda task: not task.acts(), tasks.tasks[:-1]))
    try:
        tasks.journal.claim(tasks.tasks[len(quiet)].name, done=[t.name for t in quiet])
    except journal.Taken as exc:
        LOG.warning("%s: not begun: %s", tasks.name, exc)
        return None
    return tasks


def run(conductor, ctxt, operation, state, *ids):
    """Begin (``begin``) and run ``operation`` to its end; its task list, or None if
    another conductor had the request."""
    tasks = begin(conductor, ctxt, operation, state, *ids)
    if tasks is not None:
        operation.end(conductor, ctxt, operation, state, tasks.run)
    return tasks


# -- recovery ------------------------------------------------------------------------------

class ConductorDied(Exception):
    """Why a recovered operation was undone: the conductor running it died."""

    def __init__(self, operation):
        self.message = (f"The conductor running {operation['kind']} of server "
                        f"{operation['instance_uuid']} stopped; the operation was undone.")
        super().__init__(self.message)


def recover(conductor, operation, exc=None):
    """Finish ``operation`` (a journal row its dead owner left) forward or back;
    ``exc``: why it is undone, if it goes back (default: its conductor died)."""
    kind = named(operation["kind"])
    ctxt = RequestContext.from_dict(operation["context"])
    state = kind.state.restore(conductor, ctxt, operation["state"])
    steps = operation["steps"]
    tasks = TaskList(f"recover {operation['kind']} {operation['instance_uuid']}",
                     kind.tasks(state),
                     journal=journal.Journal(conductor.api_db, conductor.owner, conductor.lease,
                                             operation["kind"], operation["instance_uuid"],
                                             ctxt, state, operation_uuid=operation["uuid"],
                                             steps=steps),
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
        carry_on = lambda: tasks.run(start=start)  # noqa: E731
    else:
        exc = exc or ConductorDied(operation)
        in_flight = [(i, task) for i, (task, status) in enumerate(zip(tasks.tasks, statuses))
                     if status in ("started", "done", "undoing")]
        carry_on = lambda: _undo(tasks, in_flight, exc)  # noqa: E731
    kind.end(conductor, ctxt, kind, state, carry_on, resumed=True)


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
