"""Cross-cell moves: prefer (or, with a negative multiplier, avoid) the server's own cell."""
from novella.scheduler.weighers import BaseHostWeigher


class CrossCellWeigher(BaseHostWeigher):
    """1 for hosts in the cell the server is in, 0 elsewhere, for a move that may
    cross cells (``requested_destination.allow_cross_cell_move`` and
    ``source_cell_uuid``); 0 for every host otherwise."""
    multiplier_option = "cross_cell_move_weight_multiplier"

    def applies(self, spec):
        dest = spec.get("requested_destination") or {}
        return bool(dest.get("allow_cross_cell_move") and dest.get("source_cell_uuid"))

    def weigh(self, host_state, spec):
        dest = spec.get("requested_destination") or {}
        source = dest.get("source_cell_uuid")
        if not dest.get("allow_cross_cell_move") or not source:
            return 0
        return 1 if host_state.cell_uuid == source else 0
