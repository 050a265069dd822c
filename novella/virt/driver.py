"""The interface between a compute host and its hypervisor.

The compute manager talks to guests only through a ``ComputeDriver``. Every
argument is plain data:

- ``instance``: a dict with at least ``uuid``, ``name``, ``flavor``
  (``memory_mb, vcpus, root_gb, ephemeral_gb, swap, extra_specs``),
  ``image_ref``, ``project_id``, ``host`` and ``node``;
- ``image_meta``: ``{"id", "properties": {}}``;
- ``network_info``: the list of VIF dicts the network service returned;
- ``block_device_info``: ``{"block_device_mapping": [{"volume_id",
  "connection_info", "mount_device", "boot_index"}], "root_device_name"}``;
- ``migration``: a dict with ``uuid, source_compute, dest_compute,
  source_node, dest_node, migration_type``.

Methods a driver does not support raise ``NotImplementedError``.
"""
import importlib
import threading


class ComputeDriver:
    """Base class; the simulated driver is the reference implementation."""

    capabilities = {
        "supports_migrate_to_same_host": True,
        "supports_attach_interface": True,
        "supports_multiattach": True,
    }

    def __init__(self, host):
        self.host = host

    # -- host ----------------------------------------------------------------

    def init_host(self, host):
        """Prepare the hypervisor for this host (called once at service start)."""

    def cleanup_host(self, host):
        """Release what init_host took (service stop)."""

    def get_available_nodes(self, refresh=False):
        """Names of the nodes (resource providers) this host manages."""
        raise NotImplementedError

    def get_available_resource(self, nodename):
        """The node as a dict.

        ``vcpus, memory_mb, local_gb`` (capacity), ``vcpus_used,
        memory_mb_used, local_gb_used`` (what the guests on it use),
        ``hypervisor_type, hypervisor_version, hypervisor_hostname,
        cpu_info`` (JSON text), ``numa_topology``: ``{"cells": [{"id",
        "cpus": [...], "memory_mb"}]}`` or None, and
        ``pci_passthrough_devices``: ``[{"address", "vendor_id",
        "product_id", "dev_type", "numa_node"}]``.
        """
        raise NotImplementedError

    def get_traits(self, nodename):
        """os-traits names (or CUSTOM_*) describing what the node can do."""
        return []

    def get_network_providers(self, nodename):
        """The bandwidth of the host's network hardware the driver knows of (SR-IOV
        NICs), as the agent for it reports it.

        ``[{"name", "inventories": {resource class: total}, "traits": [...],
        "parent": name}]`` in tree order, each a child of the node or of the
        provider named ``parent`` (Neutron's ``<host>:<agent>`` and
        ``<host>:<agent>:<device>`` providers); ports that ask for minimum
        bandwidth or packet rate are given some of it. The Open vSwitch agent's
        providers are not the driver's: novella/network/agent.py.
        """
        return []

    def list_instances(self):
        """uuids of the guests the hypervisor knows."""
        raise NotImplementedError

    def list_disks(self):
        """Uuids of the instances whose disks are on this host: its guests, and disks
        copied here for a move that has not made the guest yet."""
        return self.list_instances()

    def instance_exists(self, instance):
        return instance["uuid"] in self.list_instances()

    def get_volume_connector(self, instance):
        """What a volume service needs to export a volume to this host."""
        return {"host": self.host, "initiator": f"iqn.2010-10.org.openstack:{self.host}"}

    # -- guest lifecycle -------------------------------------------------------

    def spawn(self, ctxt, instance, image_meta, network_info=None,
              block_device_info=None, power_on=True, injected_files=None):
        """Create the guest: disks, then boot it (unless power_on is False).

        ``injected_files``: ``[(path, bytes)]`` to write into the guest's
        file system (the API's personality files).
        """
        raise NotImplementedError

    def destroy(self, ctxt, instance, network_info=None, block_device_info=None,
                destroy_disks=True):
        """Stop the guest and forget it; a guest already gone is not an error."""
        raise NotImplementedError

    def power_off(self, instance, timeout=0, retry_interval=0):
        raise NotImplementedError

    def power_on(self, ctxt, instance, network_info=None, block_device_info=None):
        raise NotImplementedError

    def reboot(self, ctxt, instance, network_info=None, reboot_type="SOFT",
               block_device_info=None):
        raise NotImplementedError

    def get_info(self, instance):
        """``{"state": power_state}`` (novella/virt/power.py)."""
        raise NotImplementedError

    def attach_volume(self, ctxt, connection_info, instance, mountpoint):
        raise NotImplementedError

    def detach_volume(self, ctxt, connection_info, instance, mountpoint):
        raise NotImplementedError

    def attach_interface(self, ctxt, instance, image_meta, vif):
        """Hot-plug the port ``vif`` (a network_info entry) into the guest."""
        raise NotImplementedError

    def detach_interface(self, ctxt, instance, vif):
        """Unplug the port ``vif`` from the guest (one it does not have is no error)."""
        raise NotImplementedError

    def swap_volume(self, ctxt, old_connection_info, new_connection_info, instance,
                    mountpoint, resize_to):
        """Copy the guest's volume at ``mountpoint`` to the new volume and use that one
        from now on (grown to ``resize_to`` GiB when not 0)."""
        raise NotImplementedError

    def volume_snapshot_create(self, ctxt, instance, volume_id, create_info):
        """A snapshot of an attached volume the volume service cannot take itself."""
        raise NotImplementedError

    def volume_snapshot_delete(self, ctxt, instance, volume_id, snapshot_id, delete_info):
        raise NotImplementedError

    def quiesce(self, ctxt, instance, image_meta):
        """Freeze the running guest's filesystems while its volumes are snapshotted."""
        raise NotImplementedError

    def unquiesce(self, ctxt, instance, image_meta):
        """Thaw what ``quiesce`` froze."""
        raise NotImplementedError

    # -- guest actions -------------------------------------------------------

    def pause(self, instance):
        """Stop the guest's vCPUs, keeping its memory (power state PAUSED)."""
        raise NotImplementedError

    def unpause(self, instance):
        raise NotImplementedError

    def suspend(self, ctxt, instance):
        """Save the guest's memory to disk and stop it (power state SUSPENDED)."""
        raise NotImplementedError

    def resume(self, ctxt, instance, network_info=None, block_device_info=None):
        raise NotImplementedError

    def rescue(self, ctxt, instance, network_info, image_meta, rescue_password,
               block_device_info=None):
        """Boot the guest from ``image_meta``, its own disks attached to it."""
        raise NotImplementedError

    def unrescue(self, ctxt, instance):
        """Boot the guest from its own disks again."""
        raise NotImplementedError

    def set_admin_password(self, instance, new_pass):
        """Have the guest (its agent) set the administrator's password."""
        raise NotImplementedError

    def inject_network_info(self, instance, network_info):
        """Write ``network_info`` (the server's VIFs) into the guest's configuration."""
        raise NotImplementedError

    def inject_nmi(self, instance):
        """Send the guest a non-maskable interrupt (trigger_crash_dump)."""
        raise NotImplementedError

    def cache_image(self, ctxt, image_id):
        """Fetch an image into the host's image cache: True if fetched now, False if
        it was there."""
        raise NotImplementedError()

    def get_console_output(self, ctxt, instance):
        """The guest's serial console log, as text."""
        raise NotImplementedError

    # -- consoles --------------------------------------------------------------

    def get_vnc_console(self, ctxt, instance):
        """Where the guest's VNC server listens, for the console proxy to reach it.

        A dict: ``host`` and ``port`` (TCP), or ``unix_socket`` (a path on this
        host, with ``host`` naming the host for the records), and
        ``internal_access_path`` (what the proxy sends first, usually None).
        Raises ``ConsoleTypeUnavailable("vnc")`` when the guest has no VNC
        server (none configured, or not running).
        """
        raise NotImplementedError

    def get_serial_console(self, ctxt, instance, index=0):
        """Where the guest's serial port ``index`` listens, as ``get_vnc_console``;
        ``ConsoleTypeUnavailable("serial")`` when it has none to offer."""
        raise NotImplementedError

    def rebuild(self, ctxt, instance, image_meta, network_info=None, block_device_info=None,
                preserve_ephemeral=False, power_on=True, injected_files=None):
        """Make the guest's local disks anew from ``image_meta`` (the ephemeral
        disk kept with ``preserve_ephemeral``), keeping its volumes and ports;
        ``injected_files`` as for spawn."""
        raise NotImplementedError

    # -- moves ---------------------------------------------------------------

    def prep_resize(self, ctxt, instance, flavor, migration):
        """Destination side, before a move lands here: can this host take the guest?

        Called by the destination's prep step (``prep_resize`` inside a cell,
        ``prep_snapshot_based_resize_at_dest`` across cells) once the resource
        tracker's claim for ``flavor`` is made. Raising refuses this host: the
        claim is given back and the conductor tries an alternate. Nothing is
        created on the hypervisor yet. The default accepts every move.
        """

    def migrate_disk_and_power_off(self, ctxt, instance, dest_host, flavor,
                                   network_info=None, block_device_info=None):
        """Source side of a cold move: power off and copy the disks to dest_host.

        The source keeps its copy until the move is confirmed or reverted.
        Returns ``disk_info`` (JSON) for finish_migration.
        """
        raise NotImplementedError

    def finish_migration(self, ctxt, migration, instance, disk_info, network_info,
                         image_meta, resize_instance, block_device_info=None,
                         power_on=True):
        """Destination side: adopt the copied disks (resized to the flavor), start."""
        raise NotImplementedError

    def confirm_migration(self, ctxt, migration, instance, network_info=None):
        """Source side after confirm: drop the copy kept for a revert."""
        raise NotImplementedError

    def finish_revert_migration(self, ctxt, instance, network_info=None, migration=None,
                                block_device_info=None, power_on=True):
        """Source side after revert: bring the kept copy back and start it.

        The guest gets the volumes of ``block_device_info`` and the ports of
        ``network_info``, both already connected to this host (a volume
        detached while the server was resized is not plugged back).
        """
        raise NotImplementedError

    def snapshot(self, ctxt, instance, image_id, update_task_state=None):
        """Upload the root disk's bytes as image ``image_id``; ``instance["task_state"]``
        says why (``resize_migrating``: the root disk of a move between cells)."""
        raise NotImplementedError

    # -- live migration ------------------------------------------------------

    def pre_live_migration(self, ctxt, instance, block_device_info, network_info):
        """Destination, before the move: ready to receive the running guest
        with these volumes (connected to this host) and ports."""
        raise NotImplementedError

    def live_migration(self, ctxt, instance, dest, steering=None):
        """Source: move the running guest, its memory and local disks to ``dest``.

        On return the guest runs on ``dest``; what is left of it here stays
        until ``cleanup_live_migration_source``, and a failed move leaves the
        guest here running. ``steering`` (a ``LiveMigrationSteering``) says
        what was asked of the move while it runs: on ``ABORT`` the driver
        stops, leaves nothing on ``dest`` and raises
        ``LiveMigrationAborted``; on
        ``FORCE_COMPLETE`` it finishes the copy at once. A driver that knows
        how far the copy is tells it with ``steering.report(figures)``.
        """
        raise NotImplementedError

    def post_live_migration_at_destination(self, ctxt, instance, network_info):
        """Destination, after the move: the guest here is the server (on these ports)."""
        raise NotImplementedError

    def cleanup_live_migration_source(self, ctxt, instance):
        """Source, after the move: remove what is left of the guest here."""
        raise NotImplementedError

    def rollback_live_migration_at_destination(self, ctxt, instance):
        """Destination, after a failed move: remove whatever arrived here."""
        raise NotImplementedError

    def rollback_live_migration_at_source(self, ctxt, instance):
        """Source, after a move undone once its copy had begun: the guest runs on here
        (a driver that stops the guest to hand it over starts it again)."""


def console_address(host, port=None, unix_socket=None, internal_access_path=None):
    """What ``get_vnc_console`` and ``get_serial_console`` return."""
    return {"host": host, "port": port, "unix_socket": unix_socket,
            "internal_access_path": internal_access_path}


class ConsoleTypeUnavailable(Exception):
    """The guest offers no console of that type."""

    def __init__(self, console_type):
        self.console_type = console_type
        super().__init__(f"Unavailable console type {console_type}.")


class LiveMigrationAborted(Exception):
    """The live migration was aborted on request."""

    code = 500
    expected = True  # asked for: no compute.exception (novella/compute/steps.py)

    def __init__(self, message=None, **kwargs):
        self.kwargs = kwargs
        super().__init__(message or self.__doc__)


class LiveMigrationSteering:
    """What was asked of one running live migration: ``ABORT`` or
    ``FORCE_COMPLETE`` (the first request wins), shared by the compute
    manager, which records the request, and the driver, which obeys it."""

    ABORT = "abort"
    FORCE_COMPLETE = "force-complete"
    # What a driver tells of the copy while it runs (bytes), as the migration shows it.
    PROGRESS = ("memory_total", "memory_processed", "memory_remaining",
                "disk_total", "disk_processed", "disk_remaining")

    def __init__(self):
        self.asked = None
        self.report_to = None  # the compute manager's: it records the figures reported
        self._event = threading.Event()
        self._lock = threading.Lock()

    def report(self, figures):
        """The copy's PROGRESS figures (a dict, or an object with those attributes)."""
        if self.report_to is not None:
            get = figures.get if isinstance(figures, dict) else lambda k: getattr(figures, k)
            self.report_to({k: get(k) for k in self.PROGRESS})

    def ask(self, what):
        """Record ``what``; False if another request came first."""
        with self._lock:
            if self.asked is None:
                self.asked = what
        self._event.set()
        return self.asked == what

    def wait(self, seconds):
        """Wait up to ``seconds`` for a request; the request, or None."""
        self._event.wait(seconds)
        return self.asked


def usage_of(flavors):
    """What guests of these flavors use of a host: ``{"vcpus", "memory_mb", "local_gb"}``
    (root and ephemeral disks), for ``get_available_resource``'s ``*_used``."""
    flavors = list(flavors)
    return {"vcpus": sum(f.get("vcpus", 0) for f in flavors),
            "memory_mb": sum(f.get("memory_mb", 0) for f in flavors),
            "local_gb": sum(f.get("root_gb", 0) + f.get("ephemeral_gb", 0) for f in flavors)}


DRIVERS = {
    "simulated": "novella.virt.simulated.SimulatedDriver",
    "fake": "novella.virt.simulated.SimulatedDriver",
    # Real guests as QEMU processes; the reference's libvirt driver name maps to it, so
    # an operator's nova.conf works unchanged (docs/real-guests.md).
    "qemu.QEMUDriver": "novella.virt.qemu.driver.QEMUDriver",
    "libvirt.LibvirtDriver": "novella.virt.qemu.driver.QEMUDriver",
}


def load_compute_driver(conf, host, name=None, **kwargs):
    """Build the driver named by ``[DEFAULT] compute_driver`` for one host.

    ``kwargs`` are per-host settings (e.g. ``vcpus=8``) that win over the
    configuration, so one process can run hosts of different sizes.
    """
    path = DRIVERS.get(name or conf.compute_driver, name or conf.compute_driver)
    module, _, cls = path.rpartition(".")
    return getattr(importlib.import_module(module), cls)(host, conf=conf, **kwargs)
