"""Evacuation inside one cell: a server whose host is down, rebuilt elsewhere.

    MigrationRecord       \\                         (tasks/common.py; the server goes back
    MigrationAllocation    > the first steps of      |  to its down host on undo)
    SelectDestination     /  every move
    RebuildAtDestination  rebuild_instance on the    | (the point of no return, and the last
                          chosen host, else on each  |   step: a destination that fails gives
                          alternate                  |   back what it made first; once the
                                                     |   migration says 'done' the server is
                                                     |   the destination's) undo: each host
                                                     |   tried gives back what it made
                                                     |   (abandon_rebuild), a host that does
                                                     |   not answer is cleaned from outside

The migration ends 'done', still holding the source's allocation: the down
host may still have the guest on its disk. When that host's compute service
starts again it removes what is left there and deletes the allocation; the
migration is then 'completed' (novella/compute/evacuate.py).
"""
from novella import rpc
from novella.compute import connections
from novella.compute.states import migration_status as ms
from novella.conductor.tasks import common
from novella.conductor.tasks.common import MoveTask
from novella.db import migration_records
from novella.db import records
from novella.rpc import notifications
from novella.scheduler import utils as scheduler_utils

CONDUCTOR_EVENT = "conductor_rebuild_server"


def evacuate_tasks(move):
    """The steps of evacuating ``move`` (a common.Move), in order."""
    return common.first_steps(move) + [RebuildAtDestination(move)]


class RebuildAtDestination(MoveTask):
    no_return = True

    def execute(self):
        move = self.move

        def scheduled(sel):
            if move.notify is not None:
                move.notify(move.ctxt, move.cell_db, move.instance_uuid,
                            notifications.REBUILD_SCHEDULED, host=sel["service_host"])
        # A destination that died once the server's row named it (its guest runs there)
        # took it over; it finishes its part when it starts (finish_taken_over).
        common.on_a_destination(move, "rebuild_instance", lambda sel: scheduled(sel) or (
            common.unless_settled(
                self, move.compute.rebuild_instance,
                move.ctxt, sel["service_host"], move.instance_uuid, move.migration_uuid,
                port_profiles=scheduler_utils.selection_port_profiles(move.request_spec, sel),
                availability_zone=sel.get("availability_zone"))))

    def undo(self, exc):
        """The rebuild stopped part-way (no host took the server, or the process died
        in it): each host it may have begun on gives back what it made there; for
        one that does not answer, its bindings and attachments go from outside."""
        move = self.move
        for sel in move.host_list or ():
            host = sel["service_host"]
            try:
                move.compute.abandon_rebuild(move.ctxt, host, move.instance_uuid,
                                             move.migration_uuid)
            except rpc.Timeout:
                common.unanswered(move, host, connections.strays(
                    move.volume_api, move.cell_db, move.ctxt, move.instance_uuid))

    def settled(self):
        """The destination took the server (its row names it), or the migration ended."""
        move = self.move
        migration = migration_records.get(move.cell_db, move.migration_uuid)
        with move.cell_db.read_session() as s:
            host = records.get_instance(s, move.instance_uuid, read_deleted=True).host
        return migration["status"] in (ms.DONE, ms.COMPLETED) or host != move.source_host
