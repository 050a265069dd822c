import operator

from novella.scheduler.weighers import BaseHostWeigher

_FAILED = operator.attrgetter("failed_builds")


class BuildFailureWeigher(BaseHostWeigher):
    """Hosts whose recent builds failed go last, until they build one successfully."""
    multiplier_option = "build_failure_weight_multiplier"

    def weigh(self, host_state, spec):
        return -host_state.failed_builds

    def weigh_all(self, hosts, spec):
        if type(self).weigh is not BuildFailureWeigher.weigh:
            return super().weigh_all(hosts, spec)
        if not any(map(_FAILED, hosts)):
            return None  # no recent failure anywhere: every host weighs 0
        # weigh of each host, in one pass
        return list(map(float, map(operator.neg, map(_FAILED, hosts))))
