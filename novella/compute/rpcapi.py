"""The client side of the compute RPC interface (topic ``compute``, server = host).

Each cell has its own transport: build one ``ComputeAPI`` per cell with that
cell's transport (or its transport URL). Every method takes the target
``host`` after the context; payloads are JSON (servers travel as uuids).
Each method names its own timeout: ``rpc_response_timeout`` for quick calls,
``long_rpc_timeout`` for a step that moves or spawns a guest.
"""
from novella import rpc
from novella.compute import exceptions

TOPIC = "compute"


class ComputeAPI:
    def __init__(self, transport, timeout=None, long_timeout=None):
        if isinstance(transport, str):
            transport = rpc.get_transport(transport)
        self.transport = transport
        if timeout is None or long_timeout is None:
            from novella.conf import CONF
            timeout = timeout or CONF.rpc_response_timeout
            long_timeout = long_timeout or CONF.long_rpc_timeout
        self.timeout = timeout
        self.long_timeout = long_timeout

    def _call(self, ctxt, host, method, timeout=None, **kwargs):
        try:
            return self.transport.call(ctxt, TOPIC, host, method,
                                       timeout=timeout or self.timeout, **kwargs)
        except rpc.RemoteError as exc:
            local = exceptions.from_remote(exc)
            if local is exc:
                raise
            raise local from exc

    def _cast(self, ctxt, host, method, **kwargs):
        self.transport.cast(ctxt, TOPIC, host, method, **kwargs)

    # -- build and lifecycle ---------------------------------------------------------

    def build_and_run_instance(self, ctxt, host, instance_uuid, request_spec, node=None,
                               allocations=None, requested_networks=None,
                               block_device_mappings=None, port_profiles=None,
                               injected_files=None):
        """Build on ``host``; returns when the server is ACTIVE.

        ``port_profiles``: ``{port id: binding profile}`` merged into the
        ports' bindings (the providers of their resource requests).
        ``injected_files``: ``[{"path", "contents" (base64)}]`` to write into the
        guest (sent only when there are some).
        Raises RescheduledException (the host cleaned up; try an alternate)
        or BuildAbortException (the server is gone; do not reschedule).
        """
        extra = {"injected_files": injected_files} if injected_files else {}
        return self._call(ctxt, host, "build_and_run_instance", timeout=self.long_timeout,
                          instance_uuid=instance_uuid, request_spec=request_spec, node=node,
                          allocations=allocations, requested_networks=requested_networks,
                          block_device_mappings=block_device_mappings,
                          port_profiles=port_profiles, **extra)

    def stop_instance(self, ctxt, host, instance_uuid, clean_shutdown=True):
        self._cast(ctxt, host, "stop_instance", instance_uuid=instance_uuid,
                   clean_shutdown=clean_shutdown)

    def start_instance(self, ctxt, host, instance_uuid):
        self._cast(ctxt, host, "start_instance", instance_uuid=instance_uuid)

    def reboot_instance(self, ctxt, host, instance_uuid, reboot_type="SOFT"):
        self._cast(ctxt, host, "reboot_instance", instance_uuid=instance_uuid,
                   reboot_type=reboot_type)

    def terminate_instance(self, ctxt, host, instance_uuid):
        self._cast(ctxt, host, "terminate_instance", instance_uuid=instance_uuid)

    # -- resize and cold migrate (each a call: the conductor owns the sequence) --------

    def prep_resize(self, ctxt, host, instance_uuid, migration_uuid, new_flavor,
                    port_profiles=None):
        """Destination: resize claim for ``new_flavor`` (and the SR-IOV ports' devices
        from the providers ``port_profiles`` names); raises when it does not fit."""
        return self._call(ctxt, host, "prep_resize", timeout=self.long_timeout,
                          instance_uuid=instance_uuid, migration_uuid=migration_uuid,
                          new_flavor=new_flavor, port_profiles=port_profiles)

    def resize_instance(self, ctxt, host, instance_uuid, migration_uuid, clean_shutdown=True):
        """Source: power off and copy the disks to the destination; returns disk_info."""
        return self._call(ctxt, host, "resize_instance", timeout=self.long_timeout,
                          instance_uuid=instance_uuid, migration_uuid=migration_uuid,
                          clean_shutdown=clean_shutdown)

    def finish_resize(self, ctxt, host, instance_uuid, migration_uuid, disk_info=None,
                      power_on=True, availability_zone=None, port_profiles=None):
        """Destination: spawn with the new flavor (VERIFY_RESIZE), in ``host``'s zone,
        its ports' bindings with ``port_profiles``."""
        return self._call(ctxt, host, "finish_resize", timeout=self.long_timeout,
                          instance_uuid=instance_uuid, migration_uuid=migration_uuid,
                          disk_info=disk_info, power_on=power_on,
                          availability_zone=availability_zone, port_profiles=port_profiles)

    def confirm_resize(self, ctxt, host, instance_uuid, migration_uuid):
        """Source: drop the kept copy; returns the migration's status."""
        return self._call(ctxt, host, "confirm_resize", timeout=self.long_timeout,
                          instance_uuid=instance_uuid, migration_uuid=migration_uuid)

    def revert_resize(self, ctxt, host, instance_uuid, migration_uuid):
        """Destination: destroy the new guest, drop its claim."""
        return self._call(ctxt, host, "revert_resize", timeout=self.long_timeout,
                          instance_uuid=instance_uuid, migration_uuid=migration_uuid)

    def finish_revert_resize(self, ctxt, host, instance_uuid, migration_uuid, power_on=True,
                             availability_zone=None, port_profiles=None):
        """Source: the old guest back, in ``host``'s zone, its ports' bindings with
        ``port_profiles``."""
        return self._call(ctxt, host, "finish_revert_resize", timeout=self.long_timeout,
                          instance_uuid=instance_uuid, migration_uuid=migration_uuid,
                          power_on=power_on,
                          availability_zone=availability_zone, port_profiles=port_profiles)

    # -- resize and cold migrate across cells (novella/compute/cross_cell.py) -----------

    def prep_snapshot_based_resize_at_dest(self, ctxt, host, instance_uuid, migration_uuid,
                                           new_flavor, port_profiles=None):
        return self._call(ctxt, host, "prep_snapshot_based_resize_at_dest",
                          timeout=self.long_timeout,
                          instance_uuid=instance_uuid, migration_uuid=migration_uuid,
                          new_flavor=new_flavor, port_profiles=port_profiles)

    def prep_snapshot_based_resize_at_source(self, ctxt, host, instance_uuid, migration_uuid,
                                             snapshot_id=None, clean_shutdown=True):
        return self._call(ctxt, host, "prep_snapshot_based_resize_at_source",
                          timeout=self.long_timeout,
                          instance_uuid=instance_uuid, migration_uuid=migration_uuid,
                          snapshot_id=snapshot_id, clean_shutdown=clean_shutdown)

    def finish_snapshot_based_resize_at_dest(self, ctxt, host, instance_uuid, migration_uuid,
                                             snapshot_id=None, power_on=True):
        return self._call(ctxt, host, "finish_snapshot_based_resize_at_dest",
                          timeout=self.long_timeout,
                          instance_uuid=instance_uuid, migration_uuid=migration_uuid,
                          snapshot_id=snapshot_id, power_on=power_on)

    def confirm_snapshot_based_resize_at_source(self, ctxt, host, instance_uuid,
                                                migration_uuid):
        return self._call(ctxt, host, "confirm_snapshot_based_resize_at_source",
                          timeout=self.long_timeout, instance_uuid=instance_uuid,
                          migration_uuid=migration_uuid)

    def revert_snapshot_based_resize_at_dest(self, ctxt, host, instance_uuid, migration_uuid):
        return self._call(ctxt, host, "revert_snapshot_based_resize_at_dest",
                          timeout=self.long_timeout,
                          instance_uuid=instance_uuid, migration_uuid=migration_uuid)

    def finish_revert_snapshot_based_resize_at_source(self, ctxt, host, instance_uuid,
                                                      migration_uuid, power_on=True):
        return self._call(ctxt, host, "finish_revert_snapshot_based_resize_at_source",
                          timeout=self.long_timeout, instance_uuid=instance_uuid,
                          migration_uuid=migration_uuid, power_on=power_on)

    # -- live migration (novella/compute/live_migrate.py) ------------------------------

    def prepare_live_migration_at_destination(self, ctxt, host, instance_uuid, migration_uuid,
                                              port_profiles=None):
        return self._call(ctxt, host, "prepare_live_migration_at_destination",
                          timeout=self.long_timeout, instance_uuid=instance_uuid,
                          migration_uuid=migration_uuid, port_profiles=port_profiles)

    def live_migration(self, ctxt, host, instance_uuid, migration_uuid, dest):
        return self._call(ctxt, host, "live_migration", timeout=self.long_timeout,
                          instance_uuid=instance_uuid, migration_uuid=migration_uuid, dest=dest)

    def post_live_migration_at_destination(self, ctxt, host, instance_uuid, migration_uuid,
                                           attachments=None):
        return self._call(ctxt, host, "post_live_migration_at_destination",
                          timeout=self.long_timeout, instance_uuid=instance_uuid,
                          migration_uuid=migration_uuid, attachments=attachments)

    def post_live_migration_at_source(self, ctxt, host, instance_uuid, migration_uuid):
        return self._call(ctxt, host, "post_live_migration_at_source", timeout=self.long_timeout,
                          instance_uuid=instance_uuid, migration_uuid=migration_uuid)

    def rollback_live_migration_at_destination(self, ctxt, host, instance_uuid, migration_uuid,
                                               attachments=None):
        return self._call(ctxt, host, "rollback_live_migration_at_destination",
                          timeout=self.long_timeout, instance_uuid=instance_uuid,
                          migration_uuid=migration_uuid, attachments=attachments)

    def clean_up_deleted(self, ctxt, host, instance_uuid):
        """``host``: what is left there of a server deleted while it moved (cast)."""
        self._cast(ctxt, host, "clean_up_deleted", instance_uuid=instance_uuid)

    def live_migration_abort(self, ctxt, host, instance_uuid, migration_uuid):
        """Source: stop the migration's copy; the conductor rolls the move back."""
        self._cast(ctxt, host, "live_migration_abort", instance_uuid=instance_uuid,
                   migration_uuid=migration_uuid)

    def rollback_live_migration_at_source(self, ctxt, host, instance_uuid, migration_uuid,
                                          copy_started=True):
        """Source: the move failed; a copy still running stops (``copy_started``:
        False when the destination failed its preparation, before any copy)."""
        extra = {} if copy_started else {"copy_started": False}
        self._cast(ctxt, host, "rollback_live_migration_at_source",
                   instance_uuid=instance_uuid, migration_uuid=migration_uuid, **extra)

    def live_migration_force_complete(self, ctxt, host, instance_uuid, migration_uuid):
        """Source: finish the migration's copy at once."""
        self._cast(ctxt, host, "live_migration_force_complete", instance_uuid=instance_uuid,
                   migration_uuid=migration_uuid)

    # -- evacuate (novella/compute/evacuate.py) -----------------------------------------

    def rebuild_instance(self, ctxt, host, instance_uuid, migration_uuid, port_profiles=None,
                         availability_zone=None):
        """Rebuild on ``host`` a server whose host is down (evacuate)."""
        return self._call(ctxt, host, "rebuild_instance", timeout=self.long_timeout,
                          instance_uuid=instance_uuid, migration_uuid=migration_uuid,
                          port_profiles=port_profiles, availability_zone=availability_zone)

    def abandon_rebuild(self, ctxt, host, instance_uuid, migration_uuid):
        """``host``: what a rebuild there that stopped part-way made goes (its undo)."""
        return self._call(ctxt, host, "abandon_rebuild", instance_uuid=instance_uuid,
                          migration_uuid=migration_uuid)

    # -- shelve (novella/compute/shelve.py) ---------------------------------------------

    def unshelve_instance(self, ctxt, host, instance_uuid, image_id=None, flavor=None,
                          port_profiles=None, availability_zone=None):
        """Run the shelved server on ``host``; RescheduledException if it cannot."""
        return self._call(ctxt, host, "unshelve_instance", timeout=self.long_timeout,
                          instance_uuid=instance_uuid, image_id=image_id, flavor=flavor,
                          port_profiles=port_profiles, availability_zone=availability_zone)

    # -- guest actions (novella/compute/guest_actions.py) ------------------------------

    def _guest_cast(method):
        def cast(self, ctxt, host, instance_uuid):
            self._cast(ctxt, host, method, instance_uuid=instance_uuid)
        cast.__name__ = method
        return cast

    pause_instance = _guest_cast("pause_instance")
    unpause_instance = _guest_cast("unpause_instance")
    suspend_instance = _guest_cast("suspend_instance")
    resume_instance = _guest_cast("resume_instance")
    unrescue_instance = _guest_cast("unrescue_instance")
    trigger_crash_dump = _guest_cast("trigger_crash_dump")
    inject_network_info = _guest_cast("inject_network_info")
    soft_delete_instance = _guest_cast("soft_delete_instance")
    restore_instance = _guest_cast("restore_instance")
    del _guest_cast

    def rescue_instance(self, ctxt, host, instance_uuid, rescue_password=None):
        self._cast(ctxt, host, "rescue_instance", instance_uuid=instance_uuid,
                   rescue_password=rescue_password)

    def rebuild_in_place(self, ctxt, host, instance_uuid, admin_password=None,
                         injected_files=None):
        extra = {"injected_files": injected_files} if injected_files else {}
        self._cast(ctxt, host, "rebuild_in_place", instance_uuid=instance_uuid,
                   admin_password=admin_password, **extra)

    def snapshot_instance(self, ctxt, host, instance_uuid, image_id):
        self._cast(ctxt, host, "snapshot_instance", instance_uuid=instance_uuid,
                   image_id=image_id)

    def backup_instance(self, ctxt, host, instance_uuid, image_id, backup_type, rotation):
        self._cast(ctxt, host, "backup_instance", instance_uuid=instance_uuid,
                   image_id=image_id, backup_type=backup_type, rotation=rotation)

    def set_admin_password(self, ctxt, host, instance_uuid, new_pass):
        """Returns once the guest has the password; raises what the host raised."""
        return self._call(ctxt, host, "set_admin_password", instance_uuid=instance_uuid,
                          new_pass=new_pass)

    def get_console_output(self, ctxt, host, instance_uuid, tail_length=None):
        return self._call(ctxt, host, "get_console_output", instance_uuid=instance_uuid,
                          tail_length=tail_length)

    def get_vnc_console(self, ctxt, host, instance_uuid, console_type):
        """``{"url"}`` of the guest's VNC console through the novncproxy."""
        return self._call(ctxt, host, "get_vnc_console", instance_uuid=instance_uuid,
                          console_type=console_type)

    def get_serial_console(self, ctxt, host, instance_uuid, console_type):
        """``{"url"}`` of the guest's serial console through the serialproxy."""
        return self._call(ctxt, host, "get_serial_console", instance_uuid=instance_uuid,
                          console_type=console_type)

    # -- volumes -----------------------------------------------------------------------

    def attach_volume(self, ctxt, host, instance_uuid, volume_id, attachment_id, device=None,
                      tag=None, delete_on_termination=False):
        """Connect and plug a reserved volume; returns the block device mapping."""
        return self._call(ctxt, host, "attach_volume", timeout=self.long_timeout,
                          instance_uuid=instance_uuid, volume_id=volume_id,
                          attachment_id=attachment_id, device=device, tag=tag,
                          delete_on_termination=delete_on_termination)

    def detach_volume(self, ctxt, host, instance_uuid, volume_id, attachment_id=None):
        self._cast(ctxt, host, "detach_volume", instance_uuid=instance_uuid,
                   volume_id=volume_id, attachment_id=attachment_id)

    def attach_interface(self, ctxt, host, instance_uuid, network_id=None, port_id=None,
                         requested_ip=None, tag=None):
        """Give the server a port (``port_id``, or a new one on ``network_id``) and plug
        it; returns its network_info entry."""
        return self._call(ctxt, host, "attach_interface", timeout=self.long_timeout,
                          instance_uuid=instance_uuid, network_id=network_id,
                          port_id=port_id, requested_ip=requested_ip, tag=tag)

    def detach_interface(self, ctxt, host, instance_uuid, port_id):
        self._cast(ctxt, host, "detach_interface", instance_uuid=instance_uuid,
                   port_id=port_id)

    def swap_volume(self, ctxt, host, instance_uuid, old_volume_id, new_volume_id,
                    new_attachment_id):
        self._cast(ctxt, host, "swap_volume", instance_uuid=instance_uuid,
                   old_volume_id=old_volume_id, new_volume_id=new_volume_id,
                   new_attachment_id=new_attachment_id)

    def volume_snapshot_create(self, ctxt, host, instance_uuid, volume_id, create_info):
        self._cast(ctxt, host, "volume_snapshot_create", instance_uuid=instance_uuid,
                   volume_id=volume_id, create_info=create_info)

    def quiesce_instance(self, ctxt, host, instance_uuid):
        """Freeze the guest's filesystems before its volumes are snapshotted."""
        return self._call(ctxt, host, "quiesce_instance", instance_uuid=instance_uuid)

    def unquiesce_instance(self, ctxt, host, instance_uuid, mapping=None):
        """Thaw the guest once the snapshots ``mapping`` names are made."""
        self._cast(ctxt, host, "unquiesce_instance", instance_uuid=instance_uuid,
                   mapping=mapping)

    def volume_snapshot_delete(self, ctxt, host, instance_uuid, volume_id, snapshot_id,
                               delete_info):
        self._cast(ctxt, host, "volume_snapshot_delete", instance_uuid=instance_uuid,
                   volume_id=volume_id, snapshot_id=snapshot_id, delete_info=delete_info)

    # -- host ------------------------------------------------------------------------

    def cache_images(self, ctxt, host, image_ids):
        """Fetch the images into the host's image cache: {image id: result}."""
        return self._call(ctxt, host, "cache_images", timeout=self.long_timeout,
                          image_ids=image_ids)

    def set_host_enabled(self, ctxt, host, enabled):
        """Tell the host its service was enabled/disabled (COMPUTE_STATUS_DISABLED trait)."""
        return self._call(ctxt, host, "set_host_enabled", enabled=enabled)
