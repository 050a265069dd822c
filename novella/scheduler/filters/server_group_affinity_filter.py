from novella.scheduler.filters import BaseHostFilter


class ServerGroupAffinityFilter(BaseHostFilter):
    """An ``affinity`` group's members all go to the host its first member is on."""

    def applies(self, spec):
        group = spec.get("instance_group") or {}
        return group.get("policy") == "affinity" and bool(group.get("hosts"))

    def host_passes(self, host_state, spec):
        group = spec.get("instance_group") or {}
        if group.get("policy") != "affinity" or not group.get("hosts"):
            return True
        return host_state.host in group["hosts"]
