"""Resize and cold migrate that may cross cells: snapshot-based, driven by the super-conductor.

A move crosses cells only when the API found the policy
``compute:servers:resize:cross_cell`` passing and every compute service of
every cell is at least at MIN_VERSION_FOR_CROSS_CELL_MOVE.

The composition (``migrate_tasks``), in order, and what each step undoes
when a later one fails:

    MigrationRecord          \\                                     (tasks/common.py; the
    MigrationAllocation       > the first steps of every move,      |  scheduler may choose any
    SelectDestination        /                                      |  cell the request allows)
    RouteByCell              the cell-local steps (tasks/resize.py) when the chosen host is in
                             the server's cell, else the steps below
    TargetDBSetupTask        copy the server (extra, info cache,  | undo: attachments deleted, every
                             metadata, tags, BDMs, actions and    |   row of the copy hard-deleted
                             events, faults) and the migration    |
                             (cross_cell_move) into the target    |
                             cell, hidden; a reserved volume      |
                             attachment for each volume of the    |
                             copy                                 |
    PrepResizeAtDestTask     prep_snapshot_based_resize_at_dest:  | undo: revert_snapshot_based_resize_
                             resize claim, volume connector,      |   at_dest: guest, bindings,
                             INACTIVE port bindings on the dest;  |   attachments' connections and the
                             the next alternate of the target     |   claim dropped
                             cell when a host refuses             |
    PrepResizeAtSourceTask   snapshot image record (image-backed  | undo: finish_revert_snapshot_based_
                             servers); prep_snapshot_based_resize_|   resize_at_source: volumes back,
                             at_source: power off, root disk      |   powered on as it was; the
                             uploaded, volumes disconnected       |   snapshot deleted
    FinishResizeAtDestTask   finish_snapshot_based_resize_at_dest:| undo: nothing of its own (the guest
                             spawn from the snapshot, ports       |   goes with the destination's
                             active on the dest, volumes attached;|   revert above)
                             snapshot deleted                     |
    SwitchToTargetCell       instance mapping -> target cell; the | undo: mapping and hidden flags
                             source copy hidden, the target copy  |   back
                             shown; migration 'finished'          |
    RecordNewFlavor          (tasks/resize.py)

Placement is booked as inside a cell: the migration holds the source
allocation, the instance the destination's (MigrationAllocation's undo
hands the source back).

Confirm (``confirm_tasks``):

    ConfirmAtSourceTask      confirm_snapshot_based_resize_at_source: the old guest, its bindings
                             and attachments go; then the migration's allocation
    DeleteSourceCopy         the source cell's events join the server's; its copy hard-deleted
    FinishConfirm            the server's flavors and state settle; migration 'confirmed'

Revert (``revert_tasks``):

    CopyChangesBack          tags, metadata, detached volumes and events | undo: nothing (the
                             the server gained while resized go to the   |   source copy is hidden)
                             source copy
    MapBackToSource          migration 'reverting'; mapping -> source;   | undo: mapping and
                             the source copy shown (resize_reverting),   |   hidden flags back
                             the target copy hidden                      |
    RevertAtDestTask         revert_snapshot_based_resize_at_dest: guest, bindings, attachments,
                             claim go; then the instance's allocation
    DeleteTargetCopy         the target cell's events join; its copy hard-deleted
    FinishRevertAtSourceTask the migration's allocation back to the instance; then
                             finish_revert_snapshot_based_resize_at_source: the old guest back,
                             ports and volumes there; migration 'reverted'
    RecordOldFlavor          (tasks/resize.py)
"""
import logging
import uuid

import sqlalchemy as sa

from novella.compute import MIN_VERSION_FOR_CROSS_CELL_MOVE
from novella.compute import states as vm_states
from novella.compute.states import migration_status as ms, task_states
from novella.conductor.tasks import common, resize
from novella.conductor.tasks.common import MoveTask, ResizedTask
from novella.db import aggregates
from novella.db import cell_models as cm
from novella.db import cells as cells_mod
from novella.db import instance_copy
from novella.db import migration_records
from novella.db import records
from novella.placement import allocations

LOG = logging.getLogger(__name__)

COMPUTE_BINARY = "nova-compute"


def cross_cell_move_allowed(api_db):
    """A move may cross cells only when every compute service of every cell can."""
    return minimum_compute_version(api_db) >= MIN_VERSION_FOR_CROSS_CELL_MOVE


def minimum_compute_version(api_db):
    """The lowest version of any live compute service in any cell (0 when none)."""
    def lowest(cell, db):
        with db.session() as s:
            return s.scalar(sa.select(sa.func.min(cm.Service.version)).where(
                cm.Service.binary == COMPUTE_BINARY, cm.Service.deleted == 0))
    found = cells_mod.scatter(cells_mod.list_cells(api_db, include_cell0=False), lowest)
    if any(isinstance(v, Exception) for v in found.values()):
        return 0  # a cell that cannot answer might hold old hosts
    values = [v for v in found.values() if isinstance(v, int)]
    return min(values) if values else 0


def migrate_tasks(move):
    """The steps of a resize or cold migration that may leave the cell, in order."""
    return common.first_steps(move, across_cells=True) + [RouteByCell(move)]


def cross_cell_steps(move):
    """The steps after the destination is chosen, when it is in another cell."""
    return [TargetDBSetupTask(move), PrepResizeAtDestTask(move), PrepResizeAtSourceTask(move),
            FinishResizeAtDestTask(move), SwitchToTargetCell(move),
            resize.RecordNewFlavor(move)]


class RouteByCell(MoveTask):
    """The cell-local steps, or the cross-cell ones when the host is in another cell."""

    routes = True  # it acts on nothing: a recovering conductor runs it again to rebuild

    def execute(self):
        move = self.move
        cell_uuid = move.selection.get("cell_uuid")
        if not cell_uuid or cell_uuid == move.cell.uuid:
            return resize.in_cell_steps(move)
        move.enter_cell(cells_mod.cell_by_uuid(move.api_db, cell_uuid))
        return cross_cell_steps(move)


def show_copy_in(shown_db, hidden_db, instance_uuid, migration_uuid):
    """The copy in ``shown_db`` becomes the server; the one in ``hidden_db`` is hidden."""
    instance_copy.set_hidden(shown_db, instance_uuid, migration_uuid, False)
    instance_copy.set_hidden(hidden_db, instance_uuid, migration_uuid, True)


def is_volume_backed(cell_db, instance_uuid):
    with cell_db.session() as s:
        return s.scalars(sa.select(cm.BlockDeviceMapping.id).where(
            cm.BlockDeviceMapping.instance_uuid == instance_uuid,
            cm.BlockDeviceMapping.deleted == 0, cm.BlockDeviceMapping.boot_index == 0,
            cm.BlockDeviceMapping.destination_type == "volume")).first() is not None


def delete_attachments(volume_api, ctxt, attachment_ids):
    for attachment_id in attachment_ids:
        if attachment_id and volume_api is not None:
            try:
                volume_api.attachment_delete(ctxt, attachment_id)
            except Exception:  # noqa: BLE001 - already gone is as good
                LOG.info("attachment %s was already gone", attachment_id)


# Namespace of the snapshot images' ids (uuid5 of the migration's uuid).
SNAPSHOT_NAMESPACE = uuid.UUID("5a0c1f57-3a8e-4d52-9a57-6f1b2f9c4e10")


def snapshot_id_of(move):
    """The id a move's snapshot image gets: known before the image exists, so an
    undo finds the image even when the step that made it never recorded it."""
    return str(uuid.uuid5(SNAPSHOT_NAMESPACE, move.migration_uuid))


def delete_snapshot(move):
    if move.snapshot_id and move.image_api is not None:
        try:
            move.image_api.delete(move.ctxt, move.snapshot_id)
        except Exception as exc:  # noqa: BLE001 - already gone is as good
            if getattr(exc, "code", None) == 404:
                LOG.info("snapshot %s was already gone", move.snapshot_id)
            else:
                LOG.exception("could not delete snapshot %s", move.snapshot_id)
    move.snapshot_id = None


# -- the move ------------------------------------------------------------------------------

class TargetDBSetupTask(MoveTask):
    """The server's hidden copy in the target cell, with its own volume attachments."""

    def execute(self):
        try:
            self._copy()
        except Exception as exc:
            self.undo(exc)  # a half-made copy goes too
            raise

    def _copy(self):
        move = self.move
        instance_copy.copy_instance(move.cell_db, move.target_db, move.instance_uuid,
                                    move.migration_uuid, hidden=True)
        with move.target_db.session(write=True) as s:
            for bdm in s.scalars(sa.select(cm.BlockDeviceMapping).where(
                    cm.BlockDeviceMapping.instance_uuid == move.instance_uuid,
                    cm.BlockDeviceMapping.deleted == 0,
                    cm.BlockDeviceMapping.destination_type == "volume")):
                bdm.attachment_id = bdm.connection_info = None
                if bdm.volume_id and move.volume_api is not None:
                    att = move.volume_api.attachment_create(move.ctxt, bdm.volume_id,
                                                            move.instance_uuid)
                    move.target_attachments.append(att["id"])
                    bdm.attachment_id = att["id"]

    def undo(self, exc):
        move = self.move
        delete_attachments(move.volume_api, move.ctxt, move.target_attachments)
        instance_copy.hard_delete_instance(move.target_db, move.instance_uuid,
                                           move.migration_uuid)


class PrepResizeAtDestTask(MoveTask):
    """prep_snapshot_based_resize_at_dest on the chosen host, else on each alternate."""

    def execute(self):
        move = self.move
        dest = common.prepare_destination(
            move, move.target_compute.prep_snapshot_based_resize_at_dest, move.new_flavor)
        migration_records.update(move.cell_db, move.migration_uuid, dest_compute=dest["host"],
                                 dest_node=dest["node"], dest_host=dest["dest_host"])
        # The copy shows the zone it lands in (a server without a requested zone
        # may change zones); the source copy keeps its own for a revert.
        records.update_instance(move.target_db, move.instance_uuid,
                                availability_zone=aggregates.host_availability_zone(
                                    move.api_db, dest["host"],
                                    move.conf.default_availability_zone))

    def undo(self, exc):
        move = self.move
        if not move.dest_reverted:
            common.roll_back_destination(move, lambda: (
                move.target_compute.revert_snapshot_based_resize_at_dest(
                    move.ctxt, move.dest_host, move.instance_uuid, move.migration_uuid)))
            move.dest_reverted = True


class PrepResizeAtSourceTask(MoveTask):
    """Power off and snapshot on the source; the guest stays there for a revert."""

    def execute(self):
        move = self.move
        if move.image_api is not None and not is_volume_backed(move.cell_db,
                                                               move.instance_uuid):
            with move.cell_db.read_session() as s:
                inst = records.get_instance(s, move.instance_uuid)
                name, image_ref = inst.display_name, inst.image_ref
            image = move.image_api.create_snapshot(
                move.ctxt, move.instance_uuid, f"{name}-resize-temp", base_image_ref=image_ref,
                owner=move.project_id, id=snapshot_id_of(move))
            move.snapshot_id = image["id"]
        try:
            move.compute.prep_snapshot_based_resize_at_source(
                move.ctxt, move.source_host, move.instance_uuid, move.migration_uuid,
                snapshot_id=move.snapshot_id, clean_shutdown=move.clean_shutdown)
        except Exception:
            delete_snapshot(move)  # the host put the guest back; the image is ours to drop
            raise

    def undo(self, exc):
        move = self.move
        try:
            move.compute.finish_revert_snapshot_based_resize_at_source(
                move.ctxt, move.source_host, move.instance_uuid, move.migration_uuid,
                power_on=move.was_running)
        finally:
            if move.snapshot_id is None and move.image_api is not None:
                # A conductor that died in this step made the image (or not)
                # without recording its id: it is the one derived from the move.
                move.snapshot_id = snapshot_id_of(move)
            delete_snapshot(move)


class FinishResizeAtDestTask(MoveTask):
    """Spawn at the destination from the snapshot, which then goes."""

    def execute(self):
        move = self.move
        try:
            move.target_compute.finish_snapshot_based_resize_at_dest(
                move.ctxt, move.dest_host, move.instance_uuid, move.migration_uuid,
                snapshot_id=move.snapshot_id, power_on=move.was_running)
        finally:
            delete_snapshot(move)


class SwitchToTargetCell(MoveTask):
    """The target cell's copy becomes the server."""

    def execute(self):
        move = self.move
        if common.deleted_by_user(move.cell_db, move.instance_uuid):
            # Deleted meanwhile: the target cell's copy must never show.
            raise common.DeletedMeanwhile(move.instance_uuid)
        migration_records.update(move.cell_db, move.migration_uuid, status=ms.FINISHED)
        cells_mod.set_instance_cell(move.api_db, move.instance_uuid, move.target_cell)
        show_copy_in(move.target_db, move.cell_db, move.instance_uuid, move.migration_uuid)
        move.moved = True

    def undo(self, exc):
        move = self.move
        cells_mod.set_instance_cell(move.api_db, move.instance_uuid, move.cell)
        show_copy_in(move.cell_db, move.target_db, move.instance_uuid, move.migration_uuid)
        move.moved = False


# -- confirm ---------------------------------------------------------------------------

def confirm_tasks(resized):
    """Confirm: the source host lets go, then the source cell's copy is removed."""
    return [ConfirmAtSourceTask(resized), DeleteSourceCopy(resized), FinishConfirm(resized)]


class ConfirmAtSourceTask(ResizedTask):
    def execute(self):
        resized = self.resized
        resized.source_compute.confirm_snapshot_based_resize_at_source(
            resized.ctxt, resized.source_host, resized.instance_uuid, resized.migration_uuid)
        allocations.confirm(resized.placement, resized.migration_uuid)


def delete_copy(resized, copy_db, server_db):
    """The copy left in ``copy_db`` goes; its events join the server's in ``server_db``."""
    instance_copy.sync_actions(copy_db, server_db, resized.instance_uuid)
    instance_copy.hard_delete_instance(copy_db, resized.instance_uuid, resized.migration_uuid)


class DeleteSourceCopy(ResizedTask):
    def execute(self):
        delete_copy(self.resized, self.resized.source_db, self.resized.cell_db)


class FinishConfirm(ResizedTask):
    def execute(self):
        resized = self.resized
        cur = records.flavors(resized.cell_db, resized.instance_uuid)["cur"]
        records.set_flavors(resized.cell_db, resized.instance_uuid, cur,
                            vm_state=vm_states.ACTIVE if resized.power_on else vm_states.STOPPED,
                            task_state=None)
        with resized.cell_db.session(write=True) as s:
            s.execute(sa.update(cm.InstanceExtra).where(
                cm.InstanceExtra.instance_uuid == resized.instance_uuid
            ).values(migration_context=None, move_claim_host=None))
        migration_records.update(resized.cell_db, resized.migration_uuid, status=ms.CONFIRMED)


# -- revert ----------------------------------------------------------------------------

def revert_tasks(resized):
    """Revert: changes copied back, mapping back, destination cleaned, source restarted."""
    return [CopyChangesBack(resized), MapBackToSource(resized), RevertAtDestTask(resized),
            DeleteTargetCopy(resized), FinishRevertAtSourceTask(resized),
            resize.RecordOldFlavor(resized)]


class CopyChangesBack(ResizedTask):
    """What changed while resized (tags, metadata, a volume detached) goes back first."""

    def execute(self):
        resized = self.resized
        gone = instance_copy.sync_changes_back(resized.cell_db, resized.source_db,
                                               resized.instance_uuid)
        delete_attachments(resized.volume_api, resized.ctxt,
                           [bdm["attachment_id"] for bdm in gone])
        instance_copy.sync_actions(resized.cell_db, resized.source_db, resized.instance_uuid)


class MapBackToSource(ResizedTask):
    """The source cell's copy is the server again, reverting."""

    def execute(self):
        resized = self.resized
        migration_records.update(resized.source_db, resized.migration_uuid, status=ms.REVERTING)
        cells_mod.set_instance_cell(resized.api_db, resized.instance_uuid, resized.source_cell)
        resized.mapped_back = True
        show_copy_in(resized.source_db, resized.cell_db, resized.instance_uuid,
                     resized.migration_uuid)
        records.update_instance(resized.source_db, resized.instance_uuid,
                                vm_state=vm_states.RESIZED,
                                task_state=task_states.RESIZE_REVERTING)

    def undo(self, exc):
        resized = self.resized
        cells_mod.set_instance_cell(resized.api_db, resized.instance_uuid, resized.cell)
        resized.mapped_back = False
        show_copy_in(resized.cell_db, resized.source_db, resized.instance_uuid,
                     resized.migration_uuid)


class RevertAtDestTask(ResizedTask):
    def execute(self):
        resized = self.resized
        resized.dest_compute.revert_snapshot_based_resize_at_dest(
            resized.ctxt, resized.dest_host, resized.instance_uuid, resized.migration_uuid)
        allocations.give_back(resized.placement, resized.instance_uuid)


class DeleteTargetCopy(ResizedTask):
    def execute(self):
        delete_copy(self.resized, self.resized.cell_db, self.resized.source_db)


class FinishRevertAtSourceTask(ResizedTask):
    def execute(self):
        resized = self.resized
        allocations.hand_back(resized.placement, resized.migration_uuid, resized.instance_uuid)
        resized.source_compute.finish_revert_snapshot_based_resize_at_source(
            resized.ctxt, resized.source_host, resized.instance_uuid, resized.migration_uuid,
            power_on=resized.power_on)

