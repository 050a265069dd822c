"""Unshelve: a shelved server runs again.

A shelved server still on its host is powered on there; an offloaded one is
scheduled anew inside its cell (its request spec, with the ports' resource
requests and the zone asked for if any; the host asked for if any),
claimed, and unshelved on the chosen host, else on each alternate in turn.
The composition (``unshelve_tasks``):

    UnshelveRecord        nothing to do               | undo: task state cleared, a fault (the
                                                      |   server stays shelved(_offloaded))
    PowerOnAtHost         (shelved) unshelve_instance on its host
  or
    ScheduleInCell        (offloaded) the scheduler claims | undo: the claim deleted
                          a host of the cell               |
    UnshelveOnHost        unshelve_instance on the chosen host, else on each alternate (a
                          refused claim is deleted; none left: no allocation is held)

The host's step is the point of no return: once a host runs the server,
the unshelve only goes forward.
"""
import logging

from novella.compute import states as vm_states
from novella.conductor.tasks import common
from novella.conductor.tasks.base import Task
from novella.db import cells as cells_mod
from novella.db import records
from novella.placement import allocations
from novella.scheduler import utils as scheduler_utils

LOG = logging.getLogger(__name__)

CONDUCTOR_EVENT = "schedule_instances"  # the reference's name for the conductor's part


class Unshelve(common.Recorded):
    """What one unshelve knows, shared by its tasks."""

    SERVICES = ("conf", "placement", "scheduler", "network_api", "ctxt", "cell_db", "compute")
    CELLS = ("cell",)

    def __init__(self, services, ctxt, cell, instance, request_spec, host=None):
        self.cell = cell
        self.attach(services, ctxt)
        self.instance_uuid = instance.uuid
        self.project_id, self.user_id = instance.project_id, instance.user_id
        self.vm_state = instance.vm_state
        self.shelved_host = instance.host
        self.flavor = instance.flavor
        self.image_id = records.system_metadata(self.cell_db, instance.uuid).get(
            "shelved_image_id")
        self.request_spec = request_spec
        self.target_host = host
        self.host_list = []
        self.selection = None

    def attach(self, services, ctxt):
        self.conf, self.placement, self.scheduler = (services.conf, services.placement,
                                                     services.scheduler)
        self.network_api = getattr(services, "network_api", None)
        self.ctxt = ctxt
        self.cell_db = cells_mod.cell_database(self.cell)
        self.compute = common.compute_api(self.conf, self.cell)


    def places(self):
        return [(self.cell, self.selection["service_host"] if self.selection else None)]


def unshelve_tasks(unshelve):
    if unshelve.vm_state == vm_states.SHELVED:
        return [UnshelveRecord(unshelve), PowerOnAtHost(unshelve)]
    return [UnshelveRecord(unshelve), ScheduleInCell(unshelve), UnshelveOnHost(unshelve)]


class UnshelveTask(Task):
    def __init__(self, unshelve):
        self.unshelve = unshelve

    def settled(self):
        """The server runs (on whichever host took it)."""
        with self.unshelve.cell_db.read_session() as s:
            inst = records.get_instance(s, self.unshelve.instance_uuid)
            return inst.vm_state == vm_states.ACTIVE and inst.task_state is None


class UnshelveRecord(UnshelveTask):
    """On failure the server stays as it was, with a fault."""

    def execute(self):
        pass

    def undo(self, exc):
        u = self.unshelve
        LOG.info("unshelve of %s failed: %s", u.instance_uuid, exc)
        records.update_instance(u.cell_db, u.instance_uuid, task_state=None, reload=False)
        records.add_fault(u.cell_db, u.instance_uuid, exc)


class PowerOnAtHost(UnshelveTask):
    no_return = True

    def execute(self):
        u = self.unshelve
        u.compute.unshelve_instance(u.ctxt, u.shelved_host, u.instance_uuid,
                                    image_id=u.image_id)


class ScheduleInCell(UnshelveTask):
    def execute(self):
        u = self.unshelve
        u.request_spec = dict(u.request_spec, instance_uuid=u.instance_uuid, num_instances=1,
                              retry=None, ignore_hosts=[], force_hosts=[], force_nodes=[],
                              requested_destination={"host": u.target_host, "node": None,
                                                     "cell_uuid": u.cell.uuid})
        hosts = u.scheduler.select_destinations(u.ctxt, u.request_spec, [u.instance_uuid],
                                                return_alternates=True)[0]
        u.host_list = hosts[:u.conf.scheduler.max_attempts]

    def undo(self, exc):
        # The scheduler's claim: an offloaded server holds nothing else.
        allocations.give_back(self.unshelve.placement, self.unshelve.instance_uuid)


class UnshelveOnHost(UnshelveTask):
    """The point of no return: a host runs the server."""

    no_return = True

    def execute(self):
        u = self.unshelve
        # A host that died once the server ran there took it (no alternate is tried).
        common.on_a_destination(u, "unshelve", lambda sel: common.unless_settled(
            self, u.compute.unshelve_instance,
            u.ctxt, sel["service_host"], u.instance_uuid, image_id=u.image_id, flavor=u.flavor,
            port_profiles=scheduler_utils.selection_port_profiles(u.request_spec, sel),
            availability_zone=sel.get("availability_zone")))
