"""The conductor dies at every step boundary of a cross-cell resize, confirm and
revert; a fresh one finishes each forward or back with exact books (the
harness of tests/functional/moves/test_crash_recovery.py, across two cells)."""
import pytest

from tests.functional.moves import test_crash_recovery as harness


def _resized(cloud, crash, sid):
    assert harness._resize(cloud, sid)[0] == 202
    crash.wait(cloud)
    assert cloud.server(sid)["status"] == "VERIFY_RESIZE"
    assert cloud.migrations(sid)[0]["dest_compute"] != cloud.migrations(sid)[0]["source_compute"]


OPERATIONS = harness.cases(cross_cell=True, requests=dict(
    harness.REQUESTS,
    confirmResize=(_resized, lambda cloud, sid: cloud.action(sid, {"confirmResize": None})),
    revertResize=(_resized, lambda cloud, sid: cloud.action(sid, {"revertResize": None}))))


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_a_conductor_dying_in_a_cross_cell_move_leaves_exact_books(xcloud, monkeypatch,
                                                                   operation):
    crash = harness.arm_crashes(xcloud, monkeypatch)
    harness.crash_at_every_boundary(xcloud, crash, operation, OPERATIONS)


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_a_cross_cell_request_whose_cast_died_with_the_process_is_settled(xcloud, monkeypatch,
                                                                          operation):
    harness.cast_lost(xcloud, harness.arm_crashes(xcloud, monkeypatch), operation, OPERATIONS)
