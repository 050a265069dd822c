"""The one way a compute host runs a step on an instance.

    with steps.step(self, ctxt, uuid, "compute_resize_instance", notifications.RESIZE,
                    flavor=new_flavor) as st:
        ... st.instance ...      # the row as read under the lock
        st.instance = updated    # what the .end notification reports

With ``migration_uuid`` the move's migration is read with the row, in the same
statement, as ``st.migration`` (MigrationNotFound, when it is not there, is
raised in the body that asks for it, as a read of its own there would).

Under the instance's lock the step records its action event and sends the
notifications of its action (novella/rpc/notifications.py): ``.start``,
then ``.end`` (or ``.error`` when the action has one). A step of a move is
driven by the conductor, which records faults and finishes the instance
action. A step that is a whole user action on this host (``standalone=True``:
stop, start, reboot, delete, shelve, volume attach and detach) does that
itself: on failure a fault, the task state cleared (or ``error_vm_state``
set); in every case the instance action finished.

A step that fails sends ``compute.exception`` last (an ExceptionPayload,
from this host), as the reference's compute manager methods do, unless its
exception says the operation was stopped on purpose (``expected = True``,
e.g. an aborted live migration).
"""
import contextlib
import logging

from novella.db import migration_records
from novella.db import records
from novella.rpc import notifications
from novella.rpc import notifier as notifier_mod
from novella.compute import guest

LOG = logging.getLogger(__name__)


class Step:
    """What the body of a step sees and hands back: the instance row (and the
    move's migration, as a dict)."""

    def __init__(self, instance, migration_uuid=None, migration=None):
        self._instance = instance
        self._migration_uuid, self._migration = migration_uuid, migration
        self.replaced = False  # the body said what the row is now

    @property
    def migration(self):
        if self._migration is None:
            raise migration_records.not_found(self._migration_uuid)
        return self._migration

    @property
    def instance(self):
        return self._instance

    @instance.setter
    def instance(self, row):
        self._instance = row
        self.replaced = True


class MigrationNotReady(Exception):
    """The step's migration is not in a status it starts from: nothing was done."""
    expected = True

    def __init__(self, status):
        self.status = status
        super().__init__(f"the migration is {status}")


@contextlib.contextmanager
def step(compute, ctxt, instance_uuid, event, notification=None, flavor=None,
         standalone=False, error_vm_state=None, error_as=None, end_always=False,
         migration_uuid=None, migration_in=None, **payload_extra):
    """``notification``: an action of novella/rpc/notifications.py;
    ``flavor``: the payload's flavor, or a function of the row read under the lock
    that gives it;
    ``error_as``/``end_always`` as for ``notifications.action``;
    ``migration_uuid``: the move's migration, read with the row (``Step.migration``);
    ``migration_in``: the statuses it may be in for the step to start; in any other
    (or missing) ``MigrationNotReady`` is raised before anything is recorded;
    ``payload_extra``: fields particular to the action's payload class."""
    try:
        with _step(compute, ctxt, instance_uuid, event, notification, flavor, standalone,
                   error_vm_state, error_as, end_always, migration_uuid, migration_in,
                   payload_extra) as st:
            yield st
    except Exception as exc:
        if not getattr(exc, "expected", False):
            _tell_exception(compute, ctxt, exc)
        raise


def _tell_exception(compute, ctxt, exc):
    """compute.exception from this host; a notification never breaks a step."""
    if compute.notifier is None:
        return
    try:
        compute.notifier(ctxt, compute.publisher_id, notifications.COMPUTE_EXCEPTION,
                         notifier_mod.exception_payload(exc))
    except Exception:  # noqa: BLE001
        LOG.exception("could not send %s", notifications.COMPUTE_EXCEPTION)


@contextlib.contextmanager
def _step(compute, ctxt, instance_uuid, event, notification, flavor, standalone,
          error_vm_state, error_as, end_always, migration_uuid, migration_in, payload_extra):
    with guest.locked(compute, instance_uuid):
        if migration_uuid is None:
            read, migration = guest.get(compute, instance_uuid), None
        else:
            with compute.cell_db.read_session() as s:
                read, migration = migration_records.instance_and_migration(
                    s, instance_uuid, migration_uuid)
            if migration_in is not None and (migration or {}).get("status") not in migration_in:
                raise MigrationNotReady((migration or {}).get("status"))
        if callable(flavor):  # the flavor the row, as read under the lock, says
            flavor = flavor(read)
        st = Step(read, migration_uuid, migration)
        failed = []

        def send(event_type, fault=None):
            if event_type.endswith(".start"):
                row = read
            elif failed or st.replaced:
                row = st.instance
            else:  # the row as the body left it
                row = guest.get(compute, instance_uuid)
            guest.notify(compute, ctxt, row, event_type, fault=fault, flavor=flavor,
                            **payload_extra)

        with records.action_event(compute.cell_db, ctxt, instance_uuid, event,
                                  host=compute.host):
            with (notifications.action(send, notification, error_as=error_as,
                                       end_always=end_always)
                  if notification else contextlib.nullcontext()):
                try:
                    yield st
                except Exception as exc:
                    failed.append(exc)
                    if standalone:
                        _failed(compute, instance_uuid, st, exc, error_vm_state)
                    raise
        if standalone:
            records.finish_action(compute.cell_db, ctxt, instance_uuid)


def _failed(compute, instance_uuid, st, exc, error_vm_state):
    records.add_fault(compute.cell_db, instance_uuid, exc, host=compute.host)
    values = {"task_state": None}
    if error_vm_state:
        values["vm_state"] = error_vm_state
    with contextlib.suppress(records.InstanceNotFound):
        st.instance = guest.update(compute, instance_uuid, **values)
