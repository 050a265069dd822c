"""A host dies before any effect of a cross-cell resize (the source's snapshot, the
destination's spawn...); the conductor undoes the move, the host takes its part
when it starts again, and the books are exact (the harness of
tests/functional/moves/test_compute_crash_recovery.py, across two cells)."""
from tests.functional.moves import test_compute_crash_recovery as host


def test_a_host_dying_inside_a_cross_cell_resize_is_undone_and_reconciled(xcloud,
                                                                          monkeypatch):
    death = host.arm_host_deaths(xcloud, monkeypatch)
    before, finished, effects = host.host_dies_at_every_effect(xcloud, death, "resize")
    assert before["cell"] != finished["cell"], (before, finished)  # it crossed cells
    assert "snapshot" in effects
