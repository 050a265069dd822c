from novella.scheduler.weighers import BaseHostWeigher


class CPUWeigher(BaseHostWeigher):
    """More free vCPUs is better (spread); a negative multiplier stacks."""
    multiplier_option = "cpu_weight_multiplier"

    def weigh(self, host_state, spec):
        return host_state.free_vcpus
