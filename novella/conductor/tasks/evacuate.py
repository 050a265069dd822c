"""Evacuation inside one cell: a server whose host is down, rebuilt elsewhere.

    MigrationRecord       (as for a cold migration,  | undo: migration 'error', the server
    MigrationAllocation    tasks/migrate.py)         |   as it was, on its down host, with a
    SelectDestination                                |   fault; its allocation back to it
    RebuildAtDestination  rebuild_instance on the    | (last step: a destination that fails
                          chosen host, else on each  |   gives back what it made first)
                          alternate

The migration ends 'done', still holding the source's allocation: the down
host may still have the guest on its disk. When that host's compute service
starts again it removes what is left there and deletes the allocation; the
migration is then 'completed' (novella/compute/evacuate.py).
"""
from novella.conductor.tasks.migrate import (
    MigrationAllocation, MigrationRecord, MoveTask, SelectDestination, on_a_destination)
from novella.scheduler import utils as scheduler_utils

CONDUCTOR_EVENT = "conductor_rebuild_server"


def evacuate_tasks(mv):
    """The steps of evacuating ``mv`` (a migrate.Move), in order."""
    return [
        MigrationRecord(mv),
        MigrationAllocation(mv),
        SelectDestination(mv),
        RebuildAtDestination(mv),
    ]


class RebuildAtDestination(MoveTask):
    def execute(self):
        mv = self.mv
        on_a_destination(mv, "rebuild_instance", lambda sel: mv.compute.rebuild_instance(
            mv.ctxt, sel["service_host"], mv.instance_uuid, mv.migration_uuid,
            port_profiles=scheduler_utils.selection_port_profiles(mv.request_spec, sel),
            availability_zone=sel.get("availability_zone")))

    def rollback(self, exc):
        pass  # the last step; a failing destination gives back what it made
