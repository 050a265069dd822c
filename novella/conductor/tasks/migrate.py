"""Resize and cold migrate inside one cell, with migration-owned allocations.

The composition, in order, and what each step undoes when a later one fails:

    MigrationRecord       nothing to do              | undo: migration 'error', server back to
                                                     |   its flavor and state on the source, fault
    MigrationAllocation   the instance's source      | undo: hand it back to the instance,
                          allocation -> migration    |   replacing any destination claim
                          (one POST /allocations)    |   (one POST /allocations)
    SelectDestination     the scheduler claims the   | undo: nothing of its own (the claim is
                          destination for the        |   replaced by the step above)
                          instance; alternates kept  |
    PrepResizeAtDest      prep_resize (resize claim) | undo: destination revert_resize (claim
                          rescheduling to alternates |   and guest dropped)
    ResizeInstance        source power off, disks    | undo: destination revert_resize, then
                          copied to the destination  |   source finish_revert_resize (disks, power)
    FinishResize          destination spawns with    | (last step: a failure here is undone by
                          the new flavor             |   the steps above)

A failing step undoes its own half-done work (compute cleans up a failed
claim or disk move) and the completed steps are undone newest first.
"""
import logging

from novella.compute.states import migration_status as ms, power_state, task_states
from novella.conductor import utils
from novella.conductor.tasks.base import Task
from novella.db import cells as cells_mod
from novella.db import moves as dbmoves
from novella.db import records
from novella.placement import client as placement_client
from novella.scheduler import utils as scheduler_utils

LOG = logging.getLogger(__name__)

CONDUCTOR_EVENT = "conductor_migrate_server"


class MaxRetriesExceeded(Exception):
    code = 500

    def __init__(self, instance_uuid, reasons=()):
        self.message = ("Exceeded maximum number of retries. Exhausted all hosts available "
                        f"for retrying migration of instance {instance_uuid}"
                        + (f": {'; '.join(reasons)}" if reasons else "."))
        super().__init__(self.message)


class Move:
    """What one resize or cold migration knows, shared by its tasks."""

    def __init__(self, conf, placement, scheduler, ctxt, cell, instance, migration,
                 new_flavor, request_spec, target_host=None, clean_shutdown=True):
        self.conf = conf
        self.placement = placement
        self.scheduler = scheduler
        self.ctxt = ctxt
        self.cell = cell
        self.cell_db = cells_mod.cell_database(cell)
        self.compute = utils.compute_api(conf, cell)
        self.instance_uuid = instance.uuid
        self.project_id, self.user_id = instance.project_id, instance.user_id
        self.source_host, self.source_node = instance.host, instance.node
        self.source_zone = instance.availability_zone
        self.vm_state = instance.vm_state
        self.was_running = instance.power_state == power_state.RUNNING
        self.migration = migration
        self.migration_uuid = migration["uuid"]
        self.old_flavor = instance.flavor
        self.new_flavor = new_flavor
        self.request_spec = request_spec
        self.target_host = target_host
        self.clean_shutdown = clean_shutdown
        self.host_list = []
        self.selection = None
        self.disk_info = None
        self.dest_reverted = False
        self.attachments = {}  # live migration: {volume id: the destination's attachment}

    @property
    def is_resize(self):
        return self.migration["migration_type"] == "resize"

    @property
    def dest_host(self):
        return self.selection["service_host"]


def migrate_tasks(mv):
    """The steps of moving server ``mv`` (a Move), in order."""
    return [
        MigrationRecord(mv),
        MigrationAllocation(mv),
        SelectDestination(mv),
        PrepResizeAtDest(mv),
        ResizeInstance(mv),
        FinishResize(mv),
    ]


class MoveTask(Task):
    def __init__(self, move):
        self.mv = move


def on_a_destination(mv, what, prepare):
    """``prepare(selection)`` on the chosen destination, else on each alternate in turn.

    An alternate is claimed in placement first (the instance as consumer) and
    a host that refuses has its claim deleted before the next is tried.
    Returns what ``prepare`` returned; raises MaxRetriesExceeded when no host
    accepts. ``what`` names the step in the log.
    """
    reasons = []
    for attempt, sel in enumerate(mv.host_list):
        if attempt and not _claim_alternate(mv, sel):
            reasons.append(f"{sel['service_host']}: claim refused")
            continue
        mv.selection = sel
        try:
            return prepare(sel)
        except Exception as exc:  # noqa: BLE001 - the host said no: try the next one
            LOG.info("%s of %s on %s failed: %s", what, mv.instance_uuid,
                     sel["service_host"], exc)
            reasons.append(f"{sel['service_host']}: {exc}")
        mv.placement.delete_allocations(mv.instance_uuid)  # release the refused claim
    mv.selection = None
    raise MaxRetriesExceeded(mv.instance_uuid, reasons)


def _claim_alternate(mv, sel):
    request = sel["allocation_request"]
    try:
        return mv.placement.put_allocations(
            mv.instance_uuid, request["allocations"], mv.project_id, mv.user_id,
            consumer_generation=None, mappings=request.get("mappings"))
    except placement_client.Conflict as exc:
        LOG.info("alternate %s for %s refused: %s", sel["service_host"], mv.instance_uuid, exc)
        return False


class MigrationRecord(MoveTask):
    """On failure: the migration in error, the server as it was, with a fault."""

    def execute(self):
        pass

    def rollback(self, exc):
        mv = self.mv
        dbmoves.update_migration(mv.cell_db, mv.migration_uuid, status=ms.ERROR)
        try:
            dbmoves.set_flavors(mv.cell_db, mv.instance_uuid, mv.old_flavor,
                                host=mv.source_host, node=mv.source_node,
                                availability_zone=mv.source_zone,
                                vm_state=mv.vm_state, task_state=None)
        except records.InstanceNotFound:
            return
        records.add_fault(mv.cell_db, mv.instance_uuid, exc)


class MigrationAllocation(MoveTask):
    """The migration owns the source allocation while the server moves."""

    def execute(self):
        mv = self.mv
        if not mv.placement.move_allocations(mv.instance_uuid, mv.migration_uuid, retries=3):
            raise placement_client.PlacementError(
                "PUT", f"/allocations/{mv.instance_uuid}", 409,
                detail=f"Instance {mv.instance_uuid} has no allocation to move")

    def rollback(self, exc):
        mv = self.mv
        mv.placement.move_allocations(mv.migration_uuid, mv.instance_uuid,
                                      target_consumer_type="INSTANCE", retries=3)
        # A delete that came in during the move may already have freed the
        # instance's allocation: what was just handed back must not outlive it.
        if _being_deleted(mv):
            mv.placement.delete_allocations(mv.instance_uuid)


def _being_deleted(mv):
    with mv.cell_db.read_session() as s:
        try:
            inst = records.get_instance(s, mv.instance_uuid, read_deleted=True)
        except records.InstanceNotFound:
            return True
        return bool(inst.deleted) or inst.task_state == task_states.DELETING


class SelectDestination(MoveTask):
    """The scheduler picks and claims the destination (the instance is the consumer)."""

    def execute(self):
        mv = self.mv
        spec = dict(mv.request_spec, instance_uuid=mv.instance_uuid, num_instances=1,
                    flavor=mv.new_flavor, retry=None, force_hosts=[], force_nodes=[])
        spec["requested_destination"] = {"host": mv.target_host, "node": None,
                                         "cell_uuid": mv.cell.uuid}
        same_host_ok = mv.is_resize and mv.conf.allow_resize_to_same_host
        spec["ignore_hosts"] = [] if same_host_ok else [mv.source_host]
        host_lists = mv.scheduler.select_destinations(mv.ctxt, spec, [mv.instance_uuid],
                                                      return_alternates=True)
        mv.host_list = host_lists[0][:mv.conf.scheduler.max_attempts]
        mv.selection = mv.host_list[0]

    def rollback(self, exc):
        pass  # MigrationAllocation's undo replaces the instance's claim atomically


class PrepResizeAtDest(MoveTask):
    """prep_resize on the chosen host, else on each alternate in turn."""

    def execute(self):
        mv = self.mv
        on_a_destination(mv, "prep_resize", lambda sel: mv.compute.prep_resize(
            mv.ctxt, sel["service_host"], mv.instance_uuid, mv.migration_uuid, mv.new_flavor))

    def rollback(self, exc):
        mv = self.mv
        if not mv.dest_reverted:
            mv.compute.revert_resize(mv.ctxt, mv.dest_host, mv.instance_uuid,
                                     mv.migration_uuid, rollback=True)
            mv.dest_reverted = True


class ResizeInstance(MoveTask):
    def execute(self):
        mv = self.mv
        mv.disk_info = mv.compute.resize_instance(mv.ctxt, mv.source_host, mv.instance_uuid,
                                                  mv.migration_uuid, mv.clean_shutdown)

    def rollback(self, exc):
        mv = self.mv
        # The destination first: on the same host its guest directory is
        # where the source's copy goes back.
        mv.compute.revert_resize(mv.ctxt, mv.dest_host, mv.instance_uuid, mv.migration_uuid,
                                 rollback=True)
        mv.dest_reverted = True
        mv.compute.finish_revert_resize(
            mv.ctxt, mv.source_host, mv.instance_uuid, mv.migration_uuid,
            power_on=mv.was_running, rollback=True, availability_zone=mv.source_zone,
            port_profiles=utils.held_port_profiles(mv.placement, mv.request_spec,
                                                   mv.migration_uuid))


class FinishResize(MoveTask):
    def execute(self):
        mv = self.mv
        # The server shows its new host's zone (the scheduler kept a server
        # that asked for a zone in it).
        # The ports' bindings name the destination's providers.
        mv.compute.finish_resize(
            mv.ctxt, mv.dest_host, mv.instance_uuid, mv.migration_uuid,
            disk_info=mv.disk_info, power_on=mv.was_running,
            availability_zone=mv.selection.get("availability_zone"),
            port_profiles=scheduler_utils.selection_port_profiles(mv.request_spec, mv.selection))
