"""The conductor's move operations inside one cell (mixed into ConductorManager).

    migrate_server   resize or cold migrate: the task list of tasks/migrate.py
    confirm_resize   source confirm_resize (the migration's allocation goes)
    revert_resize    destination revert_resize, then source finish_revert_resize
    live_migrate_instance  the task list of tasks/live_migrate.py
    evacuate_instance      the task list of tasks/evacuate.py

The API has already written the migration row (pre-migrating), set the task
state and started the instance action; these methods finish the action.
"""
import logging
import types

from novella.compute.states import migration_status as ms, power_state
from novella.conductor import utils
from novella.conductor.tasks import evacuate as evacuate_tasks
from novella.conductor.tasks import live_migrate as live_migrate_tasks
from novella.conductor.tasks import migrate as migrate_tasks
from novella.conductor.tasks.base import TaskList
from novella.db import aggregates
from novella.db import cells as cells_mod
from novella.db import moves as dbmoves
from novella.db import records

LOG = logging.getLogger(__name__)


class ConductorMoves:
    """Needs ``conf``, ``api_db``, ``placement`` and ``scheduler`` of ConductorManager."""

    def _instance(self, instance_uuid):
        cell = cells_mod.instance_cell(self.api_db, instance_uuid)
        cell_db = cells_mod.cell_database(cell)
        with cell_db.session() as s:
            row = records.get_instance(s, instance_uuid)
            inst = types.SimpleNamespace(
                flavor=records.flavor_of(row),
                **{k: getattr(row, k) for k in ("uuid", "project_id", "user_id", "host", "node",
                                                "availability_zone", "vm_state", "task_state",
                                                "power_state")})
        return cell, cell_db, inst

    def migrate_server(self, ctxt, instance_uuid, migration_uuid, flavor=None, host=None,
                       clean_shutdown=True, allow_cross_cell=False):
        """Resize (``flavor`` given) or cold migrate (optionally to ``host``).

        ``allow_cross_cell``: the API found the cross-cell policy passing; the
        move may then leave the cell (novella/conductor/cross_cell.py).
        """
        if allow_cross_cell and self.cross_cell_move_allowed():
            return self.migrate_server_across_cells(ctxt, instance_uuid, migration_uuid,
                                                    flavor=flavor, host=host,
                                                    clean_shutdown=clean_shutdown)
        return self._run_move(ctxt, instance_uuid, migration_uuid, "migrate",
                              migrate_tasks.migrate_tasks, migrate_tasks.CONDUCTOR_EVENT,
                              host=host, flavor=flavor, clean_shutdown=clean_shutdown,
                              # later moves schedule with the flavor the server has
                              then=lambda mv: dbmoves.update_request_spec(
                                  self.api_db, instance_uuid, flavor=mv.new_flavor))

    def live_migrate_instance(self, ctxt, instance_uuid, migration_uuid, host=None):
        """Live-migrate a running server inside its cell (tasks/live_migrate.py)."""
        return self._run_move(ctxt, instance_uuid, migration_uuid, "live-migrate",
                              live_migrate_tasks.live_migrate_tasks,
                              live_migrate_tasks.CONDUCTOR_EVENT, host=host,
                              then=live_migrate_tasks.complete)

    def _run_move(self, ctxt, instance_uuid, migration_uuid, name, make_tasks, event,
                  host=None, flavor=None, clean_shutdown=True, then=None):
        """Run the tasks ``make_tasks(move)`` under the conductor's ``event``, then
        ``then(move)``; a failure is rolled back and recorded, not raised.

        ``flavor``: the move's new flavor (a resize), else the server keeps its own.
        """
        cell, cell_db, inst = self._instance(instance_uuid)
        migration = dbmoves.get_migration(cell_db, migration_uuid)
        mv = migrate_tasks.Move(self.conf, self.placement, self.scheduler, ctxt, cell, inst,
                                migration, flavor or inst.flavor,
                                self._load_request_spec(instance_uuid), target_host=host,
                                clean_shutdown=clean_shutdown)
        tasks = TaskList(f"{name} {instance_uuid}", make_tasks(mv))
        try:
            with records.action_event(cell_db, ctxt, instance_uuid, event):
                tasks.run()
                if then is not None:
                    then(mv)
        except Exception:  # noqa: BLE001 - rolled back; the fault and migration say why
            LOG.info("%s %s of %s failed (rolled back: %s)", name, migration_uuid,
                     instance_uuid, tasks.rolled_back)
        finally:
            records.finish_action(cell_db, ctxt, instance_uuid)
        return {"completed": tasks.completed, "failed_task": tasks.failed_task,
                "rolled_back": tasks.rolled_back}

    def evacuate_instance(self, ctxt, instance_uuid, migration_uuid, host=None):
        """Rebuild elsewhere in its cell a server whose host is down (tasks/evacuate.py)."""
        return self._run_move(ctxt, instance_uuid, migration_uuid, "evacuate",
                              evacuate_tasks.evacuate_tasks, evacuate_tasks.CONDUCTOR_EVENT,
                              host=host)

    def confirm_resize(self, ctxt, instance_uuid, migration_uuid):
        cell, cell_db, _inst = self._instance(instance_uuid)
        migration = dbmoves.get_migration(cell_db, migration_uuid)
        if migration.get("cross_cell_move"):
            return self.confirm_cross_cell_resize(ctxt, instance_uuid, migration)
        try:
            return utils.compute_api(self.conf, cell).confirm_resize(
                ctxt, migration["source_compute"], instance_uuid, migration_uuid)
        except Exception as exc:
            dbmoves.update_migration(cell_db, migration_uuid, status=ms.ERROR)
            records.add_fault(cell_db, instance_uuid, exc)
            raise
        finally:
            records.finish_action(cell_db, ctxt, instance_uuid)

    def revert_resize(self, ctxt, instance_uuid, migration_uuid):
        cell, cell_db, inst = self._instance(instance_uuid)
        migration = dbmoves.get_migration(cell_db, migration_uuid)
        if migration.get("cross_cell_move"):
            return self.revert_cross_cell_resize(ctxt, instance_uuid, migration)
        compute = utils.compute_api(self.conf, cell)
        try:
            compute.revert_resize(ctxt, migration["dest_compute"], instance_uuid, migration_uuid)
            compute.finish_revert_resize(
                ctxt, migration["source_compute"], instance_uuid, migration_uuid,
                power_on=inst.power_state == power_state.RUNNING,
                availability_zone=aggregates.host_availability_zone(
                    self.api_db, migration["source_compute"], self.conf.default_availability_zone),
                port_profiles=utils.held_port_profiles(
                    self.placement, self._load_request_spec(instance_uuid), migration_uuid))
            dbmoves.update_request_spec(self.api_db, instance_uuid,
                                        flavor=dbmoves.flavors(cell_db, instance_uuid)["cur"])
        except Exception as exc:
            dbmoves.update_migration(cell_db, migration_uuid, status=ms.ERROR)
            records.add_fault(cell_db, instance_uuid, exc)
            raise
        finally:
            records.finish_action(cell_db, ctxt, instance_uuid)
