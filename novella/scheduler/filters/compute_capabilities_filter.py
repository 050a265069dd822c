from novella.scheduler.filters import BaseHostFilter, _ops

SCOPE = "capabilities"


def _lookup(host_state, path):
    """host_state attribute, then keys into dicts: ``cpu_info:arch``."""
    value = getattr(host_state, path[0], None)
    for key in path[1:]:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


class ComputeCapabilitiesFilter(BaseHostFilter):
    """Flavor extra specs ``capabilities:<attr>[:<key>...]`` must match the host."""

    def applies(self, spec):
        extra = (spec.get("flavor") or {}).get("extra_specs") or {}
        return any(key.startswith(SCOPE + ":") for key in extra)

    def host_passes(self, host_state, spec):
        extra = (spec.get("flavor") or {}).get("extra_specs") or {}
        for key, req in extra.items():
            parts = key.split(":")
            if len(parts) < 2 or parts[0] != SCOPE:
                continue
            if not _ops.match(_lookup(host_state, parts[1:]), req):
                return False
        return True
