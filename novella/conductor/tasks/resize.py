"""Resize and cold migrate inside one cell, with migration-owned allocations.

The composition (``resize_tasks``), in order, and what each step undoes when
a later one fails:

    MigrationRecord       \\                         (tasks/common.py)
    MigrationAllocation    > the first steps of every move
    SelectDestination     /
    PrepResizeAtDest      prep_resize (resize claim) | undo: destination revert_resize (claim
                          rescheduling to alternates |   and guest dropped)
    ResizeInstance        source power off, disks    | undo: destination revert_resize, then
                          copied to the destination  |   source finish_revert_resize (disks, power)
    FinishResize          destination spawns with    | (last step: a failure here is undone by
                          the new flavor             |   the steps above)

A failing step undoes its own half-done work (compute cleans up a failed
claim or disk move) and the completed steps are undone newest first.

In VERIFY_RESIZE the server is confirmed (``confirm_tasks``: the source
host drops its copy, then the migration's allocation goes) or reverted
(``revert_tasks``: the destination drops the new guest, then its allocation
(the instance's) goes; the migration's allocation is handed back to the
instance, then the source brings the old guest back). Every allocation
change is novella/placement/allocations.py's, made here, never by a host.
"""
from novella.compute.states import migration_status as ms
from novella.conductor.tasks import common
from novella.conductor.tasks.common import MoveTask, ResizedTask
from novella.db import aggregates
from novella.db import records
from novella.db import request_specs
from novella.placement import allocations
from novella.scheduler import utils as scheduler_utils

CONDUCTOR_EVENT = "conductor_migrate_server"


def resize_tasks(move):
    """The steps of resizing or cold migrating ``move`` inside its cell, in order."""
    return common.first_steps(move) + in_cell_steps(move)


def in_cell_steps(move):
    """The steps after the destination is chosen, when it is in the server's cell."""
    return [PrepResizeAtDest(move), ResizeInstance(move), FinishResize(move),
            RecordNewFlavor(move)]


class PrepResizeAtDest(MoveTask):
    """prep_resize on the chosen host, else on each alternate in turn."""

    def execute(self):
        move = self.move
        common.prepare_destination(move, move.compute.prep_resize, move.new_flavor)

    def undo(self, exc):
        move = self.move
        if not move.dest_reverted:
            common.roll_back_destination(move, lambda: move.compute.revert_resize(
                move.ctxt, move.dest_host, move.instance_uuid, move.migration_uuid))
            move.dest_reverted = True


class ResizeInstance(MoveTask):
    def execute(self):
        move = self.move
        move.disk_info = move.compute.resize_instance(
            move.ctxt, move.source_host, move.instance_uuid, move.migration_uuid,
            move.clean_shutdown)

    def undo(self, exc):
        move = self.move
        # The destination first: on the same host its guest directory is
        # where the source's copy goes back. A destination that does not answer
        # must not keep the source from taking its guest back.
        if move.dest_host == move.source_host:
            move.compute.revert_resize(move.ctxt, move.dest_host, move.instance_uuid,
                                       move.migration_uuid)
        else:
            common.roll_back_destination(move, lambda: move.compute.revert_resize(
                move.ctxt, move.dest_host, move.instance_uuid, move.migration_uuid))
        move.dest_reverted = True
        move.compute.finish_revert_resize(
            move.ctxt, move.source_host, move.instance_uuid, move.migration_uuid,
            power_on=move.was_running, availability_zone=move.source_zone,
            port_profiles=common.held_port_profiles(move.placement, move.request_spec,
                                                    move.migration_uuid))


class FinishResize(MoveTask):
    def execute(self):
        move = self.move
        # The server shows its new host's zone (the scheduler kept a server
        # that asked for a zone in it); the ports' bindings name the
        # destination's providers.
        move.compute.finish_resize(
            move.ctxt, move.dest_host, move.instance_uuid, move.migration_uuid,
            disk_info=move.disk_info, power_on=move.was_running,
            availability_zone=move.selection.get("availability_zone"),
            port_profiles=scheduler_utils.selection_port_profiles(move.request_spec,
                                                                  move.selection))


class RecordNewFlavor(MoveTask):
    """Later moves schedule with the flavor the server has now."""

    def execute(self):
        request_specs.update(self.move.api_db, self.move.instance_uuid,
                             known=self.move.request_spec, flavor=self.move.new_flavor)

    def undo(self, exc):
        request_specs.update(self.move.api_db, self.move.instance_uuid,
                             flavor=self.move.old_flavor)


# -- confirm and revert ---------------------------------------------------------------

def confirm_tasks(resized):
    """Confirm: the source host lets go of the old guest and its allocation."""
    return [ConfirmAtSource(resized)]


def revert_tasks(resized):
    """Revert: the destination lets go, then the source takes the server back."""
    return [RevertAtDest(resized), FinishRevertAtSource(resized), RecordOldFlavor(resized)]


class ConfirmAtSource(ResizedTask):
    """The old guest and its claim go, then the migration's allocation (the source's)."""

    def execute(self):
        resized = self.resized
        status = resized.source_compute.confirm_resize(
            resized.ctxt, resized.source_host, resized.instance_uuid, resized.migration_uuid)
        if status == ms.CONFIRMED:  # not when a revert took the migration meanwhile
            allocations.confirm(resized.placement, resized.migration_uuid)


class RevertAtDest(ResizedTask):
    """The new guest and the instance's allocation (the destination's) go."""

    def execute(self):
        resized = self.resized
        resized.dest_compute.revert_resize(resized.ctxt, resized.dest_host,
                                           resized.instance_uuid, resized.migration_uuid)
        allocations.give_back(resized.placement, resized.instance_uuid)


class FinishRevertAtSource(ResizedTask):
    """The migration's allocation handed back to the instance; the old guest back."""

    def execute(self):
        resized = self.resized
        port_profiles = common.held_port_profiles(
            resized.placement, request_specs.get(resized.api_db, resized.instance_uuid),
            resized.migration_uuid, resized.instance_uuid)
        allocations.hand_back(resized.placement, resized.migration_uuid, resized.instance_uuid)
        resized.source_compute.finish_revert_resize(
            resized.ctxt, resized.source_host, resized.instance_uuid, resized.migration_uuid,
            power_on=resized.power_on,
            availability_zone=aggregates.host_availability_zone(
                resized.api_db, resized.source_host, resized.conf.default_availability_zone),
            port_profiles=port_profiles)


class RecordOldFlavor(ResizedTask):
    """Later moves schedule with the flavor the server has again."""

    def execute(self):
        resized = self.resized
        flavor = records.flavors(resized.instance_db, resized.instance_uuid)["cur"]
        request_specs.update(resized.api_db, resized.instance_uuid, flavor=flavor)
