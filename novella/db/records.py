"""Record keeping every service shares on a cell database.

Instance updates guarded by the expected task state (so two racing requests
cannot both win), instance actions and their events, and instance faults.
"""
import contextlib
import json
import traceback as tb_mod

import sqlalchemy as sa
from sqlalchemy import orm

from novella.db import cell_models as m
from novella.db.engine import insert_row, insert_rows
from novella.db.timestamps import utcnow  # noqa: F401 - records.utcnow for its callers


class InstanceNotFound(Exception):
    code = 404


class UnexpectedTaskStateError(Exception):
    code = 409


_UNSET = object()


# Built once: constructing a select and its cache key cost about a third of
# running it, and these run several times per server operation.
_GET_INSTANCE = sa.select(m.Instance).where(m.Instance.uuid == sa.bindparam("uuid"),
                                            m.Instance.deleted == 0)
_GET_INSTANCE_ANY = sa.select(m.Instance).where(m.Instance.uuid == sa.bindparam("uuid"))


def get_instance(s, instance_uuid, read_deleted=False):
    q = _GET_INSTANCE_ANY if read_deleted else _GET_INSTANCE
    inst = s.scalars(q, {"uuid": instance_uuid}).first()
    if inst is None:
        raise InstanceNotFound(f"Instance {instance_uuid} could not be found.")
    return inst


def update_instance(cell_db, instance_uuid, expected_task_state=_UNSET,
                    expected_vm_state=_UNSET, network_info=_UNSET, reload=True, **values):
    """Update an instance only if it is in the expected state(s).

    ``expected_task_state`` may be a value or a tuple of values (None allowed).
    Raises UnexpectedTaskStateError when another request got there first.
    ``network_info`` (a list) replaces the info cache in the same transaction.
    Returns the updated instance, or None with ``reload=False``.
    """
    # Core statements on the connection; an ORM session only to read back.
    with cell_db.connection(write=True) as conn:
        guarded_update(conn, instance_uuid, expected_task_state, expected_vm_state, **values)
        if network_info is not _UNSET:
            _set_network_info(conn, instance_uuid, network_info)
        if not reload:
            return None
        with orm.Session(bind=conn, expire_on_commit=False) as s:
            return get_instance(s, instance_uuid)


def set_network_info(cell_db, instance_uuid, network_info):
    """Replace the instance's info cache (a list of VIFs) without reading it."""
    with cell_db.connection(write=True) as conn:
        _set_network_info(conn, instance_uuid, network_info)


def _set_network_info(conn, instance_uuid, network_info):
    text = json.dumps(network_info or [])
    if not conn.execute(_SET_NETWORK_INFO, {"b_uuid": instance_uuid,
                                            "b_network_info": text}).rowcount:
        insert_row(conn, m.InstanceInfoCache, {"instance_uuid": instance_uuid,
                                               "network_info": text})


_SET_NETWORK_INFO = sa.update(m.InstanceInfoCache).where(
    m.InstanceInfoCache.instance_uuid == sa.bindparam("b_uuid")).values(
    network_info=sa.bindparam("b_network_info"))


def guarded_update(conn, instance_uuid, expected_task_state=_UNSET, expected_vm_state=_UNSET,
                   **values):
    """``update_instance``'s guarded UPDATE inside the caller's transaction (a connection)."""
    values.setdefault("updated_at", utcnow())
    q, params = _guarded_update(instance_uuid, expected_task_state, expected_vm_state, values)
    if conn.execute(q, params).rowcount == 1:
        return
    row = conn.execute(sa.select(m.Instance.task_state, m.Instance.vm_state).where(
        m.Instance.uuid == instance_uuid, m.Instance.deleted == 0)).first()
    if row is None:
        raise InstanceNotFound(f"Instance {instance_uuid} could not be found.")
    raise UnexpectedTaskStateError(
        f"Conflict updating instance {instance_uuid}. Expected: "
        f"task_state={expected_task_state if expected_task_state is not _UNSET else 'any'}. "
        f"Actual: task_state={row.task_state}, vm_state={row.vm_state}")


_GUARDED_UPDATES = {}  # statement shape -> the statement, built once


def _guarded_update(instance_uuid, expected_task_state, expected_vm_state, values):
    """The UPDATE of ``update_instance`` and its parameters.

    Statements differ only by which states are expected (and which of them is
    None) and which columns are set; each shape is built once, with bind
    parameters, since building and keying a new statement cost more than
    running it.
    """
    params = {"b_uuid": instance_uuid}
    guards = []
    for column, expected in (("task_state", expected_task_state),
                             ("vm_state", expected_vm_state)):
        if expected is _UNSET:
            guards.append(None)
            continue
        options = expected if isinstance(expected, (tuple, list)) else (expected,)
        guards.append(tuple(v is None for v in options))
        for i, v in enumerate(options):
            if v is not None:
                params[f"b_{column}_{i}"] = v
    columns = tuple(sorted(values))
    params.update((f"b_set_{k}", values[k]) for k in columns)
    shape = (tuple(guards), columns)
    q = _GUARDED_UPDATES.get(shape)
    if q is None:
        q = sa.update(m.Instance).where(m.Instance.uuid == sa.bindparam("b_uuid"),
                                        m.Instance.deleted == 0)
        for column, guard in zip(("task_state", "vm_state"), guards):
            if guard is None:
                continue
            col = getattr(m.Instance, column)
            q = q.where(sa.or_(*[col.is_(None) if is_none else col == sa.bindparam(f"b_{column}_{i}")
                                 for i, is_none in enumerate(guard)]))
        q = _GUARDED_UPDATES[shape] = q.values({k: sa.bindparam(f"b_set_{k}") for k in columns})
    return q, params


# The compute's part of a build, under the reference's name (its build method is
# a private one, hence the double underscore); the scheduler counts its failures.
BUILD_EVENT = "compute__do_build_and_run_instance"


def start_action(cell_db, ctxt, instance_uuid, action):
    """Record that a user asked for ``action`` (e.g. 'create', 'resize'); returns its id."""
    with cell_db.connection(write=True) as conn:
        return add_action(conn, ctxt, instance_uuid, action)


def add_action(conn, ctxt, instance_uuid, action):
    """``start_action`` inside the caller's transaction (a connection); returns the id."""
    return insert_row(conn, m.InstanceAction, {
        "action": action, "instance_uuid": instance_uuid, "request_id": ctxt.request_id,
        "user_id": ctxt.user_id, "project_id": ctxt.project_id, "start_time": utcnow()})


_FIND_ACTION_ID = (sa.select(sa.func.max(m.InstanceAction.id))
                   .where(m.InstanceAction.instance_uuid == sa.bindparam("b_uuid"),
                          m.InstanceAction.request_id == sa.bindparam("b_request_id")))


_ev = m.InstanceActionEvent
_ADD_EVENT_OF_REQUEST = sa.insert(_ev).from_select(
    ["action_id", "event", "start_time", "host"],
    sa.select(m.InstanceAction.id, sa.bindparam("b_event", type_=sa.String),
              sa.bindparam("b_start", type_=sa.DateTime), sa.bindparam("b_host", type_=sa.String))
    .where(m.InstanceAction.instance_uuid == sa.bindparam("b_uuid"),
           m.InstanceAction.request_id == sa.bindparam("b_request_id"))
    .order_by(m.InstanceAction.id.desc()).limit(1)).returning(_ev.id, _ev.action_id)


class _Event:
    """The event row an ``action_event`` started: its id and its action's."""

    def __init__(self, event_id, action_id):
        self.id, self.action_id = event_id, action_id


@contextlib.contextmanager
def action_event(cell_db, ctxt, instance_uuid, event, host=None, finish_action=False,
                 action_id=None):
    """Record one step of the current action: start, finish and result.

    On an exception the event gets result 'Error' and the traceback, the
    action gets the message 'Error', and the exception propagates.
    ``finish_action``: the step is the action's last; its end ends the action.
    ``action_id``: the action, when the caller recorded it (else found by request id).
    """
    row = {"event": event, "start_time": utcnow(), "host": host}
    with cell_db.connection(write=True) as conn:
        ev = None
        if action_id is None and conn.dialect.insert_returning:
            # The request's action found and its event added in one statement.
            found = conn.execute(_ADD_EVENT_OF_REQUEST, {
                "b_uuid": instance_uuid, "b_request_id": ctxt.request_id,
                "b_event": event, "b_start": row["start_time"], "b_host": host}).first()
            ev = None if found is None else _Event(*found)
        elif action_id is None:
            action_id = conn.execute(_FIND_ACTION_ID, {"b_uuid": instance_uuid,
                                                       "b_request_id": ctxt.request_id}).scalar()
        if ev is None:
            if action_id is None:  # a step outside any user request (e.g. periodic)
                action_id = add_action(conn, ctxt, instance_uuid, event)
            ev = _Event(insert_row(conn, m.InstanceActionEvent, dict(row, action_id=action_id)),
                        action_id)
    try:
        yield
    except BaseException as exc:
        _finish_event(cell_db, ev, "Error", "".join(tb_mod.format_exception(exc)), finish_action)
        raise
    _finish_event(cell_db, ev, "Success", None, finish_action)


def failed_event(cell_db, ctxt, instance_uuid, event, exc, finish_action=False, action_id=None):
    """Record ``event`` of the current action as started and failed with ``exc``
    (its traceback kept): a step recorded only when it fails, as the conductor's
    part of a build is. ``finish_action`` and ``action_id`` as for ``action_event``."""
    try:
        with action_event(cell_db, ctxt, instance_uuid, event, finish_action=finish_action,
                          action_id=action_id):
            raise exc
    except BaseException as raised:  # noqa: BLE001 - exc, now recorded
        if raised is not exc:
            raise


def end_action(cell_db, action_id):
    """End the action of id ``action_id``."""
    with cell_db.connection(write=True) as conn:
        conn.execute(_END_ACTION, {"b_id": action_id, "b_now": utcnow()})


_FINISH_EVENT = sa.update(m.InstanceActionEvent).where(
    m.InstanceActionEvent.id == sa.bindparam("b_id")).values(
    finish_time=sa.bindparam("b_now"), result=sa.bindparam("b_result"),
    traceback=sa.bindparam("b_traceback"))
_END_ACTION = sa.update(m.InstanceAction).where(
    m.InstanceAction.id == sa.bindparam("b_id")).values(finish_time=sa.bindparam("b_now"))
_ACTION_FAILED = sa.update(m.InstanceAction).where(
    m.InstanceAction.id == sa.bindparam("b_id")).values(message="Error")


def _finish_event(cell_db, ev, result, traceback, finish_action):
    now = utcnow()
    # Plain UPDATEs by id: the rows may be gone (a hard-deleted cross-cell copy).
    with cell_db.connection(write=True) as conn:
        conn.execute(_FINISH_EVENT, {"b_id": ev.id, "b_now": now, "b_result": result,
                                     "b_traceback": traceback})
        if finish_action:
            conn.execute(_END_ACTION, {"b_id": ev.action_id, "b_now": now})
        if result == "Error":
            conn.execute(_ACTION_FAILED, {"b_id": ev.action_id})


_FINISH_ACTION = sa.update(m.InstanceAction).where(
    m.InstanceAction.id == _FIND_ACTION_ID.scalar_subquery())


def finish_action(cell_db, ctxt, instance_uuid, tell_deleted=False):
    """End the request's action. ``tell_deleted``: also say whether the server was
    deleted by its user (deleted, or being deleted; False when it is not in this cell),
    read in the same statement where the database can; None where it cannot (MySQL
    has no UPDATE ... RETURNING) or when the request has no action here."""
    params = {"b_uuid": instance_uuid, "b_request_id": ctxt.request_id}
    q = _FINISH_ACTION.values(finish_time=utcnow())
    with cell_db.connection(write=True) as conn:
        if not (tell_deleted and conn.dialect.update_returning):
            conn.execute(q, params)
            return None
        row = conn.execute(q.returning(_DELETED_BY_USER), params).first()
        return None if row is None else bool(row[0])


_DELETED_BY_USER = sa.select(sa.or_(m.Instance.deleted != 0,
                                    m.Instance.task_state == "deleting")).where(
    m.Instance.uuid == sa.bindparam("b_uuid")).scalar_subquery()


_LATEST_ACTION_ID = (sa.select(sa.func.max(m.InstanceAction.id))
                     .where(m.InstanceAction.instance_uuid == sa.bindparam("b_uuid")))


def finish_open_events(cell_db, ctxt, instance_uuid, result):
    """End the events of the request's action a dead process left open, with ``result``
    ('Success' or 'Error'), and the action with them (``ctxt`` None: the server's
    latest action, whatever request made it)."""
    now = utcnow()
    with cell_db.connection(write=True) as conn:
        if ctxt is None:
            action_id = conn.execute(_LATEST_ACTION_ID, {"b_uuid": instance_uuid}).scalar()
        else:
            action_id = conn.execute(_FIND_ACTION_ID, {"b_uuid": instance_uuid,
                                                       "b_request_id": ctxt.request_id}).scalar()
        if action_id is None:
            return
        conn.execute(sa.update(m.InstanceActionEvent).where(
            m.InstanceActionEvent.action_id == action_id,
            m.InstanceActionEvent.finish_time.is_(None)).values(finish_time=now, result=result))
        if result == "Error":
            conn.execute(_ACTION_FAILED, {"b_id": action_id})
        conn.execute(_END_ACTION, {"b_id": action_id, "b_now": now})


def system_metadata(cell_db, instance_uuid):
    """{key: value} the services noted about the instance (``set_system_metadata``)."""
    with cell_db.reader() as conn:
        return dict(conn.execute(sa.select(m.InstanceSystemMetadata.key,
                                           m.InstanceSystemMetadata.value).where(
            m.InstanceSystemMetadata.instance_uuid == instance_uuid)).all())


def set_system_metadata(cell_db, instance_uuid, **values):
    """Note ``values`` about the instance; a value of None removes its key."""
    sm = m.InstanceSystemMetadata
    with cell_db.connection(write=True) as conn:
        conn.execute(sa.delete(sm).where(sm.instance_uuid == instance_uuid,
                                         sm.key.in_(list(values))))
        insert_rows(conn, sm, [{"instance_uuid": instance_uuid, "key": k, "value": str(v)}
                               for k, v in values.items() if v is not None])


def add_fault(cell_db, instance_uuid, exc, host=None, code=500):
    """Record why a server went wrong, as the reference's instance fault."""
    code = getattr(exc, "code", code) if isinstance(getattr(exc, "code", None), int) else code
    message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    details = "".join(tb_mod.format_exception(exc)) if code >= 500 else ""
    with cell_db.session(write=True) as s:
        s.add(m.InstanceFault(instance_uuid=instance_uuid, code=code,
                              message=message[:255], details=details, host=host))


def flavor_of(instance, which="cur"):
    """The flavor document ('cur', 'old' or 'new') stored with the instance."""
    if instance.extra is None or not instance.extra.flavor:
        return None
    return json.loads(instance.extra.flavor).get(which)


def flavors(cell_db, instance_uuid):
    """{"cur", "old", "new"} flavors stored with the instance."""
    with cell_db.session() as s:
        extra = s.scalars(sa.select(m.InstanceExtra).where(
            m.InstanceExtra.instance_uuid == instance_uuid)).first()
        return _flavors(extra)


def flavors_of(instance):
    """``flavors`` from an instance row read with its extra (no statement)."""
    return _flavors(instance.extra)


def _flavors(extra):
    doc = json.loads(extra.flavor) if extra is not None and extra.flavor else {}
    return {"cur": doc.get("cur"), "old": doc.get("old"), "new": doc.get("new")}


def flavor_doc(cur, old=None, new=None):
    """instance_extra.flavor as it stores the flavors (``set_flavors`` writes it with
    the size columns; a claim that leaves those as they are writes it with its own)."""
    return json.dumps({"cur": cur, "old": old, "new": new})


def set_flavors(cell_db, instance_uuid, cur, old=None, new=None, row=None, **instance_values):
    """Store the flavors; the instance's size columns follow ``cur``.

    ``row``: the instance as the caller read it (with its extra), given the same
    values so that it says what the database now holds; returned (None when it
    could not be: the caller reads the row again).
    """
    values = dict(vcpus=cur.get("vcpus", 0), memory_mb=cur.get("memory_mb", 0),
                  root_gb=cur.get("root_gb", 0), ephemeral_gb=cur.get("ephemeral_gb", 0),
                  updated_at=utcnow())
    if cur.get("id") is not None:
        values["instance_type_id"] = cur["id"]
    values.update(instance_values)
    doc = flavor_doc(cur, old, new)
    # Core UPDATEs by key: the instance row need not be read to be written.
    with cell_db.connection(write=True) as conn:
        if not conn.execute(sa.update(m.Instance).where(
                m.Instance.uuid == instance_uuid, m.Instance.deleted == 0)
                .values(**values)).rowcount:
            raise InstanceNotFound(f"Instance {instance_uuid} could not be found.")
        if not conn.execute(_SET_FLAVOR, {"b_uuid": instance_uuid, "b_flavor": doc}).rowcount:
            insert_row(conn, m.InstanceExtra, {"instance_uuid": instance_uuid, "flavor": doc})
            row = None  # its extra was not there: the caller reads the row again
    if row is not None and row.extra is not None:
        for column, value in values.items():
            setattr(row, column, value)
        row.extra.flavor = doc
        return row
    return None


_SET_FLAVOR = sa.update(m.InstanceExtra).where(
    m.InstanceExtra.instance_uuid == sa.bindparam("b_uuid")).values(
    flavor=sa.bindparam("b_flavor"))
