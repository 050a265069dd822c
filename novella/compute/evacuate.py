"""Evacuation on compute hosts (mixed into ComputeManager).

    rebuild_instance                 destination  claim, INACTIVE port bindings naming this
                                                  host's providers, a second attachment of
                                                  each volume, the guest spawned from its
                                                  image; then the server is this host's:
                                                  bindings active, attachments switched
                                                  (the down host's deleted), migration 'done'
    (init_host) _clean_evacuated     source       when the host is back: the guest left here
                                                  destroyed, its bindings here deleted, the
                                                  migration's allocation (the source's)
                                                  deleted, migration 'completed'

Until the source host is back, the migration holds the source's allocation:
the resources there stay counted, as the guest may still exist on its disk.
A destination that fails gives back all it made and raises, so the conductor
can try an alternate.
"""
import sqlalchemy as sa

from novella.compute import cleanup
from novella.compute import states as vm_states
from novella.compute.states import migration_status as ms, task_states
from novella.compute import steps
from novella.compute import connections
from novella.compute import guest
from novella.rpc import notifications
from novella.db import cell_models as m
from novella.db import records
from novella.placement import allocations


class ComputeEvacuate:
    """The evacuation steps of one host; needs the attributes of ComputeManager."""

    def rebuild_instance(self, ctxt, instance_uuid, migration_uuid, port_profiles=None,
                         availability_zone=None):
        """Rebuild here a server whose host is down (evacuate)."""
        with steps.step(self, ctxt, instance_uuid, "compute_rebuild_instance",
                        notifications.REBUILD) as st:
            inst = st.instance
            flavor = records.flavor_of(inst)
            made = {"claim": None, "bindings": False, "attachments": {}, "spawned": False}
            try:
                block_device_info = connections.take_in(self, ctxt, inst, migration_uuid, port_profiles,
                                                  made)
                made["spawned"] = True
                self.driver.spawn(ctxt, guest.instance_dict(inst, flavor),
                                  {"id": inst.image_ref, "properties": {}},
                                  network_info=guest.network_info_of(inst),
                                  block_device_info=block_device_info)
            except Exception:
                if made["spawned"]:
                    with cleanup.step("destroy"):
                        self.driver.destroy(ctxt, guest.instance_dict(inst), destroy_disks=True)
                connections.undo_destination(self, ctxt, instance_uuid, made["bindings"],
                                       made["attachments"], made["claim"] is not None)
                raise
            # The server is this host's from here.
            if self.network_api is not None:
                guest.save_network_info(self, instance_uuid, self.network_api.activate_port_bindings(
                    ctxt, instance_uuid, self.host))
            connections.switch_attachments(self, ctxt, instance_uuid, made["attachments"])
            if inst.vm_state == vm_states.STOPPED:
                self.driver.power_off(guest.instance_dict(inst))
            self.rt.apply_migration_context(ctxt, instance_uuid)
            records.update_instance(
                self.cell_db, instance_uuid, expected_task_state=task_states.REBUILDING,
                host=self.host, node=self.rt.nodename, launched_on=self.host, task_state=None,
                vm_state=(vm_states.STOPPED if inst.vm_state == vm_states.STOPPED
                          else vm_states.ACTIVE),
                power_state=guest.power(self, instance_uuid), availability_zone=availability_zone,
                reload=False)
            self.rt.drop_move_claim(ctxt, instance_uuid)
            guest.migration(self, migration_uuid, status=ms.DONE, dest_compute=self.host,
                            dest_node=self.rt.nodename)

    def _clean_evacuated(self, ctxt):
        """Servers evacuated while this host was down: what is left of them here goes."""
        with self.cell_db.read_session() as s:
            done = s.execute(sa.select(m.Migration.uuid, m.Migration.instance_uuid).where(
                m.Migration.source_compute == self.host, m.Migration.deleted == 0,
                m.Migration.migration_type == "evacuation",
                m.Migration.status == ms.DONE)).all()
        for migration_uuid, instance_uuid in done:
            with cleanup.step(f"clean up evacuated server {instance_uuid}"):
                if self.driver.instance_exists({"uuid": instance_uuid}):
                    self.driver.destroy(ctxt, {"uuid": instance_uuid}, destroy_disks=True)
                if self.network_api is not None:
                    self.network_api.delete_port_bindings(ctxt, instance_uuid, self.host)
                allocations.confirm(self.placement, migration_uuid)
                guest.migration(self, migration_uuid, status=ms.COMPLETED)
