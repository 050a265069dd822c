from oslo_config import cfg

default_opts = [
    cfg.StrOpt("host", help="Name of this service's host."),
    cfg.StrOpt("state_path", default="$pwd/data",
               help="Where the all-in-one keeps its databases and simulated disks."),
    cfg.StrOpt("instances_path", default="$state_path/instances",
               help="Root of the simulated hosts' disk directories."),
    cfg.StrOpt("default_availability_zone", default="nova"),
    cfg.StrOpt("default_schedule_zone"),
    cfg.StrOpt("internal_service_availability_zone", default="internal"),
    cfg.BoolOpt("allow_resize_to_same_host", default=False),
    cfg.IntOpt("resize_confirm_window", default=0,
               help="Seconds after which a resize left in VERIFY_RESIZE is confirmed (0: never)."),
    cfg.IntOpt("report_interval", default=10, help="Seconds between service heartbeats."),
    cfg.IntOpt("service_down_time", default=60),
    cfg.FloatOpt("cpu_allocation_ratio"),
    cfg.FloatOpt("ram_allocation_ratio"),
    cfg.FloatOpt("disk_allocation_ratio"),
    cfg.FloatOpt("initial_cpu_allocation_ratio", default=4.0),
    cfg.FloatOpt("initial_ram_allocation_ratio", default=1.0),
    cfg.FloatOpt("initial_disk_allocation_ratio", default=1.0),
    cfg.IntOpt("reserved_host_memory_mb", default=512),
    cfg.IntOpt("reserved_host_disk_mb", default=0),
    cfg.IntOpt("reserved_host_cpus", default=0),
    cfg.StrOpt("compute_driver", default="simulated"),
]
simulated_opts = [
    cfg.IntOpt("vcpus", default=16),
    cfg.IntOpt("memory_mb", default=32768),
    cfg.IntOpt("local_gb", default=1000),
    cfg.IntOpt("numa_cells", default=1),
    cfg.ListOpt("pci_devices", default=[],
                help="vendor_id:product_id:count triples exposed as PCI devices."),
]


def register_opts(conf):
    conf.register_opts(default_opts)
    conf.register_opts(simulated_opts, group="simulated")
