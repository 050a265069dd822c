from novella.scheduler.filters import BaseHostFilter


class ComputeFilter(BaseHostFilter):
    """Only hosts whose compute service is enabled, not forced down and up."""

    def host_passes(self, host_state, spec):
        service = host_state.service
        return not service["disabled"] and not service["forced_down"] and service["up"]
