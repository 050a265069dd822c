import operator

from novella.scheduler.weighers import BaseHostWeigher

_FREE_DISK = operator.attrgetter("free_disk_mb")


class DiskWeigher(BaseHostWeigher):
    """More free local disk is better (spread); a negative multiplier stacks."""
    multiplier_option = "disk_weight_multiplier"

    def weigh(self, host_state, spec):
        return host_state.free_disk_mb

    def weigh_all(self, hosts, spec):
        if type(self).weigh is not DiskWeigher.weigh:
            return super().weigh_all(hosts, spec)
        # weigh of each host, in one pass
        return list(map(float, map(_FREE_DISK, hosts)))
