"""Cross-cell resize and cold migrate on a compute host (mixed into ComputeManager).

The super-conductor drives a move between cells by calling each host in turn;
the hosts never talk to each other. Each host works on the copy of the
server in its own cell database (docs/cross-cell.md):

    prep_snapshot_based_resize_at_dest        destination  resize claim, volume
                                                           connector, INACTIVE port
                                                           bindings on this host
    prep_snapshot_based_resize_at_source      source       power off, root disk to an
                                                           image, volumes disconnected
    finish_snapshot_based_resize_at_dest      destination  spawn from the image, ports
                                                           active here, volumes attached
    confirm_snapshot_based_resize_at_source   source       guest destroyed, its bindings
                                                           and attachments gone
    revert_snapshot_based_resize_at_dest      destination  guest destroyed, bindings,
                                                           attachments and claim gone
    finish_revert_snapshot_based_resize_at_source  source  the old guest back, ports and
                                                           volumes here

A step that fails undoes its own half-done work before raising, so the
conductor's rollback of the completed steps leaves the host as it was. The
revert methods also undo a failed move (only a revert asked for, the
migration 'reverting', ends it 'reverted'). No step here changes an
allocation: the conductor's task around each does
(novella/placement/allocations.py).
"""
import contextlib
import json

from novella.compute import cleanup
from novella.compute import pci
from novella.compute import states as vm_states
from novella.compute.states import migration_status as ms, power_state, task_states
from novella.compute import steps
from novella.compute import connections
from novella.compute import guest
from novella.rpc import notifications
from novella.db import cell_models as m
from novella.db import records


class ComputeCrossCell:
    """Snapshot-based move steps of one host; needs the attributes of ComputeManager."""

    def _volume_bdms(self, instance_uuid):
        return [b for b in guest.bdms_of(self, instance_uuid)
                if b.destination_type == "volume" and b.volume_id]

    def _set_bdm(self, bdm_id, **values):
        with self.cell_db.session(write=True) as s:
            row = s.get(m.BlockDeviceMapping, bdm_id)
            for key, value in values.items():
                setattr(row, key, value)

    def _drop_attachments(self, ctxt, instance_uuid):
        """This cell's copy lets go of its volume attachments."""
        if self.volume_api is None:
            return
        for bdm in self._volume_bdms(instance_uuid):
            if bdm.attachment_id:
                with contextlib.suppress(Exception):  # already gone is as good
                    self.volume_api.attachment_delete(ctxt, bdm.attachment_id)
                self._set_bdm(bdm.id, attachment_id=None)

    def _plug_volumes(self, ctxt, inst, connect=True):
        """Connect (or disconnect) every volume of the guest on this host."""
        for bdm in self._volume_bdms(inst.uuid):
            if bdm.boot_index in (0, "0"):
                continue  # the root volume is the guest's disk, not a hot-plugged device
            info = json.loads(bdm.connection_info) if bdm.connection_info else {}
            info.setdefault("volume_id", bdm.volume_id)
            if connect:
                self.driver.attach_volume(ctxt, info, guest.instance_dict(inst), bdm.device_name)
            else:
                self.driver.detach_volume(ctxt, info, guest.instance_dict(inst), bdm.device_name)

    # -- destination ------------------------------------------------------------------

    def prep_snapshot_based_resize_at_dest(self, ctxt, instance_uuid, migration_uuid,
                                           new_flavor, port_profiles=None):
        """Claim for ``new_flavor`` (the driver's ``prep_resize`` may refuse the host),
        check the volumes can connect, bind ports INACTIVE here (with
        ``port_profiles``: this host's providers of their resource requests; the
        source's bindings keep theirs for a revert).

        Works on the hidden copy in this cell. On failure everything made
        here is given back and the error raised (the conductor tries an
        alternate host of this cell).
        """
        cur = records.flavors(self.cell_db, instance_uuid)["cur"] or new_flavor
        with steps.step(self, ctxt, instance_uuid, "compute_prep_snapshot_based_resize_at_dest",
                        notifications.RESIZE_PREP, flavor=cur, new_flavor=new_flavor,
                        end_always=True) as st:
            mig = guest.migration(self, migration_uuid)
            claim = None
            try:
                records.set_flavors(self.cell_db, instance_uuid, cur, old=cur, new=new_flavor)
                claim = self.rt.resize_claim(ctxt, instance_uuid, new_flavor, {
                    "uuid": migration_uuid, "source_compute": mig["source_compute"],
                    "source_node": mig["source_node"]},
                    ports=connections.sriov_ports(self, ctxt, instance_uuid), port_profiles=port_profiles)
                self.driver.prep_resize(ctxt, guest.instance_dict(st.instance), new_flavor, mig)
                connector = self.driver.get_volume_connector(guest.instance_dict(st.instance))
                if self.volume_api is not None:
                    for bdm in self._volume_bdms(instance_uuid):
                        if bdm.attachment_id:  # made by the conductor for this cell's copy
                            att = self.volume_api.attachment_update(
                                ctxt, bdm.attachment_id, connector, mountpoint=bdm.device_name)
                            self._set_bdm(bdm.id, connection_info=json.dumps(dict(
                                att.get("connection_info") or {}, volume_id=bdm.volume_id)))
                if self.network_api is not None:
                    self.network_api.bind_ports_to_host(
                        ctxt, instance_uuid, self.host,
                        port_profiles=pci.with_devices(port_profiles, claim.pci_devices))
            except Exception:
                if self.network_api is not None:
                    with cleanup.step("delete port bindings"):
                        self.network_api.delete_port_bindings(ctxt, instance_uuid, self.host)
                if claim is not None:
                    with cleanup.step("abort claim"):
                        claim.abort()
                records.set_flavors(self.cell_db, instance_uuid, cur)
                raise
            node = self.rt.compute_node or {}
            guest.migration(self, migration_uuid, dest_compute=self.host, dest_node=self.rt.nodename,
                            dest_host=node.get("host_ip") or self.host)
            st.instance = guest.get(self, instance_uuid)
        return {"host": self.host, "node": self.rt.nodename,
                "dest_host": node.get("host_ip") or self.host}

    def finish_snapshot_based_resize_at_dest(self, ctxt, instance_uuid, migration_uuid,
                                             snapshot_id=None, power_on=True):
        """Spawn the guest from the snapshot (or its volume), ports active, volumes attached.

        The copy here becomes the server in VERIFY_RESIZE (vm_state resized).
        On failure the guest is destroyed and the ports are active on the
        source host again before the error is raised.
        """
        flavors = records.flavors(self.cell_db, instance_uuid)
        new, old = flavors["new"] or flavors["cur"], flavors["old"] or flavors["cur"]
        with steps.step(self, ctxt, instance_uuid, "compute_finish_snapshot_based_resize_at_dest",
                        notifications.RESIZE_FINISH, flavor=new) as st:
            inst = st.instance
            mig = guest.migration(self, migration_uuid)
            inst = guest.update(self, instance_uuid, task_state=task_states.RESIZE_FINISH,
                                host=self.host, node=self.rt.nodename)
            spawned = activated = False
            try:
                network_info = guest.network_info_of(inst)
                if self.network_api is not None:
                    network_info = self.network_api.activate_port_bindings(
                        ctxt, instance_uuid, self.host)
                    activated = True
                    guest.save_network_info(self, instance_uuid, network_info)
                if self.volume_api is not None:
                    for bdm in self._volume_bdms(instance_uuid):
                        if bdm.attachment_id:
                            self.volume_api.attachment_complete(ctxt, bdm.attachment_id)
                spawned = True
                image_meta = {"id": snapshot_id or inst.image_ref, "properties": {}}
                self.driver.spawn(ctxt, guest.instance_dict(inst, new), image_meta,
                                  network_info=network_info,
                                  block_device_info=guest.block_device_info(self, instance_uuid),
                                  power_on=power_on)
                self.rt.apply_migration_context(ctxt, instance_uuid)
            except Exception:
                if spawned:
                    with cleanup.step("destroy"):
                        self.driver.destroy(ctxt, guest.instance_dict(inst, new),
                                            destroy_disks=True)
                if activated:
                    with cleanup.step("activate source bindings"):
                        self.network_api.activate_port_bindings(ctxt, instance_uuid,
                                                                mig["source_compute"])
                with cleanup.step("reset the copy"):
                    guest.update(self, instance_uuid, task_state=task_states.RESIZE_MIGRATED,
                                 host=mig["source_compute"], node=mig["source_node"])
                raise
            records.set_flavors(self.cell_db, instance_uuid, new, old=old, new=new,
                                vm_state=vm_states.RESIZED, task_state=None,
                                power_state=guest.power(self, instance_uuid), launched_on=self.host)
            guest.migration(self, migration_uuid, status=ms.FINISHED)
            self.rt.refresh_usage()
            st.instance = guest.get(self, instance_uuid)
        return {"host": self.host, "node": self.rt.nodename}

    def revert_snapshot_based_resize_at_dest(self, ctxt, instance_uuid, migration_uuid):
        """Destroy the guest here, delete this host's bindings, attachments and claim."""
        mig = guest.migration(self, migration_uuid)
        with steps.step(self, ctxt, instance_uuid, "compute_revert_snapshot_based_resize_at_dest",
                             None) as st:
            inst = st.instance
            self.driver.destroy(ctxt, guest.instance_dict(inst), guest.network_info_of(inst),
                                destroy_disks=True)
            if self.network_api is not None:
                # The source binding is made active again before this host's goes,
                # so the port is never left unbound.
                with contextlib.suppress(Exception):
                    self.network_api.activate_port_bindings(ctxt, instance_uuid,
                                                            mig["source_compute"])
                self.network_api.delete_port_bindings(ctxt, instance_uuid, self.host)
            self._drop_attachments(ctxt, instance_uuid)
            self.rt.drop_move_claim(ctxt, instance_uuid)
            if inst.host == self.host:
                guest.update(self, instance_uuid, host=mig["source_compute"], node=mig["source_node"])
            self.rt.refresh_usage()

    # -- source -------------------------------------------------------------------------

    def prep_snapshot_based_resize_at_source(self, ctxt, instance_uuid, migration_uuid,
                                             snapshot_id=None, clean_shutdown=True):
        """Power off, upload the root disk to image ``snapshot_id``, disconnect volumes.

        The guest and its disks stay on this host for a revert. On failure
        the guest is put back (volumes, power) before the error is raised.
        """
        flavors = records.flavors(self.cell_db, instance_uuid)
        with steps.step(self, ctxt, instance_uuid, "compute_prep_snapshot_based_resize_at_source",
                        notifications.RESIZE, flavor=flavors["cur"]) as st:
            inst = st.instance
            was_running = guest.power(self, instance_uuid) == power_state.RUNNING
            guest.migration(self, migration_uuid, status=ms.MIGRATING)
            guest.update(self, instance_uuid, task_state=task_states.RESIZE_MIGRATING)
            powered_off = unplugged = False
            try:
                self.driver.power_off(guest.instance_dict(inst),
                                      timeout=60 if clean_shutdown else 0)
                powered_off = True
                if snapshot_id:
                    # As Nova's drivers see it: the instance's task state says why.
                    self.driver.snapshot(ctxt, dict(guest.instance_dict(inst),
                                                    task_state=task_states.RESIZE_MIGRATING),
                                         snapshot_id)
                unplugged = True
                self._plug_volumes(ctxt, inst, connect=False)
            except Exception:
                if unplugged:
                    with cleanup.step("reconnect volumes"):
                        self._plug_volumes(ctxt, inst, connect=True)
                if powered_off and was_running:
                    with cleanup.step("power on"):
                        self.driver.power_on(ctxt, guest.instance_dict(inst),
                                             guest.network_info_of(inst),
                                             guest.block_device_info(self, instance_uuid))
                with cleanup.step("reset task state"):
                    guest.update(self, instance_uuid, task_state=task_states.RESIZE_PREP)
                raise
            guest.migration(self, migration_uuid, status=ms.POST_MIGRATING)
            st.instance = guest.update(self, instance_uuid, task_state=task_states.RESIZE_MIGRATED,
                                  power_state=power_state.SHUTDOWN)
        return {"snapshot_id": snapshot_id}

    def confirm_snapshot_based_resize_at_source(self, ctxt, instance_uuid, migration_uuid):
        """The move is kept: the old guest, its bindings and attachments go. The
        conductor then hard-deletes this copy."""
        with steps.step(self, ctxt, instance_uuid,
                             "compute_confirm_snapshot_based_resize_at_source", None) as st:
            inst = st.instance
            self.driver.destroy(ctxt, guest.instance_dict(inst), guest.network_info_of(inst),
                                destroy_disks=True)
            if self.network_api is not None:
                self.network_api.delete_port_bindings(ctxt, instance_uuid, self.host)
            self._drop_attachments(ctxt, instance_uuid)
            guest.migration(self, migration_uuid, status=ms.CONFIRMED)
        return ms.CONFIRMED

    def finish_revert_snapshot_based_resize_at_source(self, ctxt, instance_uuid,
                                                      migration_uuid, power_on=True):
        """The old guest back on this host with the old flavor; a revert asked for
        (the migration 'reverting') ends the migration 'reverted'."""
        flavors = records.flavors(self.cell_db, instance_uuid)
        old = flavors["old"] or flavors["cur"]
        mig = guest.migration(self, migration_uuid)
        with steps.step(self, ctxt, instance_uuid,
                             "compute_finish_revert_snapshot_based_resize_at_source") as st:
            inst = st.instance
            network_info = guest.network_info_of(inst)
            if self.network_api is not None:
                network_info = self.network_api.activate_port_bindings(ctxt, instance_uuid,
                                                                       self.host)
                guest.save_network_info(self, instance_uuid, network_info)
            if not self.driver.instance_exists({"uuid": instance_uuid}):
                self.driver.spawn(ctxt, guest.instance_dict(inst, old),
                                  {"id": inst.image_ref, "properties": {}},
                                  network_info=network_info,
                                  block_device_info=guest.block_device_info(self, instance_uuid),
                                  power_on=power_on)
            else:
                self._plug_volumes(ctxt, inst, connect=True)
                if power_on and guest.power(self, instance_uuid) != power_state.RUNNING:
                    self.driver.power_on(ctxt, guest.instance_dict(inst, old), network_info,
                                         guest.block_device_info(self, instance_uuid))
            self._back_on_source(instance_uuid, mig, old, power_on)
            self.rt.refresh_usage()
            st.instance = guest.get(self, instance_uuid)
