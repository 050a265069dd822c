"""Live migration inside one cell, with a migration-owned source allocation.

The composition, in order, and what each step undoes when a later one fails:

    MigrationRecord       (as for a cold migration,  | undo: migration 'error', the server
    MigrationAllocation    tasks/migrate.py)         |   as it was on the source with a fault;
    SelectDestination                                |   its allocation back to the instance
    PrepareAtDestination  claim, INACTIVE bindings   | undo: destination rollback (the guest
                          naming the destination's   |   copy, bindings, attachments, claim)
                          providers, attachments,    |
                          pre_live_migration; the    |
                          next alternate on refusal  |
    LiveMigrate           the source moves the       | undo: nothing of its own (the source
                          running guest              |   guest runs on; the copy goes above)
    PostAtDestination     the destination takes the  | (last undoable step)
                          server: bindings active,   |
                          attachments, host

After the last step the move cannot be undone: ``complete`` removes what is
left on the source, deletes the migration's allocation (the source's) and
marks the migration completed.
"""
from novella.compute import cleanup
from novella.compute.states import migration_status as ms
from novella.conductor.tasks.migrate import (
    MigrationAllocation, MigrationRecord, MoveTask, SelectDestination, on_a_destination)
from novella.db import moves as dbmoves
from novella.scheduler import utils as scheduler_utils

CONDUCTOR_EVENT = "conductor_live_migrate_instance"


def live_migrate_tasks(mv):
    """The steps of live-migrating ``mv`` (a migrate.Move), in order."""
    return [
        MigrationRecord(mv),
        MigrationAllocation(mv),
        SelectDestination(mv),
        PrepareAtDestination(mv),
        LiveMigrate(mv),
        PostAtDestination(mv),
    ]


class PrepareAtDestination(MoveTask):
    """The destination readies itself, else each alternate in turn."""

    def execute(self):
        mv = self.mv
        prepared = on_a_destination(mv, "prepare_live_migration_at_destination", lambda sel:
                                    mv.compute.prepare_live_migration_at_destination(
                                        mv.ctxt, sel["service_host"], mv.instance_uuid,
                                        mv.migration_uuid,
                                        port_profiles=scheduler_utils.selection_port_profiles(
                                            mv.request_spec, sel)))
        mv.attachments = prepared["attachments"]

    def rollback(self, exc):
        mv = self.mv
        mv.compute.rollback_live_migration_at_destination(
            mv.ctxt, mv.dest_host, mv.instance_uuid, mv.migration_uuid,
            attachments=mv.attachments)


class LiveMigrate(MoveTask):
    def execute(self):
        mv = self.mv
        mv.compute.live_migration(mv.ctxt, mv.source_host, mv.instance_uuid,
                                  mv.migration_uuid, mv.dest_host)

    def rollback(self, exc):
        pass  # the source's guest never stopped; the destination's copy goes above


class PostAtDestination(MoveTask):
    def execute(self):
        mv = self.mv
        mv.compute.post_live_migration_at_destination(
            mv.ctxt, mv.dest_host, mv.instance_uuid, mv.migration_uuid,
            attachments=mv.attachments)

    def rollback(self, exc):
        pass  # a failing destination undoes its own half-done step


def complete(mv):
    """Past the point of no return: the source cleaned up, its allocation freed."""
    with cleanup.step("clean up the source after a live migration"):
        mv.compute.post_live_migration_at_source(mv.ctxt, mv.source_host, mv.instance_uuid,
                                                 mv.migration_uuid)
    mv.placement.delete_allocations(mv.migration_uuid)
    dbmoves.update_migration(mv.cell_db, mv.migration_uuid, status=ms.COMPLETED)
