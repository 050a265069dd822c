from oslo_config import cfg

scheduler_opts = [
    cfg.IntOpt("max_attempts", default=3, min=1,
               help="Hosts tried for one build or move: the selected one plus alternates."),
    cfg.IntOpt("max_placement_results", default=1000, min=1),
    cfg.IntOpt("discover_hosts_in_cells_interval", default=-1, min=-1),
]
filter_scheduler_opts = [
    cfg.ListOpt("enabled_filters", default=[
        "ComputeFilter", "AvailabilityZoneFilter", "ComputeCapabilitiesFilter",
        "ImagePropertiesFilter", "ServerGroupAntiAffinityFilter",
        "ServerGroupAffinityFilter"]),
    cfg.ListOpt("weight_classes", default=["all"]),
    cfg.IntOpt("host_subset_size", default=1, min=1),
    cfg.FloatOpt("ram_weight_multiplier", default=1.0),
    cfg.FloatOpt("cpu_weight_multiplier", default=1.0),
    cfg.FloatOpt("disk_weight_multiplier", default=1.0),
    cfg.FloatOpt("io_ops_weight_multiplier", default=-1.0),
    cfg.FloatOpt("build_failure_weight_multiplier", default=1000000.0),
    cfg.FloatOpt("soft_affinity_weight_multiplier", default=1.0),
    cfg.FloatOpt("soft_anti_affinity_weight_multiplier", default=1.0),
    cfg.FloatOpt("cross_cell_move_weight_multiplier", default=1000000.0),
    cfg.StrOpt("aggregate_image_properties_isolation_namespace"),
    cfg.StrOpt("aggregate_image_properties_isolation_separator", default="."),
]


def register_opts(conf):
    conf.register_opts(scheduler_opts, group="scheduler")
    conf.register_opts(filter_scheduler_opts, group="filter_scheduler")
