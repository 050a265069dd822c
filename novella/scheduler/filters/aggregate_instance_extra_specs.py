from novella.scheduler.filters import BaseHostFilter, _ops

SCOPE = "aggregate_instance_extra_specs"


class AggregateInstanceExtraSpecsFilter(BaseHostFilter):
    """Flavor extra specs (unscoped or ``aggregate_instance_extra_specs:``) must
    match the metadata of one of the host's aggregates."""

    def applies(self, spec):
        extra = (spec.get("flavor") or {}).get("extra_specs") or {}
        return any(":" not in key or key.startswith(SCOPE + ":") for key in extra)

    def host_passes(self, host_state, spec):
        extra = (spec.get("flavor") or {}).get("extra_specs") or {}
        for key, req in extra.items():
            scope, _, name = key.partition(":")
            if name and scope != SCOPE:
                continue  # another filter's or placement's key
            name = name or scope
            values = host_state.metadata_values(name)
            if not values or not any(_ops.match(v, req) for v in values):
                return False
        return True
