"""A delete arriving at every step boundary of every move frees everything.

The harness of test_crash_recovery.py learns each operation's step
boundaries from a clean run; here, at each boundary, the conductor's thread
stops while the user's DELETE is accepted and the host has acted on it,
then the move goes on. Whichever way the move ends, the books must be empty:
the server gone, no allocation held by it or its migration, every provider
at zero, the migration in a final status, no guest or resize copy on any
host.
"""
import os

import pytest

from tests.functional.moves import test_crash_recovery as harness

FINAL = harness.FINAL_MIGRATION


class DeleteAt(harness.Crash):
    """At the armed boundary the server is deleted (and its host has acted), then the
    conductor carries on."""

    def __init__(self, cloud):
        super().__init__()
        self.cloud = cloud
        self.deleted = None

    def _die(self):
        self.at = None
        self.deleted = self.cloud.api("DELETE", f"/servers/{self.server_id}")[0]
        self.cloud.aio.wait_idle()
        self.reached.set()

    def arm(self, server, at):
        super().arm(server, at)
        self.server_id = server


def assert_gone(cloud, sid, where):
    assert cloud.api("GET", f"/servers/{sid}")[0] == 404, where
    migrations = cloud.migrations(sid)
    for consumer in [sid] + [m["uuid"] for m in migrations]:
        assert cloud.allocations(consumer) == {}, (where, consumer)
    assert all(not any(used.values()) for used in cloud.usages().values()), \
        (where, cloud.usages())
    assert {m["status"] for m in migrations} <= FINAL, (where, migrations)
    root = next(iter(cloud.aio.computes.values())).driver.root
    left = [(host, name) for host in cloud.aio.computes for name in (sid, sid + "_resize")
            if os.path.exists(os.path.join(root, host, name))]
    assert not left, (where, left)


def delete_at_every_boundary(cloud, monkeypatch, operation, operations):
    crash = DeleteAt(cloud)
    real = harness.TaskList._boundary
    monkeypatch.setattr(harness.TaskList, "_boundary",
                        lambda tasks, index, task, status: crash.boundary(real, tasks, index,
                                                                          task, status))
    for name in harness.CONDUCTOR_METHODS:
        monkeypatch.setattr(cloud.aio.conductor, name,
                            crash.detached(getattr(cloud.aio.conductor, name)))
    sid, _source, _ = harness._start(cloud, crash, operation, operations=operations)
    crash.wait(cloud)
    cloud.aio.wait_idle()
    harness._delete_and_check_empty(cloud, crash, sid)
    points = sorted({(index, name, status) for index, name, status in crash.boundaries
                     if status in ("started", "done")})
    assert len(points) >= 2, points
    for index, name, status in points:
        sid, _source, _ = harness._start(cloud, crash, operation, at=(index, status),
                                         operations=operations)
        crash.wait(cloud)
        assert crash.reached.is_set(), f"{operation}: never reached {name} {status}"
        assert crash.deleted == 204, (operation, name, status, crash.deleted)
        for thread in crash.threads:
            thread.join(30)
        cloud.aio.wait_idle()
        harness._hosts_back_up(cloud)
        cloud.aio.wait_idle()
        assert_gone(cloud, sid, (operation, name, status))


@pytest.mark.parametrize("operation", harness.MOVES)
def test_a_delete_at_any_step_boundary_of_a_move_frees_everything(cloud, monkeypatch,
                                                                  operation):
    delete_at_every_boundary(cloud, monkeypatch, operation, harness.OPERATIONS)
