"""Requests whose cast was lost: found, claimed and settled by any conductor.

The API records a request (a build request; a migration row, the task state,
the instance action), then casts it to a conductor. A cast dies with the
process that sent it or with the conductor that took it off the queue before
journaling its first step; nothing then begins the request. The conductor
that begins a request claims it: the operation's row, named after the request
(journal.request_key), is written before anything else of it. A request
accepted longer than ``[conductor] lost_request_timeout`` ago and not claimed
is claimed by the first conductor whose periodic recovery finds it, and
settled as if its conductor had died in its first step: a build, a move or an
unshelve goes back (refused), a confirm or a revert forward (carried out). Of
a settler and a beginner (a cast that was only slow), or of two settlers,
exactly one writes the row; the other does nothing.

What a request of each operation looks like as the API leaves it (its
instance action, task state, migration type and status) is read from its
declaration (novella/conductor/operations.py).
"""
import collections
import contextlib
import datetime
import logging

import sqlalchemy as sa

from novella.compute import states
from novella.compute.states import migration_status as ms
from novella.conductor import journal, operations
from novella.context import RequestContext, get_admin_context
from novella.db import api_models as am
from novella.db import cell_models as cm
from novella.db import cells as cells_mod
from novella.db import records

LOG = logging.getLogger(__name__)


def _now():
    """The clock lost requests are judged by (their records' timestamps are UTC)."""
    return records.utcnow()


# A request the API accepted, as it left it: the operation that carries it out, its
# cell (None for a build), its server, its migration (a dict; None for a build or an
# unshelve), when it was accepted, a context of the user's action, its claim's name.
LostRequest = collections.namedtuple(
    "LostRequest", "operation cell cell_db instance_uuid migration accepted_at ctxt key")


class RequestLost(Exception):
    """Why a request no conductor began was settled (its cast was lost)."""

    def __init__(self, request, what):
        self.message = (f"The request to {what} server {request.instance_uuid}, accepted "
                        f"at {request.accepted_at:%Y-%m-%d %H:%M:%S} UTC, was never begun by "
                        "a conductor (its message was lost); it was not carried out.")
        super().__init__(self.message)


class RequestNotRecorded(Exception):
    """Why the task state of a request the API never recorded in full was cleared."""

    def __init__(self, instance_uuid, action):
        self.message = (f"The request {action} of server {instance_uuid} was not recorded "
                        "in full (the API process stopped or failed between its writes) and "
                        "was never sent to a conductor; it was not carried out.")
        super().__init__(self.message)


def settle(conductor, everything=False):
    """Settle each request the API accepted more than ``[conductor]
    lost_request_timeout`` seconds ago (``everything``: whatever its age) that no
    conductor began. A move (its migration still as the API made it) is undone as
    a refused move: the migration ``error``, the task state cleared, a fault, the
    conductor's event and the action ``Error``. An unshelve is undone the same way
    (the server stays shelved). A build (its build request still in the API
    database) goes to cell0 in ERROR with a fault, as when no host is found. A
    confirm or a revert is carried out. Then clear the task states of requests the
    API never recorded in full (``clear_stranded``). Returns the migrations settled
    (the servers, for an unshelve, a build or a task state cleared)."""
    bound = conductor.conf.conductor.lost_request_timeout
    if not everything and bound <= 0:
        return []
    cutoff = _now() - datetime.timedelta(seconds=0 if everything else bound)
    settled = []
    for request in list(_lost_requests(conductor.api_db, cutoff)):
        try:
            if _settle(conductor, request):
                settled.append(request.migration["uuid"] if request.migration
                               else request.instance_uuid)
        except Exception:  # noqa: BLE001 - one stuck request must not block the others
            LOG.exception("settling the lost %s of %s failed", request.operation.name,
                          request.instance_uuid)
    return settled + clear_stranded(conductor.api_db, cutoff)


# -- finding them --------------------------------------------------------------------------

def _lost_requests(api_db, cutoff):
    """LostRequest for each request of every cell accepted at ``cutoff`` or before,
    as the API left it, that no operation claimed."""
    with api_db.read_session() as s:
        builds = s.execute(sa.select(am.BuildRequest.instance_uuid,
                                     am.BuildRequest.project_id, am.BuildRequest.created_at)
                           .where(am.BuildRequest.created_at <= cutoff)).all()
    build = operations.of_request("build")
    for uuid, project_id, at in builds:
        key = journal.request_key(build.request, uuid)
        if not _begun(api_db, key, uuid, at, build.request):
            ctxt = RequestContext(project_id=project_id, roles=["admin"], is_admin=True)
            yield LostRequest(build, None, None, uuid, None, at, ctxt, key)
    for cell in cells_mod.list_cells(api_db, include_cell0=False):
        cell_db = cells_mod.cell_database(cell)
        try:
            migrations, unshelving = _accepted_requests(cell_db)
        except Exception:  # noqa: BLE001 - a cell out of reach must not block the others
            LOG.exception("could not look for lost requests in cell %s", cell.name)
            continue
        for row in migrations:
            migration = {"uuid": row.uuid, "status": row.status,
                         "migration_type": row.migration_type,
                         "cross_cell_move": bool(row.cross_cell_move)}
            operation = operations.of_migration(migration)
            if operation is None:
                continue
            # A move's migration is made when the API accepts it; a confirm's or a
            # revert's status is set then.
            at = (row.created_at if operation.request == "move"
                  else row.updated_at or row.created_at)
            key = journal.request_key(operation.request, row.uuid)
            if at > cutoff or _begun(api_db, key, row.instance_uuid, at, operation.request):
                continue
            mapped = cells_mod.instance_cell(api_db, row.instance_uuid)
            if mapped is None or mapped.uuid != cell.uuid:
                continue  # the copy of a cross-cell move in the cell it left
            ctxt, _at, _action = _action_context(
                cell_db, row.instance_uuid, operation.action(row.migration_type))
            yield LostRequest(operation, cell, cell_db, row.instance_uuid, migration, at, ctxt,
                              key)
        unshelve = operations.of_request("unshelve")
        for uuid, updated_at in unshelving:
            if updated_at is not None and updated_at > cutoff:
                continue  # the API set the task state since (its action comes after)
            # No action: the API died before it recorded one, and before its cast.
            ctxt, at, action = _action_context(cell_db, uuid, unshelve.action())
            at = at or updated_at
            key = journal.request_key(unshelve.request, uuid,
                                      str(ctxt.request_id) if action else "-")
            if at is None or at > cutoff or _begun(api_db, key, uuid, at, unshelve.request):
                continue
            yield LostRequest(unshelve, cell, cell_db, uuid, None, at, ctxt, key)


def _accepting_migrations():
    """The operations whose requests the API records in a migration's status."""
    return [op for op in operations.OPERATIONS.values() if op.migration_statuses]


def _accepted_requests(cell_db):
    """(migrations, unshelving servers) of ``cell_db`` as the API leaves requests."""
    statuses = sorted({status for op in _accepting_migrations()
                       for status in op.migration_statuses})
    unshelve = operations.of_request("unshelve")
    with cell_db.read_session() as s:
        migrations = s.execute(sa.select(
            cm.Migration.uuid, cm.Migration.instance_uuid, cm.Migration.status,
            cm.Migration.migration_type, cm.Migration.cross_cell_move,
            cm.Migration.created_at, cm.Migration.updated_at).join(
            cm.Instance, cm.Instance.uuid == cm.Migration.instance_uuid).where(
            cm.Migration.status.in_(statuses),
            cm.Migration.hidden.is_(False), cm.Migration.deleted == 0,
            cm.Instance.deleted == 0)).all()
        unshelving = s.execute(sa.select(cm.Instance.uuid, cm.Instance.updated_at).where(
            cm.Instance.task_state.in_(unshelve.task_states),
            cm.Instance.vm_state.in_((states.SHELVED, states.SHELVED_OFFLOADED)),
            cm.Instance.hidden.is_(False), cm.Instance.deleted == 0)).all()
    return migrations, unshelving


def _begun(api_db, key, instance_uuid, accepted_at, request):
    """The request's claim exists, or (written before requests were claimed by name)
    an operation of its kind on the server began after it was accepted."""
    with api_db.read_session() as s:
        return s.scalar(sa.select(sa.func.count()).select_from(am.Operation).where(
            sa.or_(am.Operation.uuid == key, sa.and_(
                am.Operation.instance_uuid == instance_uuid,
                am.Operation.kind.in_(operations.kinds_of(request)),
                am.Operation.created_at > accepted_at)))) > 0


def _action_context(cell_db, instance_uuid, actions):
    """(an admin context of the user's latest action on the server named ``actions``
    (one name or several): its request id (the beginner's, which names the action
    and its events), user and project; when the API recorded it; its name). A fresh
    admin context and None, None if there is none."""
    names = (actions,) if isinstance(actions, str) else tuple(actions)
    with cell_db.read_session() as s:
        row = s.execute(sa.select(
            cm.InstanceAction.request_id, cm.InstanceAction.user_id,
            cm.InstanceAction.project_id, cm.InstanceAction.start_time,
            cm.InstanceAction.action).where(
            cm.InstanceAction.instance_uuid == instance_uuid,
            cm.InstanceAction.action.in_(names)).order_by(
            cm.InstanceAction.id.desc()).limit(1)).first()
    if row is None:
        return get_admin_context(), None, None
    return (RequestContext(user_id=row.user_id, project_id=row.project_id, roles=["admin"],
                           is_admin=True, request_id=row.request_id),
            row.start_time, row.action)


def _newer_migration(cell_db, instance_uuid, migration_uuid):
    """The server has a migration made after ``migration_uuid``."""
    with cell_db.read_session() as s:
        this = sa.select(cm.Migration.id).where(
            cm.Migration.uuid == migration_uuid).scalar_subquery()
        return s.scalar(sa.select(sa.func.count()).select_from(cm.Migration).where(
            cm.Migration.instance_uuid == instance_uuid, cm.Migration.id > this)) > 0


# -- settling one --------------------------------------------------------------------------

def _settle(conductor, request):
    """Claim ``request`` and settle it (as its conductor dying in its first step
    would be recovered); False if another conductor began or settled it first."""
    operation, uuid, migration = request.operation, request.instance_uuid, request.migration
    loaded = operation.lost(conductor, request)
    if loaded is None:
        return False  # gone meanwhile: nothing to settle
    ctxt, state = loaded
    # A server that moved on (its state reset by an admin, maybe a new request
    # accepted since) is left as it is: no step started, none is undone; only the
    # request's own records (migration, action) end.
    moved_on = operation.request == "move" and (
        operations.instance(conductor, uuid)[2].task_state not in operation.task_states
        or _newer_migration(request.cell_db, uuid, migration["uuid"]))
    first = None if moved_on else operation.tasks(state)[0].name
    try:
        journal.Journal(conductor.api_db, conductor.owner, conductor.lease, operation.name,
                        uuid, ctxt, state).begin(request.key).claim(first)
    except journal.Taken:
        LOG.info("the %s of %s was begun or settled by another conductor", operation.name,
                 uuid)
        return False
    lost = RequestLost(request, _verb(operation, migration))
    if operation.recovery == operations.FORWARD:
        LOG.warning("the %s of migration %s of %s, accepted at %s, was never begun by a "
                    "conductor (its message was lost): carrying it out", operation.request,
                    migration["uuid"], uuid, request.accepted_at)
    else:
        LOG.warning("%s", lost.message)
    if operation.event is not None:  # the conductor's event of the action says why
        try:
            with records.action_event(request.cell_db, ctxt, uuid, operation.event):
                raise lost
        except RequestLost:
            pass
    operations.recover(conductor, journal.load(conductor.api_db, request.key), exc=lost)
    return True


def _verb(operation, migration):
    """What the user asked, in a sentence: 'resize', 'live-migrate', 'create'..."""
    if operation.request != "move":
        return {"build": "create"}.get(operation.request, operation.request)
    action = operation.action(migration["migration_type"])
    return "live-migrate" if action == "live-migration" else action


# -- requests the API never recorded in full -----------------------------------------------

def clear_stranded(api_db, cutoff):
    """Servers left with the task state the API set for a request it never recorded
    in full (it died, or its next write failed, between the two), and so never
    cast, set at ``cutoff`` or before: the task state of an operation that
    ``may_strand`` with no migration made since its action (a revert's: while the
    migration is still ``finished``), and no operation of the server running. The
    task state is cleared (compare-and-set: of several conductors one does it), the
    action's events end ``Error``, a fault says why. Returns the servers."""
    cleared = []
    for cell in cells_mod.list_cells(api_db, include_cell0=False):
        cell_db = cells_mod.cell_database(cell)
        try:
            stranded = list(_stranded(cell_db, cutoff))
        except Exception:  # noqa: BLE001 - a cell out of reach must not block the others
            LOG.exception("could not look for stranded servers in cell %s", cell.name)
            continue
        for uuid, task_state, ctxt, action in stranded:
            if journal.running_for(api_db, uuid):
                continue
            try:
                records.update_instance(cell_db, uuid, reload=False,
                                        expected_task_state=(task_state,), task_state=None)
            except (records.UnexpectedTaskStateError, records.InstanceNotFound):
                continue  # another conductor cleared it, or the server moved on
            exc = RequestNotRecorded(uuid, action)
            LOG.warning("%s", exc.message)
            with contextlib.suppress(records.InstanceNotFound):
                records.add_fault(cell_db, uuid, exc)
            records.finish_open_events(cell_db, ctxt, uuid, "Error")
            cleared.append(uuid)
    return cleared


def _stranding():
    """{task state: (the operation, its instance actions)} of the operations that
    ``may_strand`` (the cross-cell ones are begun as the others are: not separately)."""
    stranding = {}
    for op in operations.OPERATIONS.values():
        if op.may_strand and not op.cross_cell:
            for task_state in op.task_states:
                stranding[task_state] = (op, tuple(op.actions.values()))
    return stranding


def _stranded(cell_db, cutoff):
    """(server, task state, context of its action, action) of each stranded server."""
    stranding = _stranding()
    with cell_db.read_session() as s:
        rows = s.execute(sa.select(cm.Instance.uuid, cm.Instance.task_state).where(
            cm.Instance.task_state.in_(tuple(stranding)), cm.Instance.deleted == 0,
            cm.Instance.hidden.is_(False), cm.Instance.updated_at <= cutoff)).all()
    for uuid, task_state in rows:
        operation, actions = stranding[task_state]
        ctxt, at, action = _action_context(cell_db, uuid, actions)
        if at is None or at > cutoff:
            continue
        with cell_db.read_session() as s:
            if operation.request == "revert":  # its migration is 'reverting' once recorded
                recorded = not s.scalar(sa.select(sa.func.count()).select_from(
                    cm.Migration).where(cm.Migration.instance_uuid == uuid,
                                        cm.Migration.status == ms.FINISHED,
                                        cm.Migration.deleted == 0))
            else:
                recorded = s.scalar(sa.select(sa.func.count()).select_from(
                    cm.Migration).where(cm.Migration.instance_uuid == uuid,
                                        cm.Migration.created_at >= at)) > 0
            if not recorded:
                yield uuid, task_state, ctxt, action
