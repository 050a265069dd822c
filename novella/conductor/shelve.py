"""The conductor's unshelve (mixed into ConductorManager).

A shelved server still on its host is powered on there. An offloaded one is
scheduled anew inside its cell (its request spec, with the ports' resource
requests and the zone asked for if any; the host asked for if any), claimed,
and unshelved on the
chosen host, else on each alternate in turn; when none takes it, it stays
shelved_offloaded with a fault and no allocation.
"""
import logging
import types

from novella.compute import states as vm_states
from novella.conductor import utils
from novella.conductor.tasks.migrate import on_a_destination
from novella.db import records
from novella.scheduler import utils as scheduler_utils

LOG = logging.getLogger(__name__)

EVENT = "schedule_instances"  # the reference's name for the conductor's part


class ConductorShelve:
    """Needs ``conf``, ``placement``, ``scheduler`` and ConductorMoves' helpers."""

    def unshelve_instance(self, ctxt, instance_uuid, host=None):
        """``host``: the host asked for (2.91); the zone asked for is in the request spec."""
        cell, cell_db, inst = self._instance(instance_uuid)
        compute = utils.compute_api(self.conf, cell)
        image_id = records.system_metadata(cell_db, instance_uuid).get("shelved_image_id")
        try:
            with records.action_event(cell_db, ctxt, instance_uuid, EVENT):
                if inst.vm_state == vm_states.SHELVED:
                    compute.unshelve_instance(ctxt, inst.host, instance_uuid, image_id=image_id)
                    return
                spec = dict(self._load_request_spec(instance_uuid), instance_uuid=instance_uuid,
                            num_instances=1, retry=None, ignore_hosts=[], force_hosts=[],
                            force_nodes=[],
                            requested_destination={"host": host, "node": None,
                                                   "cell_uuid": cell.uuid})
                hosts = self.scheduler.select_destinations(
                    ctxt, spec, [instance_uuid], return_alternates=True)[0]
                attempt = types.SimpleNamespace(
                    host_list=hosts[:self.conf.scheduler.max_attempts], selection=None,
                    instance_uuid=instance_uuid, placement=self.placement,
                    project_id=inst.project_id, user_id=inst.user_id)
                on_a_destination(attempt, "unshelve", lambda sel: compute.unshelve_instance(
                    ctxt, sel["service_host"], instance_uuid, image_id=image_id,
                    flavor=inst.flavor,
                    port_profiles=scheduler_utils.selection_port_profiles(spec, sel),
                    availability_zone=sel.get("availability_zone")))
        except Exception as exc:  # noqa: BLE001 - the server stays as it was, with a fault
            LOG.info("unshelve of %s failed: %s", instance_uuid, exc)
            records.update_instance(cell_db, instance_uuid, task_state=None, reload=False)
            records.add_fault(cell_db, instance_uuid, exc)
        finally:
            records.finish_action(cell_db, ctxt, instance_uuid)
