"""`novella up`: the whole system in one process, until Ctrl-C.

``--config-file`` (repeatable) is read as the separate services read theirs
(nova.conf and placement.conf options); the data directory still decides the
databases and transports. Defaults that differ from the separate services':
the hosts' network agents report minimum bandwidth on ``physnet1`` and on the
tunnel, and packet rate (``[ovs]`` options), and the simulated hosts have two
SR-IOV NICs on ``physnet1`` (``[simulated] sriov_nics`` and ``[pci]
device_spec``); a configuration file or an ``OS_<GROUP>__<OPTION>`` environment
variable changes them (docs/qos.md).
"""
import logging
import os
import signal
import sys
import threading

from novella.allinone import AllInOne
from novella.service import PortInUse

# {group: {option: default}} of `novella up`: 10 Gbit/s each way on physnet1 and on
# the tunnel, 1000 kpps per host, and two SR-IOV NICs of 4 VFs with 10 Gbit/s each
# way on physnet1 (for direct, macvtap and direct-physical ports); a configuration
# file or the environment overrides them.
UP_DEFAULTS = {
    "ovs": {
        "resource_provider_bandwidths": ["physnet1:10000000:10000000",
                                         "tunnel:10000000:10000000"],
        "resource_provider_packet_processing_without_direction": 1000,
    },
    "simulated": {
        "sriov_nics": ["ens1:4:10000000:10000000", "ens2:4:10000000:10000000"],
    },
    "pci": {
        "device_spec": ['{"devname": "ens1", "physical_network": "physnet1"}',
                        '{"devname": "ens2", "physical_network": "physnet1"}'],
    },
}


def set_defaults(conf):
    for group, options in UP_DEFAULTS.items():
        for name, value in options.items():
            conf.set_default(name, value, group=group)


def driver_overrides(driver):
    """``--driver``'s options: {group: {option: value}} (none for the simulated hosts)."""
    if driver in (None, "simulated"):
        return {}
    # Guests have no network: the config drive is their metadata.
    return {None: {"compute_driver": "qemu.QEMUDriver", "force_config_drive": True},
            "libvirt": {"virt_type": driver}}


def _log_to_file(data_dir):
    """Warnings and errors (Python's warnings too) go to novella.log in the data
    directory: the terminal shows what the user needs. Returns the file's path."""
    os.makedirs(data_dir, exist_ok=True)
    path = os.path.abspath(os.path.join(data_dir, "novella.log"))
    logging.basicConfig(level=logging.WARNING, filename=path,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    logging.captureWarnings(True)
    return path


def main(args):
    from novella.conf import CONF
    log_file = _log_to_file(args.data_dir)
    driver = getattr(args, "driver", "simulated")
    kind = "simulated" if driver == "simulated" else f"QEMU ({driver})"
    print(f"Starting Novella: {args.cells} cells x {args.hosts_per_cell} {kind} hosts ...",
          flush=True)
    set_defaults(CONF)
    try:
        cloud = AllInOne(args.data_dir, cells=args.cells, hosts_per_cell=args.hosts_per_cell,
                         http=True, bind=args.host, port_base=args.port_base,
                         config_overrides=driver_overrides(driver),
                         log=lambda msg: print("  " + msg, flush=True),
                         config_files=getattr(args, "config_file", None) or (), qos_demo=True)
    except PortInUse as exc:
        sys.exit(f"error: {exc}")
    cloud.start()
    print("Novella is up. Endpoints:", flush=True)
    for name, url in cloud.endpoints().items():
        print(f"  {name:<10} {url}", flush=True)
    print(f"Credentials for the admin and demo (member) users: {cloud.clouds_yaml}", flush=True)
    print(f"  export OS_CLIENT_CONFIG_FILE={cloud.clouds_yaml} OS_CLOUD=novella-admin", flush=True)
    print("  openstack server list; openstack resource provider list", flush=True)
    print(f"Dashboard: {cloud.urls['optimize']}/dashboard/ (it asks for a token: "
          "openstack token issue -f value -c id)", flush=True)
    print("Consoles: openstack console url show --serial SERVER (a websocket; --novnc "
          "opens noVNC's page for a guest with a display)", flush=True)
    print(f"Configuration for novella manage --config-file: {cloud.nova_conf} "
          f"(Placement: {cloud.placement_conf})", flush=True)
    print(f"Log: {log_file}", flush=True)
    print("Stop with Ctrl-C; data stays in " + cloud.data_dir, flush=True)
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    done.wait()
    print("Stopping ...", flush=True)
    cloud.stop()
