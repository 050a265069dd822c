"""The operations a compute host runs on its servers, recorded while they run.

A compute host reaches only its cell's database, so its journal lives there
(``host_operations``), shaped as the conductor's (novella/conductor/
journal.py) and written with the same rules (novella/db/journal_rows.py):
``begin`` records the operation, its kind and its state before anything
acts; ``step`` records a step started (before it acts) or done, with the
state as it then is; ``end`` removes the row, the outcome being the
server's instance action's. A host starting again lists the ``unfinished``
operations of its servers and runs each again (novella/compute/
recovery.py); each is written so that it may.

A server has at most one operation of each kind: one begun again (asked
again, or run again by a recovery) replaces the row. The kinds are the
names of the system-metadata notes these rows replaced, so a note written
before them becomes a row as it is (``adopt_notes``).
"""
import dataclasses

import sqlalchemy as sa

from novella.db import cell_models as m
from novella.db import journal_rows
from novella.db.timestamps import utcnow


@dataclasses.dataclass
class Operation:
    instance_uuid: str
    kind: str
    state: dict
    steps: list = dataclasses.field(default_factory=list)


def begin(cell_db, instance_uuid, kind, state):
    """The operation ``kind`` on the server, with ``state``, recorded (replacing one
    of that kind already there); returns it."""
    op = Operation(instance_uuid, kind, state)
    with cell_db.session(write=True) as s:
        _replace(s, op)
    return op


def step(cell_db, op, name, status):
    """Step ``name`` of ``op`` is now ``status`` (journal_rows.STARTED before it acts,
    DONE after); saved with ``op.state``."""
    op.steps = [[n, st] for n, st in op.steps if n != name] + [[name, status]]
    with cell_db.session(write=True) as s:
        s.execute(sa.update(m.HostOperation).where(
            m.HostOperation.instance_uuid == op.instance_uuid,
            m.HostOperation.kind == op.kind).values(
            steps=journal_rows.encode(op.steps), state=journal_rows.encode(op.state),
            updated_at=utcnow()))


def end(cell_db, instance_uuid, kind):
    """The server's operation ``kind`` is over (done, undone, or never to be run)."""
    with cell_db.session(write=True) as s:
        s.execute(sa.delete(m.HostOperation).where(m.HostOperation.instance_uuid == instance_uuid,
                                                   m.HostOperation.kind == kind))


def of_server(cell_db, instance_uuid):
    """{kind: Operation} of the server's unfinished operations."""
    with cell_db.read_session() as s:
        rows = s.scalars(sa.select(m.HostOperation).where(
            m.HostOperation.instance_uuid == instance_uuid)).all()
        return {row.kind: _operation(row) for row in rows}


def unfinished(cell_db, host):
    """The unfinished operations of the servers on ``host``, oldest first."""
    with cell_db.read_session() as s:
        rows = s.scalars(sa.select(m.HostOperation).join(
            m.Instance, m.Instance.uuid == m.HostOperation.instance_uuid).where(
            m.Instance.host == host, m.Instance.deleted == 0)
            .order_by(m.HostOperation.id)).all()
        return [_operation(row) for row in rows]


def adopt_notes(cell_db, host, readers):
    """The system-metadata notes of the servers on ``host`` named in ``readers``
    ({note name: its value -> the operation's state}) made rows of that kind, each
    note removed in the same transaction. Returns the operations."""
    sm = m.InstanceSystemMetadata
    adopted = []
    with cell_db.session(write=True) as s:
        notes = s.execute(sa.select(sm.instance_uuid, sm.key, sm.value).join(
            m.Instance, m.Instance.uuid == sm.instance_uuid).where(
            m.Instance.host == host, m.Instance.deleted == 0,
            sm.key.in_(list(readers)))).all()
        for uuid, key, value in notes:
            op = Operation(uuid, key, readers[key](value))
            _replace(s, op)
            s.execute(sa.delete(sm).where(sm.instance_uuid == uuid, sm.key == key))
            adopted.append(op)
    return adopted


def _replace(session, op):
    session.execute(sa.delete(m.HostOperation).where(
        m.HostOperation.instance_uuid == op.instance_uuid, m.HostOperation.kind == op.kind))
    session.add(m.HostOperation(instance_uuid=op.instance_uuid, kind=op.kind,
                                steps=journal_rows.encode(op.steps),
                                state=journal_rows.encode(op.state)))


def _operation(row):
    return Operation(row.instance_uuid, row.kind, journal_rows.decode(row.state),
                     journal_rows.decode(row.steps))
