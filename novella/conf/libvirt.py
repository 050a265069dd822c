"""The reference's ``[libvirt]`` options that the QEMU driver reads (docs/real-guests.md):
an operator's nova.conf for the libvirt driver runs unchanged."""
from oslo_config import cfg

libvirt_opts = [
    cfg.StrOpt("virt_type", default="kvm", choices=("kvm", "qemu"),
               help="How the QEMU driver runs guests: 'kvm' (hardware virtualisation) "
                    "or 'qemu' (emulated with TCG, where /dev/kvm is missing or does not "
                    "work, as in a nested virtual machine)."),
    cfg.IntOpt("live_migration_bandwidth", default=0, min=0,
               help="The most a live migration copies per second, in MiB (memory and "
                    "disks); 0: as fast as the hosts go. A forced completion lifts it."),
]


def register_opts(conf):
    conf.register_opts(libvirt_opts, group="libvirt")
