from novella.scheduler.weighers import BaseHostWeigher


class DiskWeigher(BaseHostWeigher):
    """More free local disk is better (spread); a negative multiplier stacks."""
    multiplier_option = "disk_weight_multiplier"

    def weigh(self, host_state, spec):
        return host_state.free_disk_mb
