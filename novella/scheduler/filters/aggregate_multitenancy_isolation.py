from novella.scheduler.filters import BaseHostFilter

KEY_PREFIX = "filter_tenant_id"


class AggregateMultiTenancyIsolation(BaseHostFilter):
    """A host in aggregates naming tenants (``filter_tenant_id*``) takes only those tenants."""

    def host_passes(self, host_state, spec):
        allowed = set()
        for agg in host_state.aggregates:
            for key, value in agg["metadata"].items():
                if key.startswith(KEY_PREFIX):
                    allowed.update(v.strip() for v in value.split(","))
        return not allowed or spec.get("project_id") in allowed
