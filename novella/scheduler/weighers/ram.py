from novella.scheduler.weighers import BaseHostWeigher


class RAMWeigher(BaseHostWeigher):
    """More free RAM is better (spread); a negative multiplier stacks."""
    multiplier_option = "ram_weight_multiplier"

    def weigh(self, host_state, spec):
        return host_state.free_ram_mb
