import os

from oslo_config import cfg

default_opts = [
    cfg.HostDomainOpt("host", help="Name of this service's host (default: the "
                                   "service's own role, e.g. 'conductor')."),
    cfg.StrOpt("state_path", default=os.path.join(os.getcwd(), "data"), sample_default="$pwd/data",
               help="Where the all-in-one keeps its databases and simulated disks."),
    cfg.StrOpt("instances_path", default="$state_path/instances",
               help="Root of the simulated hosts' disk directories."),
    cfg.StrOpt("default_availability_zone", default="nova"),
    cfg.StrOpt("default_schedule_zone"),
    cfg.StrOpt("internal_service_availability_zone", default="internal"),
    cfg.BoolOpt("allow_resize_to_same_host", default=False),
    cfg.IntOpt("resize_confirm_window", default=0,
               help="Seconds after which a resize left in VERIFY_RESIZE is confirmed (0: never); "
                    "the compute service looks for such resizes every 60 s."),
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
    cfg.IntOpt("update_resources_interval", default=60,
               help="Seconds between resource tracker runs (update_available_resource); "
                    "0: the default period (60 s); negative: never."),
    cfg.IntOpt("sync_power_state_interval", default=600,
               help="Seconds between syncs of the guests' power states with the "
                    "database; negative: never."),
    cfg.IntOpt("shelved_poll_interval", default=3600,
               help="Seconds between checks for shelved servers to offload after "
                    "shelved_offload_time; negative: never."),
    cfg.IntOpt("shelved_offload_time", default=0,
               help="Seconds a shelved server stays on its host before it is offloaded "
                    "(the compute service's periodic task); 0: at once; -1: only by the "
                    "shelveOffload action."),
]
simulated_opts = [
    cfg.IntOpt("vcpus", default=16),
    cfg.IntOpt("memory_mb", default=32768),
    cfg.IntOpt("local_gb", default=1000),
    cfg.IntOpt("numa_cells", default=1),
    cfg.ListOpt("pci_devices", default=[],
                help="vendor_id:product_id:count triples exposed as PCI devices "
                     "(spread over the NUMA cells)."),
    cfg.ListOpt("traits", default=[],
                help="Extra traits (os-traits or CUSTOM_*) the simulated host reports."),
    cfg.IntOpt("disk_content_kb", default=4,
               help="Real bytes written per simulated disk, after its size header."),
    cfg.StrOpt("hypervisor_type", default="fake"),
    cfg.ListOpt("resource_provider_bandwidths", default=[],
                help="physnet:egress_kbps:ingress_kbps triples: the minimum-bandwidth "
                     "capacity the host's simulated network agent reports per physical "
                     "network (as Neutron's [ovs] resource_provider_bandwidths), for ports "
                     "with a minimum-bandwidth QoS rule. A physnet named 'tunnel' stands "
                     "for networks without one."),
    cfg.FloatOpt("live_migration_copy_seconds", default=0.0, min=0.0,
                 help="How long the memory copy of a live migration takes on a simulated "
                      "host, in seconds; while it runs the migration is 'running' and can "
                      "be aborted (DELETE /servers/{id}/migrations/{id}) or forced to "
                      "complete (the force_complete action), which ends the copy at once."),
    cfg.IntOpt("resource_provider_packet_processing_without_direction", default=0,
               help="Packets per second (thousands) the host's simulated network agent "
                    "reports for ports with a minimum-packet-rate QoS rule (as Neutron's "
                    "option of that name); 0: none."),
    cfg.FloatOpt("resize_disk_copy_seconds", default=0.0, min=0.0,
                 help="Seconds the simulated host spends copying a server's disks for a "
                      "resize or cold migration: in a cell, between setting the source's "
                      "disks aside and copying them to the destination "
                      "(migrate_disk_and_power_off); across cells, before uploading the "
                      "root disk as the move's snapshot. Lets a process be stopped in the "
                      "middle of a move; 0: no pause."),
]
pci_opts = [
    cfg.MultiStrOpt("alias", default=[],
                    help='JSON PCI alias, e.g. {"name": "a1", "vendor_id": "8086", '
                         '"product_id": "1520", "device_type": "type-PCI"}; flavors ask '
                         'for devices with the extra spec pci_passthrough:alias=a1:2.'),
]


def register_opts(conf):
    conf.register_opts(default_opts)
    conf.register_opts(simulated_opts, group="simulated")
    conf.register_opts(pci_opts, group="pci")
