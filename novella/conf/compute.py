import os

from oslo_config import cfg

default_opts = [
    cfg.HostDomainOpt("host", help="Name of this service's host (default: the "
                                   "service's own role, e.g. 'conductor')."),
    cfg.StrOpt("state_path", default=os.path.join(os.getcwd(), "data"), sample_default="$pwd/data",
               help="Where the all-in-one keeps its databases and simulated disks."),
    cfg.StrOpt("instances_path", default="$state_path/instances",
               help="Root of the compute hosts' guest directories (disks, console logs), "
                    "one directory per host."),
    cfg.StrOpt("default_availability_zone", default="nova",
               help="Availability zone of compute hosts in no aggregate naming one."),
    cfg.StrOpt("default_schedule_zone",
               help="Zone a server is built in when its create request names none "
                    "(default: any zone)."),
    cfg.StrOpt("internal_service_availability_zone", default="internal",
               help="Zone shown for the services that are not compute hosts; no "
                    "aggregate may take its name."),
    cfg.BoolOpt("allow_resize_to_same_host", default=False,
                help="Let a resize choose the server's current host (a cold migration "
                     "never does)."),
    cfg.IntOpt("resize_confirm_window", default=0,
               help="Seconds after which a resize left in VERIFY_RESIZE is confirmed (0: never); "
                    "the compute service looks for such resizes every 60 s."),
    cfg.IntOpt("report_interval", default=10, help="Seconds between service heartbeats."),
    cfg.IntOpt("service_down_time", default=60,
               help="Seconds without a heartbeat after which a service is down (the "
                    "scheduler skips its host; host_status DOWN)."),
    cfg.FloatOpt("cpu_allocation_ratio",
                 help="VCPU allocation ratio of the host's inventory, set at every update "
                      "(unset: the ratio it has, initial_cpu_allocation_ratio when new)."),
    cfg.FloatOpt("ram_allocation_ratio",
                 help="MEMORY_MB allocation ratio of the host's inventory, set at every update "
                      "(unset: the ratio it has, initial_ram_allocation_ratio when new)."),
    cfg.FloatOpt("disk_allocation_ratio",
                 help="DISK_GB allocation ratio of the host's inventory, set at every update "
                      "(unset: the ratio it has, initial_disk_allocation_ratio when new)."),
    cfg.FloatOpt("initial_cpu_allocation_ratio", default=4.0,
                 help="VCPU allocation ratio of a new host's inventory."),
    cfg.FloatOpt("initial_ram_allocation_ratio", default=1.0,
                 help="MEMORY_MB allocation ratio of a new host's inventory."),
    cfg.FloatOpt("initial_disk_allocation_ratio", default=1.0,
                 help="DISK_GB allocation ratio of a new host's inventory."),
    cfg.IntOpt("reserved_host_memory_mb", default=512,
               help="Megabytes of the host's memory reserved in its inventory."),
    cfg.IntOpt("reserved_host_disk_mb", default=0,
               help="Megabytes of the host's disk reserved in its inventory (rounded up "
                    "to gigabytes)."),
    cfg.IntOpt("reserved_host_cpus", default=0,
               help="VCPUs of the host reserved in its inventory."),
    cfg.StrOpt("compute_driver", default="simulated",
               help="The virt driver of a compute host: 'simulated' (or 'fake'); "
                    "'qemu.QEMUDriver' (or the reference's 'libvirt.LibvirtDriver'), real "
                    "guests as QEMU processes ([libvirt] virt_type: kvm or qemu); or a "
                    "dotted module.Class path."),
    cfg.BoolOpt("force_config_drive", default=False,
                help="Give every server a config drive, asked for or not (the QEMU driver's "
                     "guests have no network to reach a metadata service; `novella up "
                     "--driver qemu` sets it)."),
    cfg.IntOpt("update_resources_interval", default=0,
               help="Seconds between resource tracker runs (update_available_resource); "
                    "0: the default period (60 s); negative: never."),
    cfg.IntOpt("sync_power_state_interval", default=600,
               help="Seconds between syncs of the guests' power states with the "
                    "database; 0: the default period (60 s); negative: never."),
    cfg.IntOpt("shelved_poll_interval", default=3600,
               help="Seconds between checks for shelved servers to offload after "
                    "shelved_offload_time; 0 or negative: never."),
    cfg.IntOpt("shelved_offload_time", default=0,
               help="Seconds a shelved server stays on its host before it is offloaded "
                    "(the compute service's periodic task); 0: at once; -1: only by the "
                    "shelveOffload action."),
    cfg.IntOpt("reclaim_instance_interval", default=0,
               help="Above 0, a deleted server is soft-deleted (SOFT_DELETED, restorable) "
                    "and the compute service deletes it for good once it has been so "
                    "that many seconds; read by the API and the compute services."),
]
# The host's Open vSwitch agent, by Neutron's names for its options: the embedded
# network service has no agent process, so the compute service reports the agent's
# providers (novella/network/agent.py), whatever its driver. They were [simulated]
# options once, which still set them.
ovs_opts = [
    cfg.ListOpt("resource_provider_bandwidths", default=[],
                deprecated_opts=[cfg.DeprecatedOpt("resource_provider_bandwidths",
                                                   group="simulated")],
                help="physnet:egress_kbps:ingress_kbps triples: the minimum-bandwidth "
                     "capacity the host's network agent reports per physical network, "
                     "as the provider '<host>:Open vSwitch agent:<physnet>', for ports "
                     "with a minimum-bandwidth QoS rule. A physnet named 'tunnel' (or "
                     "'rp_tunnelled') stands for networks without one."),
    cfg.IntOpt("resource_provider_packet_processing_without_direction", default=0, min=0,
               deprecated_opts=[cfg.DeprecatedOpt(
                   "resource_provider_packet_processing_without_direction", group="simulated")],
               help="Packets per second (thousands) the host's network agent reports, "
                    "as the provider '<host>:Open vSwitch agent', for ports with a "
                    "minimum-packet-rate QoS rule; 0: none."),
]

simulated_opts = [
    cfg.IntOpt("vcpus", default=16, help="VCPUs of a simulated host."),
    cfg.IntOpt("memory_mb", default=32768, help="Memory of a simulated host."),
    cfg.IntOpt("local_gb", default=1000, help="Local disk of a simulated host."),
    cfg.IntOpt("numa_cells", default=1,
               help="NUMA cells of a simulated host; its VCPUs and memory are split "
                    "evenly between them."),
    cfg.ListOpt("pci_devices", default=[],
                help="vendor_id:product_id:count triples exposed as PCI devices "
                     "(spread over the NUMA cells)."),
    cfg.ListOpt("traits", default=[],
                help="Extra traits (os-traits or CUSTOM_*) the simulated host reports."),
    cfg.IntOpt("disk_content_kb", default=4,
               help="Real bytes written per simulated disk, after its size header."),
    cfg.StrOpt("hypervisor_type", default="fake",
               help="hypervisor_type a simulated host reports (os-hypervisors, image "
                    "properties' hypervisor_type)."),
    cfg.FloatOpt("live_migration_copy_seconds", default=0.0, min=0.0,
                 help="How long the memory copy of a live migration takes on a simulated "
                      "host, in seconds; while it runs the migration is 'running' and can "
                      "be aborted (DELETE /servers/{id}/migrations/{id}) or forced to "
                      "complete (the force_complete action), which ends the copy at once."),
    cfg.ListOpt("sriov_nics", default=[],
                help="pf:vfs[:egress_kbps:ingress_kbps] entries: the host's SR-IOV NICs, "
                     "each a physical function named pf with vfs virtual functions. A PF "
                     "that [pci] device_spec puts on a physical network is reported, with "
                     "the bandwidth given, as the provider '<host>:NIC Switch agent:<pf>' "
                     "(as Neutron's [sriov_nic] resource_provider_bandwidths), for "
                     "direct, macvtap and direct-physical ports."),
    cfg.FloatOpt("resize_disk_copy_seconds", default=0.0, min=0.0,
                 help="Seconds the simulated host spends copying a server's disks for a "
                      "resize or cold migration: in a cell, between setting the source's "
                      "disks aside and copying them to the destination "
                      "(migrate_disk_and_power_off); across cells, before uploading the "
                      "root disk as the move's snapshot. Lets a process be stopped in the "
                      "middle of a move; 0: no pause."),
    cfg.FloatOpt("snapshot_seconds", default=0.0, min=0.0,
                 help="Seconds the simulated host spends reading a server's root disk "
                      "before uploading it as an image (createImage, createBackup, "
                      "shelve): the image stays queued (SAVING) that long, as with a real "
                      "hypervisor; 0: no pause."),
]
pci_opts = [
    cfg.MultiStrOpt("device_spec", default=[],
                    help='JSON PCI device spec of the SR-IOV NICs ports may use, as the '
                         'reference\'s option: a PF by "devname" (its VFs with it) or by '
                         '"address", or "vendor_id"/"product_id", tagged with the '
                         '"physical_network" its ports are on, e.g. {"devname": "ens1", '
                         '"physical_network": "physnet1"} (docs/qos.md). Devices of '
                         '[simulated] pci_devices need none.'),
    cfg.MultiStrOpt("alias", default=[],
                    help='JSON PCI alias, e.g. {"name": "a1", "vendor_id": "8086", '
                         '"product_id": "1520", "device_type": "type-PCI"}; flavors ask '
                         'for devices with the extra spec pci_passthrough:alias=a1:2.'),
]


def register_opts(conf):
    conf.register_opts(default_opts)
    conf.register_opts(simulated_opts, group="simulated")
    conf.register_opts(ovs_opts, group="ovs")
    conf.register_opts(pci_opts, group="pci")
