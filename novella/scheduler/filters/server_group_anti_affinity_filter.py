from novella.scheduler.filters import BaseHostFilter


class ServerGroupAntiAffinityFilter(BaseHostFilter):
    """An ``anti-affinity`` group keeps its members on distinct hosts, or at most
    ``rules.max_server_per_host`` of them on one host."""

    def applies(self, spec):
        return (spec.get("instance_group") or {}).get("policy") == "anti-affinity"

    def host_passes(self, host_state, spec):
        group = spec.get("instance_group") or {}
        if group.get("policy") != "anti-affinity":
            return True
        limit = int((group.get("rules") or {}).get("max_server_per_host", 1))
        on_host = sum(1 for h in group.get("hosts") or [] if h == host_state.host)
        return on_host < limit
