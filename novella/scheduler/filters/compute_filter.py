from novella.scheduler.filters import BaseHostFilter


class ComputeFilter(BaseHostFilter):
    """Only hosts whose compute service is enabled, not forced down and up."""

    def host_passes(self, host_state, spec):
        service = host_state.service
        return not service["disabled"] and not service["forced_down"] and service["up"]

    def filter_all(self, hosts, spec):
        if type(self).host_passes is not ComputeFilter.host_passes:
            return super().filter_all(hosts, spec)
        # host_passes of each host, in one pass
        return [h for h in hosts
                if not (s := h.service)["disabled"] and not s["forced_down"] and s["up"]]
