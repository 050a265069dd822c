from novella.scheduler.filters import BaseHostFilter


class AvailabilityZoneFilter(BaseHostFilter):
    """Only hosts in the requested zone: an aggregate's availability_zone, else the default zone."""

    def applies(self, spec):
        return bool(spec.get("availability_zone"))

    def host_passes(self, host_state, spec):
        az = spec.get("availability_zone")
        if not az:
            return True
        az = az.split(":", 1)[0]  # "zone:host[:node]" forms name the zone first
        zones = host_state.metadata_values("availability_zone")
        if not zones:
            zones = {self.conf.default_availability_zone}
        return az in zones
