"""The journal saves an operation's state strictly as JSON; the declarations it is
read back by are consistent. (Every operation's state coming back equal after a
recovery is checked at each step boundary of the crash harness,
tests/functional/moves/test_crash_recovery.py.)"""
import datetime
import json
import uuid

import pytest

from novella.conductor import journal, operations
from novella.conductor.tasks.common import Recorded
from novella.context import RequestContext


class State:
    def __init__(self, **values):
        self.values = values

    def record(self):
        return dict(self.values)


@pytest.mark.parametrize("value", [datetime.datetime(2024, 1, 2, 3, 4, 5), uuid.uuid4(),
                                   {"a", "b"}, object()])
def test_a_value_json_cannot_hold_is_refused_as_it_is_saved_naming_its_key(value):
    state = State(host="h1", made=value)
    record = journal.Journal(None, "me", 60, operations.RESIZE, "server",
                             RequestContext(), state)
    with pytest.raises(TypeError, match="'made'"):
        record.step(0, "MigrationRecord", journal.STARTED)


def test_json_values_come_back_equal():
    saved = {"migration": {"uuid": str(uuid.uuid4()), "created_at": "2024-01-02T03:04:05"},
             "host_list": [{"service_host": "h1", "limits": {}}], "moved": False, "n": 1}
    assert json.loads(journal.encode(saved)) == saved


def test_every_operation_is_declared_once_with_a_recorded_state():
    assert len(operations.OPERATIONS) == len({op.name for op in operations.OPERATIONS.values()})
    for name, op in operations.OPERATIONS.items():
        assert op.name == name
        assert issubclass(op.state, Recorded), name
        assert op.recovery in (operations.BACK, operations.FORWARD), name
        assert op.actions and all(isinstance(a, str) for a in op.actions.values()), name
        assert operations.named(name) is op


@pytest.mark.parametrize("name", sorted(n for n, op in operations.OPERATIONS.items()
                                        if op.migration_statuses))
def test_a_request_recorded_in_a_migration_is_carried_out_by_its_operation(name):
    op = operations.OPERATIONS[name]
    for migration_type in op.migration_types or ("resize", "migration"):
        for status in op.migration_statuses:
            assert operations.of_migration({
                "status": status, "migration_type": migration_type,
                "cross_cell_move": op.cross_cell}) is op


@pytest.mark.parametrize("former", sorted(operations.ALIASES))
def test_a_row_journaled_under_a_former_name_is_read_as_its_operation(former):
    op = operations.named(former)
    assert op is operations.OPERATIONS[operations.ALIASES[former]]
    assert former in operations.kinds_of(op.request)
