import operator

from novella.scheduler.weighers import BaseHostWeigher

_FREE_RAM = operator.attrgetter("free_ram_mb")


class RAMWeigher(BaseHostWeigher):
    """More free RAM is better (spread); a negative multiplier stacks."""
    multiplier_option = "ram_weight_multiplier"

    def weigh(self, host_state, spec):
        return host_state.free_ram_mb

    def weigh_all(self, hosts, spec):
        if type(self).weigh is not RAMWeigher.weigh:
            return super().weigh_all(hosts, spec)
        # weigh of each host, in one pass
        return list(map(float, map(_FREE_RAM, hosts)))
