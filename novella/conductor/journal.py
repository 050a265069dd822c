"""The durable record of every conductor operation (API database ``operations``).

A TaskList given a Journal writes, before each step acts, that the step
started, and after it, that it is done together with the operation's state
(what the steps hand each other: the scheduler's choice, the snapshot, the
target cell...). Undoing writes the same way. So at any instant the
database says which steps completed and which one was in flight, and a
fresh conductor can rebuild the operation's task list and state from it.

Each running operation has one owner, a conductor, holding a lease it
renews while it lives (``[conductor] operation_lease`` seconds). A
conductor takes over an operation whose lease ran out: one conditional
UPDATE, so of several conductors exactly one wins.

An operation that begins a request the API accepted (a build, a move, a
confirm, a revert, an unshelve) is named after that request (``request_key``), not at
random: its row is the request's claim. Whichever conductor writes it first
(the one the request was cast to, or one settling the request as lost: see
ConductorManager.recover_operations) owns the request; the other's insert
fails on the unique name (``Taken``) before it has changed anything.
"""
import datetime
import json
import logging
import os
import socket
import uuid as uuid_mod

import sqlalchemy as sa

from novella.db import api_models as am
from novella.db.journal_rows import encode
from novella.db.timestamps import utcnow

LOG = logging.getLogger(__name__)

RUNNING, DONE, FAILED, UNDONE = "running", "done", "failed", "undone"
STARTED, UNDOING = "started", "undoing"

# The names of requests' operations (uuid5 of a request key under this namespace).
_REQUESTS = uuid_mod.UUID("1b0c6f1e-5d0a-4d8e-9a53-7f2f0b9c4a61")


class Taken(Exception):
    """Another conductor already began (or settled) the request this operation is for."""


def request_key(kind, *ids):
    """The operation uuid of one request: ``kind`` 'build', 'move', 'confirm', 'revert'
    or 'unshelve'; ``ids`` what the API recorded for it (the migration's uuid; for a
    build the server's; for an unshelve the server's and the request id its instance
    action carries)."""
    return str(uuid_mod.uuid5(_REQUESTS, " ".join((kind,) + tuple(ids))))


def taken(api_db, operation_uuids):
    """Those of ``operation_uuids`` that have a row (begun, or settled)."""
    if not operation_uuids:
        return set()
    with api_db.read_session() as s:
        return set(s.scalars(sa.select(am.Operation.uuid).where(
            am.Operation.uuid.in_(list(operation_uuids)))))


def conductor_id():
    """A name for this conductor process, unique across restarts."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid_mod.uuid4().hex[:8]}"


class Journal:
    """The record of one operation; written by its TaskList at each step boundary."""

    def __init__(self, api_db, owner, lease_seconds, kind, instance_uuid, ctxt, state,
                 operation_uuid=None, steps=None):
        self.api_db = api_db
        self.owner = owner
        self.lease = datetime.timedelta(seconds=lease_seconds)
        self.kind = kind
        self.instance_uuid = instance_uuid
        self.ctxt = ctxt
        self.state = state          # the operation's state object (has .record())
        self.uuid = operation_uuid
        self.steps = list(steps or [])
        self._inserted = operation_uuid is not None  # the row exists (a recovered operation)
        self._pending = False       # a step's end not yet written (see step())
        self._written = None        # the steps and state last written

    def begin(self, key=None):
        """Name the operation (``key``: the request's, from ``request_key``); its row is
        written with its first step boundary (the first record-before-act point:
        nothing acts between the two), or by ``claim``."""
        self.uuid = key or str(uuid_mod.uuid4())
        return self

    def claim(self, first_step, done=()):
        """Write the row now, its first step (``first_step``, a name; None: no step)
        started: the request is this conductor's. Raises ``Taken`` (nothing written)
        when the row exists: another conductor began or settled the request.
        ``done``: the names of the steps before it, which change nothing when they
        run (``Task.acts``): recorded done in the same row, as their boundaries
        would write them."""
        if first_step is None:
            self._write(steps=encode(self.steps), state=encode(self.state.record()))
        else:
            self.steps = [[name, DONE] for name in done]
            self.step(len(self.steps), first_step, STARTED)
        return self

    # -- step boundaries (called by TaskList) -------------------------------------------

    def step(self, index, name, status, write=True):
        """Step ``index`` (``name``) is now ``status``; the state is saved with it.

        A step done is written with the next boundary, which comes before
        anything else acts (the next step's start, the end, a release): one
        statement records both, and a death between the two leaves the step
        recorded as started, as a death just before its record would (a case
        the crash harness covers at every step). Every other status is
        written at once: a start before the step acts, and a failure or an
        undo as it happens, since recovery reads them. ``write=False``: the start of
        a step that changes nothing (``Task.acts``), written with the next boundary
        as a step's end is.
        """
        if index < len(self.steps):
            self.steps[index] = [name, status]
        else:
            self.steps.append([name, status])
        if status == DONE or not write:
            self._pending = True
            return
        self._write(steps=encode(self.steps), state=encode(self.state.record()))

    def release(self):
        """Give the running operation up at once, for another turn of recovery."""
        self._write(steps=encode(self.steps), state=encode(self.state.record()),
                    lease_until=utcnow() - datetime.timedelta(seconds=1))

    def end(self, status):
        self._write(status=status, steps=encode(self.steps), state=encode(self.state.record()),
                    lease_until=None)

    def _write(self, **values):
        record = dict(values)
        if record == self._written and "lease_until" not in record:
            # What the row says already: the same boundary again (a step restarted
            # with nothing new), or boundaries the claim wrote ahead (``claim``).
            self._pending = False
            return
        now = utcnow()
        values.setdefault("lease_until", now + self.lease)
        if self._inserted:
            with self.api_db.session(write=True) as s:
                s.execute(sa.update(am.Operation).where(am.Operation.uuid == self.uuid)
                          .values(updated_at=now, **values))
        else:
            try:
                with self.api_db.session(write=True) as s:
                    s.execute(sa.insert(am.Operation).values(
                        uuid=self.uuid, kind=self.kind, instance_uuid=self.instance_uuid,
                        owner=self.owner, status=values.pop("status", RUNNING),
                        context=encode(self.ctxt.to_dict()), created_at=now, updated_at=now,
                        **values))
            except sa.exc.IntegrityError:  # the unique name: a request's claim (see above)
                raise Taken(f"operation {self.uuid} ({self.kind} of {self.instance_uuid}) "
                            "was begun by another conductor") from None
            self._inserted = True
        self._written, self._pending = record, False


def renew_leases(api_db, owner, lease_seconds):
    """Every running operation of ``owner`` keeps its lease (the owner lives)."""
    with api_db.session(write=True) as s:
        return s.execute(sa.update(am.Operation).where(
            am.Operation.owner == owner, am.Operation.status == RUNNING).values(
            lease_until=utcnow() + datetime.timedelta(seconds=lease_seconds))).rowcount


def expire_others(api_db, owner):
    """End the leases of every other owner's running operations (known dead)."""
    with api_db.session(write=True) as s:
        s.execute(sa.update(am.Operation).where(
            am.Operation.status == RUNNING, am.Operation.owner != owner).values(
            lease_until=utcnow() - datetime.timedelta(seconds=1)))


def orphans(api_db):
    """Running operations whose owner's lease ran out, oldest first."""
    with api_db.read_session() as s:
        return list(s.scalars(sa.select(am.Operation.uuid).where(
            am.Operation.status == RUNNING, am.Operation.lease_until < utcnow())
            .order_by(am.Operation.id)))


def take_over(api_db, operation_uuid, owner, lease_seconds):
    """Own the orphan ``operation_uuid``; its row as a dict, or None if another did first."""
    now = utcnow()
    with api_db.session(write=True) as s:
        taken = s.execute(sa.update(am.Operation).where(
            am.Operation.uuid == operation_uuid, am.Operation.status == RUNNING,
            am.Operation.lease_until < now).values(
            owner=owner, lease_until=now + datetime.timedelta(seconds=lease_seconds),
            updated_at=now)).rowcount
        if not taken:
            return None
        return _operation(s, operation_uuid)


def load(api_db, operation_uuid):
    """The row of ``operation_uuid`` as ``take_over`` gives it (its owner's own)."""
    with api_db.read_session() as s:
        return _operation(s, operation_uuid)


def _operation(session, operation_uuid):
    row = session.scalars(sa.select(am.Operation).where(
        am.Operation.uuid == operation_uuid)).one()
    return {"uuid": row.uuid, "kind": row.kind, "instance_uuid": row.instance_uuid,
            "steps": json.loads(row.steps), "state": json.loads(row.state),
            "context": json.loads(row.context)}


def running_for(api_db, instance_uuid):
    """The uuids of the running operations of a server."""
    with api_db.read_session() as s:
        return list(s.scalars(sa.select(am.Operation.uuid).where(
            am.Operation.instance_uuid == instance_uuid, am.Operation.status == RUNNING)))
