from oslo_config import cfg

scheduler_opts = [
    cfg.IntOpt("max_attempts", default=3, min=1,
               help="Hosts tried for one build or move: the selected one plus alternates."),
    cfg.IntOpt("max_placement_results", default=1000, min=1,
               help="The 'limit' of the allocation-candidates query."),
    cfg.IntOpt("discover_hosts_in_cells_interval", default=-1, min=-1,
               help="Seconds between the scheduler's mappings of new compute hosts to "
                    "their cells (as cell_v2 discover_hosts); 0: the default period "
                    "(60 s); negative: never."),
    cfg.BoolOpt("limit_tenants_to_placement_aggregate", default=False,
                help="Restrict a tenant to the placement aggregates whose host "
                     "aggregate metadata names it in a filter_tenant_id* key."),
    cfg.BoolOpt("placement_aggregate_required_for_tenants", default=False,
                help="With limit_tenants_to_placement_aggregate: a tenant named "
                     "by no aggregate gets no host at all."),
    cfg.BoolOpt("query_placement_for_availability_zone", default=False,
                help="Ask placement for the hosts of the requested zone "
                     "(member_of the zone's aggregates), instead of relying on "
                     "AvailabilityZoneFilter alone. Needs host aggregates "
                     "mirrored into placement aggregates."),
]
filter_scheduler_opts = [
    cfg.ListOpt("enabled_filters", default=[
        "ComputeFilter", "AvailabilityZoneFilter", "ComputeCapabilitiesFilter",
        "ImagePropertiesFilter", "ServerGroupAntiAffinityFilter",
        "ServerGroupAffinityFilter"],
        help="Filter plugin class names, run in this order."),
    cfg.ListOpt("weight_classes", default=["all"],
                help="Weigher plugin class names; 'all' enables every weigher."),
    cfg.IntOpt("host_subset_size", default=1, min=1,
               help="Pick at random among this many best-weighed hosts."),
    cfg.FloatOpt("ram_weight_multiplier", default=1.0,
                 help="Weight of free RAM (negative: stack instead of spread)."),
    cfg.FloatOpt("cpu_weight_multiplier", default=1.0,
                 help="Weight of free VCPUs (negative: stack instead of spread)."),
    cfg.FloatOpt("disk_weight_multiplier", default=1.0,
                 help="Weight of free disk (negative: stack instead of spread)."),
    cfg.FloatOpt("build_failure_weight_multiplier", default=1000000.0,
                 help="Weight against hosts by their count of recent build failures."),
    cfg.FloatOpt("soft_affinity_weight_multiplier", default=1.0, min=0.0,
                 help="Weight towards hosts with members of a soft-affinity group."),
    cfg.FloatOpt("soft_anti_affinity_weight_multiplier", default=1.0, min=0.0,
                 help="Weight against hosts with members of a soft-anti-affinity group."),
    cfg.FloatOpt("cross_cell_move_weight_multiplier", default=1000000.0,
                 help="Weight towards hosts in the server's own cell during a move that "
                      "may cross cells (negative: towards other cells)."),
]


def register_opts(conf):
    conf.register_opts(scheduler_opts, group="scheduler")
    conf.register_opts(filter_scheduler_opts, group="filter_scheduler")
