from novella.scheduler.weighers import BaseHostWeigher


class BuildFailureWeigher(BaseHostWeigher):
    """Hosts whose recent builds failed go last, until they build one successfully."""
    multiplier_option = "build_failure_weight_multiplier"

    def weigh(self, host_state, spec):
        return -host_state.failed_builds
