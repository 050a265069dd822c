"""A delete at every step boundary of a cross-cell resize, confirm and revert frees
everything, in both cells (the harness of tests/functional/moves/test_delete_races.py)."""
import pytest
import sqlalchemy as sa

from novella.db import cell_models as cm
from novella.db import cells as cells_mod
from tests.functional.cross_cell import test_crash_recovery as cross_cell
from tests.functional.moves import test_delete_races as races


@pytest.mark.parametrize("operation", sorted(cross_cell.OPERATIONS))
def test_a_delete_at_any_step_boundary_of_a_cross_cell_move_frees_everything(
        xcloud, monkeypatch, operation):
    seen = []
    real = races.assert_gone

    def gone_in_every_cell(cloud, sid, where):
        real(cloud, sid, where)
        for cell in cloud.aio.cells:  # no copy of the server lives on in either cell
            with cells_mod.cell_database(cell).read_session() as s:
                live = s.scalars(sa.select(cm.Instance.uuid).where(
                    cm.Instance.uuid == sid, cm.Instance.deleted == 0)).all()
            assert not live, (where, cell.name)
        seen.append(where)

    monkeypatch.setattr(races, "assert_gone", gone_in_every_cell)
    races.delete_at_every_boundary(xcloud, monkeypatch, operation, cross_cell.OPERATIONS)
    assert len(seen) >= 2
