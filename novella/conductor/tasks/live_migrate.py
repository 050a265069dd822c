"""Live migration inside one cell, with a migration-owned source allocation.

The composition, in order, and what each step undoes when a later one fails:

    MigrationRecord       \\                         (tasks/common.py)
    MigrationAllocation    > the first steps of every move
    SelectDestination     /
    PrepareAtDestination  claim, INACTIVE bindings   | undo: destination rollback (the guest
                          naming the destination's   |   copy, bindings, attachments, claim)
                          providers, attachments,    |
                          pre_live_migration; the    |
                          next alternate on refusal  |
    LiveMigrate           the source moves the       | undo: a copy still running is told to
                          running guest (an abort    |   stop (the source guest runs on; the
                          asked for stops it: the    |   destination's copy goes above)
                          rollback, then 'cancelled')|
    PostAtDestination     the destination takes the  | (the point of no return: a failure
                          server: bindings active,   |   here is undone above; once done,
                          attachments, host          |   the move only goes forward)
    CleanUpSource         what is left on the source goes, the migration's allocation (the
                          source's) is deleted, migration 'completed'
"""
from novella import rpc
from novella.compute import cleanup
from novella.compute import exceptions as compute_exceptions
from novella.compute.states import migration_status as ms
from novella.conductor.tasks import common
from novella.conductor.tasks.common import MoveTask
from novella.db import migration_records
from novella.db import records
from novella.placement import allocations

CONDUCTOR_EVENT = "conductor_live_migrate_instance"


def live_migrate_tasks(move):
    """The steps of live-migrating ``move`` (a common.Move), in order."""
    return common.first_steps(move) + [PrepareAtDestination(move), LiveMigrate(move),
                                       PostAtDestination(move), CleanUpSource(move)]


class PrepareAtDestination(MoveTask):
    """The destination readies itself, else each alternate in turn."""

    def execute(self):
        move = self.move
        prepared = common.prepare_destination(move, self.prepare_live_migration_at_destination)
        move.attachments = prepared["attachments"]

    def prepare_live_migration_at_destination(self, ctxt, host, instance_uuid, migration_uuid,
                                              port_profiles=None):
        """One destination's preparation. One that fails is rolled back as the
        reference rolls back a failed pre_live_migration: the source tells its
        rollback (instance.live_migration_rollback), the destination its own
        (instance.live_migration_rollback_dest), before the next alternate."""
        move = self.move
        try:
            return move.compute.prepare_live_migration_at_destination(
                ctxt, host, instance_uuid, migration_uuid, port_profiles=port_profiles)
        except rpc.Timeout:
            raise  # a destination that does not answer is cleaned up from outside
        except Exception:
            with cleanup.step("roll back a failed live-migration destination"):
                move.compute.rollback_live_migration_at_source(
                    ctxt, move.source_host, instance_uuid, migration_uuid, copy_started=False)
                move.compute.rollback_live_migration_at_destination(
                    ctxt, host, instance_uuid, migration_uuid)
            raise

    def undo(self, exc):
        move = self.move
        common.roll_back_destination(move, lambda: (
            move.compute.rollback_live_migration_at_destination(
                move.ctxt, move.dest_host, move.instance_uuid, move.migration_uuid,
                attachments=move.attachments)), attachments=move.attachments)


class LiveMigrate(MoveTask):
    """The source copies the running guest; an abort asked for meanwhile
    (``DELETE /servers/{id}/migrations/{id}``) makes it fail, and the
    rollback then marks the migration 'cancelled' rather than 'error'."""

    def execute(self):
        move = self.move
        try:
            move.compute.live_migration(move.ctxt, move.source_host, move.instance_uuid,
                                        move.migration_uuid, move.dest_host)
        except compute_exceptions.LiveMigrationAborted:
            move.cancelled = True  # saved with the step's failure
            self.undo(None)
            raise
        except Exception:
            self.undo(None)  # the source tells its rollback
            raise

    def undo(self, exc):
        # The source's guest never stopped; the destination's copy goes above. A
        # copy that may still run (its conductor died during it) is stopped, so
        # that nothing arrives at the destination after its rollback.
        move = self.move
        move.compute.rollback_live_migration_at_source(move.ctxt, move.source_host,
                                                       move.instance_uuid, move.migration_uuid)


class PostAtDestination(MoveTask):
    """The point of no return: the server is the destination's."""

    no_return = True

    def execute(self):
        move = self.move
        # A destination that died once the server's records were its own (its guest
        # runs there) took over.
        common.unless_settled(self, move.compute.post_live_migration_at_destination,
                              move.ctxt, move.dest_host, move.instance_uuid,
                              move.migration_uuid, attachments=move.attachments)

    def settled(self):
        move = self.move
        with move.cell_db.read_session() as s:
            inst = records.get_instance(s, move.instance_uuid)
            return inst.host == move.dest_host and inst.task_state is None


class CleanUpSource(MoveTask):
    """Past the point of no return: the source cleaned up, its allocation freed."""

    def execute(self):
        move = self.move
        with cleanup.step("clean up the source after a live migration"):
            try:
                move.compute.post_live_migration_at_source(
                    move.ctxt, move.source_host, move.instance_uuid, move.migration_uuid)
            except rpc.Timeout:  # its guest goes when it starts again (reconcile_moves)
                common.unanswered(move, move.source_host)
        allocations.confirm(move.placement, move.migration_uuid)
        migration_records.update(move.cell_db, move.migration_uuid, status=ms.COMPLETED)
