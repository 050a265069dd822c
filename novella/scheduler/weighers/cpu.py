from novella.scheduler.weighers import BaseHostWeigher


class CPUWeigher(BaseHostWeigher):
    """More free vCPUs is better (spread); a negative multiplier stacks."""
    multiplier_option = "cpu_weight_multiplier"

    def weigh(self, host_state, spec):
        return host_state.free_vcpus

    def weigh_all(self, hosts, spec):
        if type(self).weigh is not CPUWeigher.weigh:
            return super().weigh_all(hosts, spec)
        # free_vcpus of each host, as weigh reads it, in one pass
        return [float(h.vcpus_total * h.cpu_allocation_ratio - h.vcpus_used) for h in hosts]
