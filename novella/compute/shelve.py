"""Shelve, shelve offload and unshelve on a compute host (mixed into ComputeManager).

    shelve_instance           the server's host   power off; an image-backed server's root
                                                  disk uploaded as its shelved image;
                                                  vm_state shelved (offloaded at once when
                                                  [DEFAULT] shelved_offload_time is 0, by
                                                  poll_shelved_instances after that many
                                                  seconds when it is positive)
    shelve_offload_instance   the server's host   guest destroyed, ports unbound, volumes
                                                  disconnected (a reserved attachment each),
                                                  allocation deleted: shelved_offloaded,
                                                  on no host
    unshelve_instance         the server's host   (shelved) power on
                              a scheduled host    (offloaded) claim, ports bound naming this
                                                  host's providers, volumes connected, the
                                                  guest spawned from the shelved image

A failed unshelve gives back everything it took on this host and raises
RescheduledException, so the conductor can try an alternate; the server stays
shelved_offloaded until one succeeds.
"""
import datetime
import json

import sqlalchemy as sa

from novella.compute import cleanup
from novella.compute import pci
from novella.compute import exceptions as exc_mod
from novella.compute import states as vm_states
from novella.compute.states import power_state, task_states
from novella.compute import steps
from novella.compute import volume_ops
from novella.compute import connections
from novella.compute import guest
from novella.rpc import notifications
from novella.context import get_admin_context
from novella.db import cell_models as m
from novella.db import records
from novella.placement import allocations


class ComputeShelve:
    """The shelve steps of one host; needs the attributes of ComputeManager."""

    def shelve_instance(self, ctxt, instance_uuid, image_id=None, clean_shutdown=True):
        """Power off and keep the root disk as image ``image_id`` (image-backed servers)."""
        try:
            with steps.step(self, ctxt, instance_uuid, "compute_shelve_instance",
                                 notifications.SHELVE, standalone=True) as st:
                inst = st.instance
                was_running = guest.power(self, instance_uuid) == power_state.RUNNING
                self.driver.power_off(guest.instance_dict(inst), timeout=60 if clean_shutdown else 0)
                try:
                    if image_id and not self._uploaded(ctxt, image_id):
                        self.driver.snapshot(ctxt, guest.instance_dict(inst), image_id)
                except Exception:
                    if was_running:  # the server goes on as it was
                        with cleanup.step("power the server back on"):
                            self.driver.power_on(ctxt, guest.instance_dict(inst),
                                                 guest.network_info_of(inst),
                                                 guest.block_device_info(self, instance_uuid))
                    raise
                records.set_system_metadata(self.cell_db, instance_uuid,
                                            shelved_at=records.utcnow().isoformat(),
                                            shelved_image_id=image_id, shelved_host=self.host,
                                            shelving_image_id=None)
                st.instance = guest.update(self, instance_uuid, expected_task_state=task_states.SHELVING,
                                      vm_state=vm_states.SHELVED, task_state=None,
                                      power_state=guest.power(self, instance_uuid))
        except Exception:
            if image_id and self.image_api is not None:
                with cleanup.step("delete the unfinished shelved image"):
                    self.image_api.delete(ctxt, image_id)
            raise
        if self.conf.shelved_offload_time == 0:
            guest.update(self, instance_uuid, expected_task_state=None,
                         task_state=task_states.SHELVING_OFFLOADING, reload=False)
            self.shelve_offload_instance(ctxt, instance_uuid)

    def _uploaded(self, ctxt, image_id):
        """The shelved image is already whole (a shelve that runs again after its
        host's service died past the upload)."""
        return self.image_api is not None and \
            self.image_api.get(ctxt, image_id)["status"] == "active"

    def poll_shelved_instances(self, ctxt=None):
        """Offload the servers shelved here longer than ``shelved_offload_time`` (> 0)."""
        wait = self.conf.shelved_offload_time
        if wait <= 0:
            return []
        return self._offload_shelved(ctxt, wait)

    def _offload_shelved(self, ctxt, wait):
        """Offload the servers shelved here at least ``wait`` seconds ago."""
        with self.cell_db.read_session() as s:
            shelved = s.scalars(sa.select(m.Instance.uuid).where(
                m.Instance.host == self.host, m.Instance.deleted == 0,
                m.Instance.vm_state == vm_states.SHELVED,
                m.Instance.task_state.is_(None))).all()
        due = datetime.timedelta(seconds=wait)
        offloaded = []
        for uuid in shelved:
            at = records.system_metadata(self.cell_db, uuid).get("shelved_at")
            if at and records.utcnow() - datetime.datetime.fromisoformat(at) < due:
                continue
            actx = ctxt or get_admin_context()
            with cleanup.step(f"offload shelved server {uuid}"):
                guest.update(self, uuid, expected_task_state=None,
                             task_state=task_states.SHELVING_OFFLOADING, reload=False)
                records.start_action(self.cell_db, actx, uuid, "shelveOffload")
                try:
                    self.shelve_offload_instance(actx, uuid)
                finally:
                    records.finish_action(self.cell_db, actx, uuid)
                offloaded.append(uuid)
        return offloaded

    def shelve_offload_instance(self, ctxt, instance_uuid):
        """Free this host of a shelved server: it keeps its ports, volumes and image."""
        with steps.step(self, ctxt, instance_uuid, "compute_shelve_offload_instance",
                             notifications.SHELVE_OFFLOAD, standalone=True) as st:
            inst = st.instance
            bdms = guest.bdms_of(self, instance_uuid)
            self.driver.destroy(ctxt, guest.instance_dict(inst), guest.network_info_of(inst),
                                guest.block_device_info(self, instance_uuid, bdms), destroy_disks=True)
            self._leave_host(ctxt, inst, bdms)
            st.instance = guest.update(self, 
                instance_uuid, expected_task_state=task_states.SHELVING_OFFLOADING,
                vm_state=vm_states.SHELVED_OFFLOADED, task_state=None,
                power_state=power_state.NOSTATE, host=None, node=None, launched_on=None,
                availability_zone=None)
            self.rt.instance_removed(inst)

    def _leave_host(self, ctxt, inst, bdms):
        """Ports unbound, volumes parked on a reserved attachment, allocation deleted."""
        if self.network_api is not None:
            guest.save_network_info(self, inst.uuid, self.network_api.unbind_ports(ctxt, inst.uuid))
        for bdm in bdms:
            if guest.is_volume(bdm) and self.volume_api is not None:
                parked = self.volume_api.attachment_create(ctxt, bdm.volume_id, inst.uuid)
                if bdm.attachment_id:
                    with cleanup.step("delete the volume's attachment"):
                        self.volume_api.attachment_delete(ctxt, bdm.attachment_id)
                self._set_bdm_attachment(bdm.id, parked["id"], None)
        allocations.give_back(self.placement, inst.uuid)

    def _set_bdm_attachment(self, bdm_id, attachment_id, connection_info, device=None):
        with self.cell_db.session(write=True) as s:
            row = s.get(m.BlockDeviceMapping, bdm_id)
            row.attachment_id = attachment_id
            row.connection_info = json.dumps(connection_info) if connection_info else None
            if device:
                row.device_name = device

    def unshelve_instance(self, ctxt, instance_uuid, image_id=None, flavor=None,
                          port_profiles=None, availability_zone=None):
        """The server runs again: here on its host if shelved, else from its image here."""
        inst = guest.get(self, instance_uuid)
        if inst.vm_state == vm_states.SHELVED:
            with steps.step(self, ctxt, instance_uuid, "compute_unshelve_instance",
                                 notifications.UNSHELVE, standalone=True) as st:
                self.driver.power_on(ctxt, guest.instance_dict(st.instance), guest.network_info_of(st.instance),
                                     guest.block_device_info(self, instance_uuid))
                st.instance = guest.update(self, instance_uuid, expected_task_state=task_states.UNSHELVING,
                                      vm_state=vm_states.ACTIVE, task_state=None,
                                      power_state=guest.power(self, instance_uuid))
        else:
            self._unshelve_here(ctxt, instance_uuid, image_id, flavor or records.flavor_of(inst),
                                port_profiles, availability_zone)
        records.set_system_metadata(self.cell_db, instance_uuid, shelved_at=None,
                                    shelved_image_id=None, shelved_host=None)
        if image_id and self.image_api is not None:
            with cleanup.step("delete the shelved image"):
                self.image_api.delete(ctxt, image_id)

    def _unshelve_here(self, ctxt, instance_uuid, image_id, flavor, port_profiles, zone):
        with guest.locked(self, instance_uuid):
            inst = guest.get(self, instance_uuid)
            done = {"claim": None, "network": False, "spawned": False}
            try:
                with records.action_event(self.cell_db, ctxt, instance_uuid,
                                          "compute_unshelve_instance", host=self.host):
                    guest.notify(self, ctxt, inst, notifications.event_type(notifications.UNSHELVE, "start"))
                    done["claim"] = self.rt.instance_claim(
                        ctxt, inst, flavor, ports=connections.sriov_ports(self, ctxt, instance_uuid),
                        port_profiles=port_profiles, expected_task_state=task_states.UNSHELVING,
                        expected_vm_state=vm_states.SHELVED_OFFLOADED,
                        task_state=task_states.SPAWNING, availability_zone=zone)
                    network_info = []
                    if self.network_api is not None:
                        done["network"] = True
                        network_info = self.network_api.migrate_instance_finish(
                            ctxt, instance_uuid, self.host, port_profiles=pci.with_devices(
                                port_profiles, done["claim"].pci_devices))
                        guest.save_network_info(self, instance_uuid, network_info)
                    self._connect_volumes(ctxt, inst)
                    done["spawned"] = True
                    self.driver.spawn(ctxt, guest.instance_dict(inst, flavor),
                                      {"id": image_id or inst.image_ref, "properties": {}},
                                      network_info=network_info,
                                      block_device_info=guest.block_device_info(self, instance_uuid))
                    guest.update(self, instance_uuid, expected_task_state=task_states.SPAWNING,
                                 vm_state=vm_states.ACTIVE, task_state=None,
                                 power_state=guest.power(self, instance_uuid), reload=False)
            except Exception as exc:  # noqa: BLE001 - all given back; the conductor decides
                self._unshelve_failed(ctxt, instance_uuid, done)
                raise exc_mod.RescheduledException(instance_uuid=instance_uuid,
                                                   reason=str(exc) or type(exc).__name__)
            guest.notify(self, ctxt, guest.get(self, instance_uuid),
                     notifications.event_type(notifications.UNSHELVE, "end"))

    def _connect_volumes(self, ctxt, inst):
        """Each parked attachment connected to this host, and the BDM with it."""
        if self.volume_api is None:
            return
        connector = self.driver.get_volume_connector(guest.instance_dict(inst))
        bdms = guest.bdms_of(self, inst.uuid)
        used = [b.device_name for b in bdms] + ["/dev/vda"]
        for bdm in bdms:
            if not guest.is_volume(bdm):
                continue
            # A volume attached while the server was offloaded may have no device yet
            # (and, if the API stopped half-way, no attachment).
            device = bdm.device_name or volume_ops.next_device_name(used)
            used.append(device)
            attachment_id = bdm.attachment_id or self.volume_api.attachment_create(
                ctxt, bdm.volume_id, inst.uuid)["id"]
            att = self.volume_api.attachment_update(ctxt, attachment_id, connector,
                                                    mountpoint=device)
            self.volume_api.attachment_complete(ctxt, attachment_id)
            self._set_bdm_attachment(bdm.id, attachment_id, dict(
                att.get("connection_info") or {}, volume_id=bdm.volume_id), device=device)

    def _unshelve_failed(self, ctxt, instance_uuid, done):
        """Give back what this host took: guest, ports, volume connections, claim."""
        inst = guest.get(self, instance_uuid)
        if done["spawned"]:
            with cleanup.step("destroy"):
                self.driver.destroy(ctxt, guest.instance_dict(inst), destroy_disks=True)
        with cleanup.step("park ports and volumes"):
            bdms = guest.bdms_of(self, instance_uuid)
            if done["network"] and self.network_api is not None:
                guest.save_network_info(self, instance_uuid,
                                        self.network_api.unbind_ports(ctxt, instance_uuid))
            for bdm in bdms:
                if guest.is_volume(bdm) and bdm.connection_info and self.volume_api is not None:
                    parked = self.volume_api.attachment_create(ctxt, bdm.volume_id, instance_uuid)
                    self.volume_api.attachment_delete(ctxt, bdm.attachment_id)
                    self._set_bdm_attachment(bdm.id, parked["id"], None)
        if done["claim"] is not None:
            with cleanup.step("abort claim"):
                done["claim"].abort()
        with cleanup.step("reset for another host"):
            records.update_instance(self.cell_db, instance_uuid,
                                    vm_state=vm_states.SHELVED_OFFLOADED,
                                    task_state=task_states.UNSHELVING, host=None, node=None,
                                    launched_on=None, availability_zone=None,
                                    power_state=power_state.NOSTATE, reload=False)
