"""Resize and cold migrate between cells: snapshot-based, driven by the super-conductor.

A move starts as inside a cell (tasks/migrate.py: MigrationRecord,
MigrationAllocation, then the scheduler's choice). When the chosen host is
in another cell, CrossCellMigrationTask does the rest; the composition, in
order, and what each step undoes when a later one fails:

    TargetDBSetupTask        copy the server (extra, info cache,  | undo: attachments deleted, every
                             metadata, tags, BDMs, actions and    |   row of the copy hard-deleted
                             events, faults) and the migration    |
                             (cross_cell_move) into the target    |
                             cell, hidden; a reserved volume      |
                             attachment for each volume of the    |
                             copy                                 |
    PrepResizeAtDestTask     prep_snapshot_based_resize_at_dest:  | undo: revert_snapshot_based_resize_
                             resize claim, volume connector,      |   at_dest(rollback): guest, bindings,
                             INACTIVE port bindings on the dest;  |   attachments' connections and the
                             the next alternate of the target     |   claim dropped
                             cell when a host refuses             |
    PrepResizeAtSourceTask   snapshot image record (image-backed  | undo: finish_revert_snapshot_based_
                             servers); prep_snapshot_based_resize_|   resize_at_source(rollback): volumes
                             at_source: power off, root disk      |   back, powered on as it was; the
                             uploaded, volumes disconnected       |   snapshot deleted
    FinishResizeAtDestTask   finish_snapshot_based_resize_at_dest:| (last step; a failure is undone by
                             spawn from the snapshot, ports       |   the steps above, the snapshot
                             active on the dest, volumes attached;|   deleted here)
                             snapshot deleted; instance mapping   |
                             -> target cell; the source copy      |
                             hidden, the target copy shown        |

Placement is booked as inside a cell: the migration holds the source
allocation, the instance the destination's (MigrationAllocation's undo
hands the source back). Every compute call uses ``long_rpc_timeout``.

Confirm and revert (``confirm_tasks``, ``revert_tasks``) are task lists too.
"""
import logging

import sqlalchemy as sa

from novella.compute.cross_cell_rpcapi import CrossCellComputeAPI
from novella.compute.states import migration_status as ms, power_state
from novella.compute import states as vm_states
from novella import rpc
from novella.conductor.tasks.base import Task
from novella.conductor.tasks.migrate import on_a_destination
from novella.db import aggregates
from novella.db import api_models as am
from novella.db import cell_models as cm
from novella.db import cells as cells_mod
from novella.db import cross_cell as dbx
from novella.db import moves as dbmoves
from novella.db import records
from novella.scheduler import utils as scheduler_utils

LOG = logging.getLogger(__name__)


def compute_api(conf, cell):
    return CrossCellComputeAPI(rpc.get_transport(cell.transport_url),
                               timeout=conf.rpc_response_timeout,
                               long_timeout=conf.long_rpc_timeout)


def cross_cell_tasks(x):
    """The steps of moving ``x`` (a CrossCellMove) into its target cell, in order."""
    return [TargetDBSetupTask(x), PrepResizeAtDestTask(x), PrepResizeAtSourceTask(x),
            FinishResizeAtDestTask(x)]


class CrossCellMove:
    """What one cross-cell move knows, shared by its tasks (beside the cell-local Move)."""

    def __init__(self, mv, api_db, image_api, volume_api, target_cell):
        self.mv = mv
        self.api_db = api_db
        self.image_api = image_api
        self.volume_api = volume_api
        self.source_cell = mv.cell
        self.source_db = mv.cell_db
        self.target_cell = target_cell
        self.target_db = cells_mod.cell_database(target_cell)
        self.source_compute = compute_api(mv.conf, mv.cell)
        self.dest_compute = compute_api(mv.conf, target_cell)
        self.target_attachments = []
        self.snapshot_id = None
        self.dest_reverted = False
        self.moved = False

    def delete_snapshot(self):
        if self.snapshot_id and self.image_api is not None:
            try:
                self.image_api.delete(self.mv.ctxt, self.snapshot_id)
            except Exception:  # noqa: BLE001 - already gone is as good
                LOG.exception("could not delete snapshot %s", self.snapshot_id)
        self.snapshot_id = None


def set_mapping(api_db, instance_uuid, cell):
    with api_db.session(write=True) as s:
        s.execute(sa.update(am.InstanceMapping).where(
            am.InstanceMapping.instance_uuid == instance_uuid).values(cell_id=cell.id))


def is_volume_backed(cell_db, instance_uuid):
    with cell_db.session() as s:
        return s.scalars(sa.select(cm.BlockDeviceMapping.id).where(
            cm.BlockDeviceMapping.instance_uuid == instance_uuid,
            cm.BlockDeviceMapping.deleted == 0, cm.BlockDeviceMapping.boot_index == 0,
            cm.BlockDeviceMapping.destination_type == "volume")).first() is not None


class CrossCellTask(Task):
    def __init__(self, x):
        self.x = x
        self.mv = x.mv


class TargetDBSetupTask(CrossCellTask):
    """The server's hidden copy in the target cell, with its own volume attachments."""

    def execute(self):
        try:
            self._copy()
        except Exception as exc:
            self.rollback(exc)  # a half-made copy goes too
            raise

    def _copy(self):
        x, mv = self.x, self.mv
        dbx.copy_instance(x.source_db, x.target_db, mv.instance_uuid, mv.migration_uuid,
                          hidden=True)
        with x.target_db.session(write=True) as s:
            for bdm in s.scalars(sa.select(cm.BlockDeviceMapping).where(
                    cm.BlockDeviceMapping.instance_uuid == mv.instance_uuid,
                    cm.BlockDeviceMapping.deleted == 0,
                    cm.BlockDeviceMapping.destination_type == "volume")):
                bdm.attachment_id = bdm.connection_info = None
                if bdm.volume_id and x.volume_api is not None:
                    att = x.volume_api.attachment_create(mv.ctxt, bdm.volume_id, mv.instance_uuid)
                    x.target_attachments.append(att["id"])
                    bdm.attachment_id = att["id"]

    def rollback(self, exc):
        x, mv = self.x, self.mv
        for attachment_id in x.target_attachments:
            try:
                x.volume_api.attachment_delete(mv.ctxt, attachment_id)
            except Exception:  # noqa: BLE001 - deleted by the destination already
                pass
        dbx.hard_delete_instance(x.target_db, mv.instance_uuid, mv.migration_uuid)


class PrepResizeAtDestTask(CrossCellTask):
    """prep_snapshot_based_resize_at_dest on the chosen host, else on each alternate."""

    def execute(self):
        x, mv = self.x, self.mv
        dest = on_a_destination(mv, "prep_snapshot_based_resize_at_dest", lambda sel:
                                x.dest_compute.prep_snapshot_based_resize_at_dest(
                                    mv.ctxt, sel["service_host"], mv.instance_uuid,
                                    mv.migration_uuid, mv.new_flavor,
                                    port_profiles=scheduler_utils.selection_port_profiles(
                                        mv.request_spec, sel)))
        dbmoves.update_migration(x.source_db, mv.migration_uuid, dest_compute=dest["host"],
                                 dest_node=dest["node"], dest_host=dest["dest_host"])
        # The copy shows the zone it lands in (a server without a requested zone
        # may change zones); the source copy keeps its own for a revert.
        records.update_instance(x.target_db, mv.instance_uuid,
                                availability_zone=aggregates.host_availability_zone(
                                    x.api_db, dest["host"], mv.conf.default_availability_zone))

    def rollback(self, exc):
        x, mv = self.x, self.mv
        if not x.dest_reverted:
            x.dest_compute.revert_snapshot_based_resize_at_dest(
                mv.ctxt, mv.dest_host, mv.instance_uuid, mv.migration_uuid, rollback=True)
            x.dest_reverted = True


class PrepResizeAtSourceTask(CrossCellTask):
    """Power off and snapshot on the source; the guest stays there for a revert."""

    def execute(self):
        x, mv = self.x, self.mv
        if x.image_api is not None and not is_volume_backed(x.source_db, mv.instance_uuid):
            with x.source_db.session() as s:
                inst = s.scalars(sa.select(cm.Instance).where(
                    cm.Instance.uuid == mv.instance_uuid, cm.Instance.deleted == 0)).one()
                name, image_ref = inst.display_name, inst.image_ref
            image = x.image_api.create_snapshot(
                mv.ctxt, mv.instance_uuid, f"{name}-resize-temp", base_image_ref=image_ref,
                owner=mv.project_id)
            x.snapshot_id = image["id"]
        try:
            x.source_compute.prep_snapshot_based_resize_at_source(
                mv.ctxt, mv.source_host, mv.instance_uuid, mv.migration_uuid,
                snapshot_id=x.snapshot_id, clean_shutdown=mv.clean_shutdown)
        except Exception:
            x.delete_snapshot()  # the host put the guest back; the image is ours to drop
            raise

    def rollback(self, exc):
        x, mv = self.x, self.mv
        try:
            x.source_compute.finish_revert_snapshot_based_resize_at_source(
                mv.ctxt, mv.source_host, mv.instance_uuid, mv.migration_uuid,
                power_on=mv.was_running, rollback=True)
        finally:
            x.delete_snapshot()


class FinishResizeAtDestTask(CrossCellTask):
    """Spawn at the destination, then the target cell's copy becomes the server."""

    def execute(self):
        x, mv = self.x, self.mv
        try:
            x.dest_compute.finish_snapshot_based_resize_at_dest(
                mv.ctxt, mv.dest_host, mv.instance_uuid, mv.migration_uuid,
                snapshot_id=x.snapshot_id, power_on=mv.was_running)
        finally:
            x.delete_snapshot()
        dbmoves.update_migration(x.source_db, mv.migration_uuid, status=ms.FINISHED)
        set_mapping(x.api_db, mv.instance_uuid, x.target_cell)
        dbx.set_hidden(x.target_db, mv.instance_uuid, mv.migration_uuid, False)
        dbx.set_hidden(x.source_db, mv.instance_uuid, mv.migration_uuid, True)
        x.moved = True

    def rollback(self, exc):
        x, mv = self.x, self.mv
        if x.moved:
            set_mapping(x.api_db, mv.instance_uuid, x.source_cell)
            dbx.set_hidden(x.source_db, mv.instance_uuid, mv.migration_uuid, False)
            dbx.set_hidden(x.target_db, mv.instance_uuid, mv.migration_uuid, True)
            x.moved = False


# -- confirm and revert ------------------------------------------------------------------

class Resized:
    """A cross-cell move in VERIFY_RESIZE: the server in the target cell, its copy in the source."""

    def __init__(self, conf, api_db, ctxt, instance_uuid, migration, target_cell, volume_api):
        self.conf, self.api_db, self.ctxt = conf, api_db, ctxt
        self.instance_uuid = instance_uuid
        self.migration = migration
        self.migration_uuid = migration["uuid"]
        self.target_cell = target_cell
        self.target_db = cells_mod.cell_database(target_cell)
        self.source_cell = cells_mod.host_cell(api_db, migration["source_compute"])
        self.source_db = cells_mod.cell_database(self.source_cell)
        self.source_compute = compute_api(conf, self.source_cell)
        self.dest_compute = compute_api(conf, target_cell)
        self.volume_api = volume_api
        with self.target_db.session() as s:
            inst = s.scalars(sa.select(cm.Instance).where(
                cm.Instance.uuid == instance_uuid, cm.Instance.deleted == 0)).one()
            self.power_on = inst.power_state == power_state.RUNNING
        self.mapped_back = False


def confirm_tasks(r):
    """Confirm: the source host lets go, then the source cell's copy is removed."""
    return [ConfirmResizeTask(r)]


def revert_tasks(r):
    """Revert: changes copied back, mapping back, destination cleaned, source restarted."""
    return [RevertResizeTask(r)]


class ConfirmResizeTask(Task):
    def __init__(self, r):
        self.r = r

    def execute(self):
        r = self.r
        r.source_compute.confirm_snapshot_based_resize_at_source(
            r.ctxt, r.migration["source_compute"], r.instance_uuid, r.migration_uuid)
        dbx.sync_actions(r.source_db, r.target_db, r.instance_uuid)
        dbx.hard_delete_instance(r.source_db, r.instance_uuid, r.migration_uuid)
        cur = dbmoves.flavors(r.target_db, r.instance_uuid)["cur"]
        dbmoves.set_flavors(r.target_db, r.instance_uuid, cur,
                            vm_state=vm_states.ACTIVE if r.power_on else vm_states.STOPPED,
                            task_state=None)
        with r.target_db.session(write=True) as s:
            s.execute(sa.update(cm.InstanceExtra).where(
                cm.InstanceExtra.instance_uuid == r.instance_uuid).values(migration_context=None))
        dbmoves.update_migration(r.target_db, r.migration_uuid, status=ms.CONFIRMED)


class RevertResizeTask(Task):
    def __init__(self, r):
        self.r = r

    def execute(self):
        r = self.r
        ctxt = r.ctxt
        # What changed while resized (tags, metadata, a volume detached) goes back first.
        gone = dbx.sync_changes_back(r.target_db, r.source_db, r.instance_uuid)
        for bdm in gone:
            if bdm["attachment_id"] and r.volume_api is not None:
                try:
                    r.volume_api.attachment_delete(ctxt, bdm["attachment_id"])
                except Exception:  # noqa: BLE001 - already gone
                    pass
        dbx.sync_actions(r.target_db, r.source_db, r.instance_uuid)
        dbmoves.update_migration(r.source_db, r.migration_uuid, status=ms.REVERTING)
        set_mapping(r.api_db, r.instance_uuid, r.source_cell)
        r.mapped_back = True
        dbx.set_hidden(r.source_db, r.instance_uuid, r.migration_uuid, False)
        dbx.set_hidden(r.target_db, r.instance_uuid, r.migration_uuid, True)
        records.update_instance(r.source_db, r.instance_uuid, vm_state=vm_states.RESIZED,
                                task_state="resize_reverting")
        r.dest_compute.revert_snapshot_based_resize_at_dest(
            ctxt, r.migration["dest_compute"], r.instance_uuid, r.migration_uuid)
        dbx.sync_actions(r.target_db, r.source_db, r.instance_uuid)
        dbx.hard_delete_instance(r.target_db, r.instance_uuid, r.migration_uuid)
        r.source_compute.finish_revert_snapshot_based_resize_at_source(
            ctxt, r.migration["source_compute"], r.instance_uuid, r.migration_uuid,
            power_on=r.power_on)
