"""Soft server-group policies: prefer (or avoid) hosts already holding members."""
from novella.scheduler.weighers import BaseHostWeigher


def _members_on_host(host_state, spec, policy):
    group = spec.get("instance_group") or {}
    if group.get("policy") != policy:
        return 0
    return sum(1 for h in group.get("hosts") or [] if h == host_state.host)


def _group_policy(spec):
    return (spec.get("instance_group") or {}).get("policy")


class ServerGroupSoftAffinityWeigher(BaseHostWeigher):
    multiplier_option = "soft_affinity_weight_multiplier"

    def applies(self, spec):
        return _group_policy(spec) == "soft-affinity"

    def weigh(self, host_state, spec):
        return _members_on_host(host_state, spec, "soft-affinity")


class ServerGroupSoftAntiAffinityWeigher(BaseHostWeigher):
    multiplier_option = "soft_anti_affinity_weight_multiplier"

    def applies(self, spec):
        return _group_policy(spec) == "soft-anti-affinity"

    def weigh(self, host_state, spec):
        return -_members_on_host(host_state, spec, "soft-anti-affinity")
