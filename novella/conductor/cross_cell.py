"""Moves that may cross cells (mixed into ConductorManager beside ConductorMoves).

    migrate_server_across_cells   the same first steps as inside a cell, with a
                                  request spec that lets the scheduler pick any
                                  cell; CrossCellMigrationTask (tasks/cross_cell.py)
                                  when the chosen host is in another cell, the
                                  cell-local steps otherwise
    confirm_cross_cell_resize     ConfirmResizeTask
    revert_cross_cell_resize      RevertResizeTask
    poll_unconfirmed_cross_cell_resizes   auto-confirm after resize_confirm_window

A move crosses cells only when the API found the policy
``compute:servers:resize:cross_cell`` passing and every compute service of
every cell is at least at MIN_VERSION_FOR_CROSS_CELL_MOVE.
"""
import datetime
import logging

import sqlalchemy as sa

from novella.compute import MIN_VERSION_FOR_CROSS_CELL_MOVE
from novella.compute.states import migration_status as ms
from novella.conductor.tasks import cross_cell as xtasks
from novella.conductor.tasks import migrate as migrate_tasks
from novella.conductor.tasks.base import Task, TaskList
from novella.context import get_admin_context
from novella.db import cell_models as cm
from novella.db import cells as cells_mod
from novella.db import cross_cell as dbx
from novella.db import moves as dbmoves
from novella.db import records
from novella.rpc import notifier as notifier_mod

LOG = logging.getLogger(__name__)

COMPUTE_BINARY = "nova-compute"


def minimum_compute_version(api_db):
    """The lowest version of any live compute service in any cell (0 when none)."""
    def lowest(cell, db):
        with db.session() as s:
            return s.scalar(sa.select(sa.func.min(cm.Service.version)).where(
                cm.Service.binary == COMPUTE_BINARY, cm.Service.deleted == 0))
    found = cells_mod.scatter(cells_mod.list_cells(api_db, include_cell0=False), lowest)
    values = [v for v in found.values() if isinstance(v, int)]
    if any(isinstance(v, Exception) for v in found.values()):
        return 0  # a cell that cannot answer might hold old hosts
    return min(values) if values else 0


class SelectDestinationAcrossCells(migrate_tasks.SelectDestination):
    """The scheduler may pick any cell; the CrossCellWeigher prefers the source's."""

    def __init__(self, move, target_cell_uuid=None):
        super().__init__(move)
        self.target_cell_uuid = target_cell_uuid

    def execute(self):
        mv = self.mv
        spec = dict(mv.request_spec, instance_uuid=mv.instance_uuid, num_instances=1,
                    flavor=mv.new_flavor, retry=None, force_hosts=[], force_nodes=[])
        spec["requested_destination"] = {
            "host": mv.target_host, "node": None, "cell_uuid": self.target_cell_uuid,
            "allow_cross_cell_move": True, "source_cell_uuid": mv.cell.uuid}
        same_host_ok = mv.is_resize and mv.conf.allow_resize_to_same_host
        spec["ignore_hosts"] = [] if same_host_ok else [mv.source_host]
        host_lists = mv.scheduler.select_destinations(mv.ctxt, spec, [mv.instance_uuid],
                                                      return_alternates=True)
        mv.host_list = host_lists[0][:mv.conf.scheduler.max_attempts]
        mv.selection = mv.host_list[0]


class MoveToChosenCell(Task):
    """The cell-local steps, or CrossCellMigrationTask when the host is in another cell."""

    def __init__(self, conductor, move):
        self.conductor = conductor
        self.mv = move
        self.crossed = None  # the CrossCellMove once the target is another cell

    @property
    def name(self):
        return "CrossCellMigrationTask" if self.crossed is not None else "ResizeInCell"

    def execute(self):
        mv = self.mv
        cell_uuid = mv.selection.get("cell_uuid")
        if not cell_uuid or cell_uuid == mv.cell.uuid:
            steps = [migrate_tasks.PrepResizeAtDest(mv), migrate_tasks.ResizeInstance(mv),
                     migrate_tasks.FinishResize(mv)]
            TaskList(f"migrate {mv.instance_uuid}", steps).run()
            return
        target = next(c for c in cells_mod.list_cells(self.conductor.api_db)
                      if c.uuid == cell_uuid)
        self.crossed = xtasks.CrossCellMove(mv, self.conductor.api_db, self.conductor.image_api,
                                            self.conductor.volume_api, target)
        self.steps = TaskList(f"cross-cell migrate {mv.instance_uuid}",
                              xtasks.cross_cell_tasks(self.crossed))
        self.steps.run()


class ConductorCrossCell:
    """Needs ``conf``, ``api_db``, ``placement``, ``scheduler``, ``image_api``,
    ``volume_api`` and ``notifier`` of ConductorManager and ConductorMoves' helpers."""

    def cross_cell_move_allowed(self):
        return minimum_compute_version(self.api_db) >= MIN_VERSION_FOR_CROSS_CELL_MOVE

    def migrate_server_across_cells(self, ctxt, instance_uuid, migration_uuid, flavor=None,
                                    host=None, clean_shutdown=True):
        cell, cell_db, inst = self._instance(instance_uuid)
        migration = dbmoves.get_migration(cell_db, migration_uuid)
        spec = self._load_request_spec(instance_uuid)
        mv = migrate_tasks.Move(self.conf, self.placement, self.scheduler, ctxt, cell, inst,
                                migration, flavor or inst.flavor, spec,
                                target_host=host, clean_shutdown=clean_shutdown)
        target_cell = cells_mod.host_cell(self.api_db, host) if host else None
        last = MoveToChosenCell(self, mv)
        tasks = TaskList(f"migrate {instance_uuid}", [
            migrate_tasks.MigrationRecord(mv), migrate_tasks.MigrationAllocation(mv),
            SelectDestinationAcrossCells(mv, target_cell.uuid if target_cell else None), last])
        try:
            with records.action_event(cell_db, ctxt, instance_uuid,
                                      migrate_tasks.CONDUCTOR_EVENT):
                tasks.run()
        except Exception:  # noqa: BLE001 - rolled back; the fault and migration say why
            LOG.info("migration %s of %s failed and was rolled back", migration_uuid,
                     instance_uuid)
        else:
            dbmoves.update_request_spec(self.api_db, instance_uuid, flavor=mv.new_flavor)
        finally:
            records.finish_action(cell_db, ctxt, instance_uuid)
            x = last.crossed
            if x is not None and x.moved:
                # The events recorded in the source cell join the server's copy.
                dbx.sync_actions(cell_db, x.target_db, instance_uuid)
        return {"completed": tasks.completed, "failed_task": tasks.failed_task,
                "rolled_back": tasks.rolled_back, "cross_cell": last.crossed is not None}

    # -- confirm / revert -------------------------------------------------------------

    def _notify_conductor(self, ctxt, cell_db, instance_uuid, event_type):
        if self.notifier is None:
            return
        try:
            with cell_db.session() as s:
                inst = records.get_instance(s, instance_uuid)
                payload = notifier_mod.instance_payload(inst, records.flavor_of(inst), ctxt=ctxt)
            self.notifier(ctxt, f"nova-conductor:{self.conf.host or 'conductor'}", event_type,
                          payload)
        except Exception:  # noqa: BLE001 - a notification never breaks an operation
            LOG.exception("could not send %s", event_type)

    def confirm_cross_cell_resize(self, ctxt, instance_uuid, migration):
        cell = cells_mod.instance_cell(self.api_db, instance_uuid)
        cell_db = cells_mod.cell_database(cell)
        r = xtasks.Resized(self.conf, self.api_db, ctxt, instance_uuid, migration, cell,
                           self.volume_api)
        self._notify_conductor(ctxt, cell_db, instance_uuid, "instance.resize_confirm.start")
        try:
            TaskList(f"confirm {instance_uuid}", xtasks.confirm_tasks(r)).run()
        except Exception as exc:
            dbmoves.update_migration(cell_db, migration["uuid"], status=ms.ERROR)
            records.add_fault(cell_db, instance_uuid, exc)
            raise
        finally:
            records.finish_action(cell_db, ctxt, instance_uuid)
        self._notify_conductor(ctxt, cell_db, instance_uuid, "instance.resize_confirm.end")
        return ms.CONFIRMED

    def revert_cross_cell_resize(self, ctxt, instance_uuid, migration):
        cell = cells_mod.instance_cell(self.api_db, instance_uuid)
        r = xtasks.Resized(self.conf, self.api_db, ctxt, instance_uuid, migration, cell,
                           self.volume_api)
        self._notify_conductor(ctxt, r.target_db, instance_uuid, "instance.resize_revert.start")
        try:
            TaskList(f"revert {instance_uuid}", xtasks.revert_tasks(r)).run()
        except Exception as exc:
            db = r.source_db if r.mapped_back else r.target_db
            dbmoves.update_migration(db, migration["uuid"], status=ms.ERROR)
            records.add_fault(db, instance_uuid, exc)
            raise
        finally:
            records.finish_action(r.source_db if r.mapped_back else r.target_db, ctxt,
                                  instance_uuid)
        dbmoves.update_request_spec(self.api_db, instance_uuid,
                                    flavor=dbmoves.flavors(r.source_db, instance_uuid)["cur"])
        self._notify_conductor(ctxt, r.source_db, instance_uuid, "instance.resize_revert.end")

    # -- periodic ---------------------------------------------------------------------

    @property
    def periodic_tasks(self):
        return {"poll_unconfirmed_cross_cell_resizes": self.conf.update_resources_interval}

    def poll_unconfirmed_cross_cell_resizes(self, ctxt=None):
        """Confirm cross-cell moves in VERIFY_RESIZE longer than ``resize_confirm_window``."""
        window = self.conf.resize_confirm_window
        if window <= 0:
            return []
        cutoff = records.utcnow() - datetime.timedelta(seconds=window)

        def due(cell, db):
            with db.session() as s:
                return [(cell, db, *row) for row in s.execute(
                    sa.select(cm.Migration.uuid, cm.Migration.instance_uuid).where(
                        cm.Migration.cross_cell_move.is_(True), cm.Migration.hidden.is_(False),
                        cm.Migration.status == ms.FINISHED, cm.Migration.deleted == 0,
                        cm.Migration.updated_at <= cutoff))]
        confirmed = []
        cells = cells_mod.list_cells(self.api_db, include_cell0=False)
        for result in cells_mod.scatter(cells, due).values():
            if isinstance(result, Exception):
                continue
            for _cell, db, migration_uuid, instance_uuid in result:
                actx = get_admin_context()
                try:
                    if dbmoves.update_migration(db, migration_uuid, expected_status=ms.FINISHED,
                                                status=ms.CONFIRMING) is None:
                        continue
                    records.start_action(db, actx, instance_uuid, "confirmResize")
                    self.confirm_cross_cell_resize(actx, instance_uuid,
                                                   dbmoves.get_migration(db, migration_uuid))
                    confirmed.append(migration_uuid)
                except Exception:  # noqa: BLE001 - one stuck move must not block the others
                    LOG.exception("automatic confirmation of migration %s failed",
                                  migration_uuid)
        return confirmed
