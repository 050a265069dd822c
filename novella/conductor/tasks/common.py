"""What every move shares: its state, its first three steps, the alternates loop.

Every move (resize, cold migrate, live migration, evacuation; in a cell or
across cells) starts the same way, and each of its step tables begins with:

    MigrationRecord       nothing to do              | undo: migration 'error', server back to
                                                     |   its flavor and state on the source, fault
                                                     |   (an aborted live migration: 'cancelled',
                                                     |   no fault)
    MigrationAllocation   the instance's source      | undo: hand it back to the instance,
                          allocation -> migration    |   replacing any destination claim
                          (one POST /allocations)    |   (one POST /allocations)
    SelectDestination     the scheduler claims the   | undo: nothing of its own (the claim is
                          destination for the        |   replaced by the step above)
                          instance; alternates kept  |

A step that asks a host to take the server (``on_a_destination``) tries the
chosen host, then each alternate in turn, claiming each in Placement first.
"""
import logging

from novella import rpc
from novella.compute.rpcapi import ComputeAPI
from novella.compute.states import migration_status as ms, power_state, task_states
from novella.conductor.tasks.base import Task
from novella.db import cells as cells_mod
from novella.db import instance_copy
from novella.db import migration_records
from novella.db import records
from novella.placement import allocations
from novella.scheduler import utils as scheduler_utils

LOG = logging.getLogger(__name__)


def compute_api(conf, cell_mapping):
    """The compute RPC client on the cell's own transport."""
    return ComputeAPI(rpc.get_transport(cell_mapping.transport_url),
                      timeout=conf.rpc_response_timeout, long_timeout=conf.long_rpc_timeout)


def held_port_profiles(placement, request_spec, consumer, *then):
    """The binding profiles of the server's ports as ``consumer``'s allocation
    provides them (e.g. the migration's, holding the source host's), or the
    first of ``then`` holding one (a step run again after it handed the
    allocation on), or None when no port asks for resources."""
    groups = [g for g in request_spec.get("requested_resources") or [] if g.get("requester_id")]
    if not groups:
        return None
    for holder in (consumer,) + then:
        allocations = placement.get_allocations(holder).get("allocations") or {}
        if allocations:
            break
    return scheduler_utils.port_profiles(
        groups, allocations=allocations, traits_of=lambda rp: placement.get_traits(rp)[1])


class MaxRetriesExceeded(Exception):
    code = 500

    def __init__(self, instance_uuid, reasons=()):
        self.message = ("Exceeded maximum number of retries. Exhausted all hosts available "
                        f"for retrying migration of instance {instance_uuid}"
                        + (f": {'; '.join(reasons)}" if reasons else "."))
        super().__init__(self.message)


class Recorded:
    """A state object the journal saves at each step and a fresh conductor restores.

    Everything it holds is saved as JSON but what ``attach`` makes from the
    conductor (``SERVICES``: its conf, databases and clients); a cell mapping
    (``CELLS``) is saved as its uuid.
    """

    SERVICES = ()
    CELLS = ()

    def attach(self, services, ctxt):
        raise NotImplementedError

    def record(self):
        saved = {}
        for key, value in vars(self).items():
            if key in self.SERVICES:
                continue
            saved[key] = value.uuid if key in self.CELLS and value is not None else value
        return saved

    @classmethod
    def restore(cls, services, ctxt, saved):
        state = cls.__new__(cls)
        state.__dict__.update(saved)
        for key in cls.CELLS:
            if saved.get(key):
                setattr(state, key, cells_mod.cell_by_uuid(services.api_db, saved[key]))
        state.attach(services, ctxt)
        return state


class Move(Recorded):
    """What one move knows, shared by its tasks.

    ``services``: the conductor (its conf, databases and clients).
    Filled in as it goes: the scheduler's ``host_list`` and ``selection``;
    for a move into another cell, ``target_cell`` and what lives there.
    """

    SERVICES = ("conf", "api_db", "placement", "scheduler", "image_api", "volume_api",
                "network_api", "ctxt", "cell_db", "compute", "target_db", "target_compute",
                "notify")
    CELLS = ("cell", "target_cell")

    def __init__(self, services, ctxt, cell, instance, migration, new_flavor, request_spec,
                 target_host=None, clean_shutdown=True):
        self.cell = cell
        self.target_cell = None
        self.attach(services, ctxt)
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
        self.requested_destination = None  # what the scheduler was asked for (notifications)
        self.disk_info = None
        self.dest_reverted = False
        self.attachments = {}  # live migration: {volume id: the destination's attachment}
        self.cancelled = False  # live migration: aborted on request (the migration 'cancelled')
        # A move into another cell (tasks/cross_cell.py):
        self.target_attachments = []
        self.snapshot_id = None
        self.moved = False     # the instance mapping points at the target cell

    def attach(self, services, ctxt):
        self.conf, self.api_db = services.conf, services.api_db
        self.placement, self.scheduler = services.placement, services.scheduler
        self.image_api, self.volume_api = services.image_api, services.volume_api
        self.network_api = getattr(services, "network_api", None)
        self.notify = getattr(services, "notify_instance", None)
        self.ctxt = ctxt
        self.cell_db = cells_mod.cell_database(self.cell)
        self.compute = compute_api(self.conf, self.cell)
        self.target_db = self.target_compute = None
        if self.target_cell is not None:
            self.enter_cell(self.target_cell)

    @property
    def is_resize(self):
        return self.migration["migration_type"] == "resize"

    @property
    def dest_host(self):
        return self.selection["service_host"]

    def places(self):
        """(cell, host) of the hosts the move touched: the source, and the destination
        once chosen."""
        places = [(self.cell, self.source_host)]
        if self.selection:
            places.append((self.target_cell or self.cell, self.selection["service_host"]))
        return places

    def enter_cell(self, target_cell):
        """The scheduler chose a host in ``target_cell``, another cell."""
        self.target_cell = target_cell
        self.target_db = cells_mod.cell_database(target_cell)
        self.target_compute = compute_api(self.conf, target_cell)


class MoveTask(Task):
    def __init__(self, move):
        self.move = move


def roll_back_destination(move, rollback, attachments=None):
    """``rollback()``: the destination's own undo. A destination that does not
    answer is rolled back from outside as far as the other services allow: its
    port bindings and the volume attachments made for it go (its claim goes with
    the allocation handed back to the source; what is on its disks it removes as
    it starts again, novella/compute/recovery.py reconcile_moves)."""
    try:
        rollback()
    except rpc.Timeout:
        LOG.warning("%s did not answer the undo of migration %s", move.dest_host,
                    move.migration_uuid)
        unanswered(move, move.dest_host, attachments)


def unanswered(state, host, attachments=None):
    """What a host that does not answer had made for the server, removed through
    the services that made it: its port bindings (the source's active again, had
    the host activated its own), the volume attachments."""
    network_api = getattr(state, "network_api", None)
    if network_api is not None:
        source = getattr(state, "source_host", None)
        if source and source != host:  # the ports' active bindings on the source again
            network_api.migrate_instance_finish(
                state.ctxt, state.instance_uuid, source, port_profiles=held_port_profiles(
                    state.placement, state.request_spec, state.migration_uuid,
                    state.instance_uuid))
        network_api.delete_port_bindings(state.ctxt, state.instance_uuid, host)
    for attachment_id in (attachments or {}).values():
        state.volume_api.attachment_delete(state.ctxt, attachment_id)


def first_steps(move, across_cells=False):
    """The steps every move begins with."""
    return [MigrationRecord(move), MigrationAllocation(move),
            SelectDestination(move, across_cells=across_cells)]


class MigrationRecord(MoveTask):
    """On failure: the migration in error, the server as it was, with a fault."""

    def acts(self):
        return False  # the API wrote the migration; this step is here for its undo

    def execute(self):
        pass

    def undo(self, exc):
        move = self.move
        cancelled = getattr(move, "cancelled", False)  # asked for: no fault, not an error
        migration_records.update(move.cell_db, move.migration_uuid,
                                 status=ms.CANCELLED if cancelled else ms.ERROR)
        try:
            records.set_flavors(move.cell_db, move.instance_uuid, move.old_flavor,
                                host=move.source_host, node=move.source_node,
                                availability_zone=move.source_zone,
                                vm_state=move.vm_state, task_state=None)
        except records.InstanceNotFound:
            return
        if not cancelled:
            records.add_fault(move.cell_db, move.instance_uuid, exc)


class MigrationAllocation(MoveTask):
    """The migration owns the source allocation while the server moves."""

    def execute(self):
        move = self.move
        allocations.to_migration(move.placement, move.instance_uuid, move.migration_uuid)

    def undo(self, exc):
        move = self.move
        allocations.hand_back(move.placement, move.migration_uuid, move.instance_uuid)
        # A delete that came in during the move may already have freed the
        # instance's allocation: what was just handed back must not outlive it.
        if _being_deleted(move):
            allocations.give_back(move.placement, move.instance_uuid)


def _being_deleted(move):
    with move.cell_db.read_session() as s:
        try:
            inst = records.get_instance(s, move.instance_uuid, read_deleted=True)
        except records.InstanceNotFound:
            return True
        return bool(inst.deleted) or inst.task_state == task_states.DELETING


def end_request(services, ctxt, cell, instance_uuid, migration_uuid, places):
    """The request's action ends in ``cell`` (the mapping of the server's visible
    copy), then ``free_what_a_delete_left``; whether that copy was deleted is read
    in the action's statement. Returns whether the server was deleted."""
    deleted = records.finish_action(cells_mod.cell_database(cell), ctxt, instance_uuid,
                                    tell_deleted=True)
    return free_what_a_delete_left(services, ctxt, instance_uuid, migration_uuid, places,
                                   known={} if deleted is None else {cell.uuid: deleted})


def free_what_a_delete_left(services, ctxt, instance_uuid, migration_uuid, places, known=None):
    """A delete that came in while the server moved has the last word, once the move
    ended either way: nothing the move held outlives the server.

    ``places``: (cell mapping, host or None) pairs the move touched. When the
    copy of the server the user saw (in one of those cells) was deleted, the
    server stays mapped to that cell, the copy in any other cell is removed,
    the server's allocation and its migration's go, the migration ends 'error'
    if it had not ended, and each host removes what is left there
    (ComputeManager.clean_up_deleted). Returns whether the server was deleted.
    ``known``: {cell uuid: whether deleted there}, for cells the caller has read.
    """
    cells = {cell.uuid: cell for cell, _host in places}
    known = known or {}

    def deleted_in(cell):
        if cell.uuid in known:
            return known[cell.uuid]
        return deleted_by_user(cells_mod.cell_database(cell), instance_uuid)
    deleted = next((cell for cell in cells.values() if deleted_in(cell)), None)
    if deleted is None:
        return False
    cells_mod.set_instance_cell(services.api_db, instance_uuid, deleted)
    if migration_uuid:
        allocations.give_back(services.placement, migration_uuid)
    allocations.give_back(services.placement, instance_uuid)
    for cell in cells.values():
        cell_db = cells_mod.cell_database(cell)
        if cell.uuid != deleted.uuid:
            instance_copy.hard_delete_instance(cell_db, instance_uuid, migration_uuid)
        elif migration_uuid:
            migration_records.update(cell_db, migration_uuid, expected_status=ms.IN_PROGRESS,
                                     status=ms.ERROR)
    for cell, host in places:
        if host:
            compute_api(services.conf, cell).clean_up_deleted(ctxt, host, instance_uuid)
    return True


class DeletedMeanwhile(Exception):
    def __init__(self, instance_uuid):
        self.message = f"Instance {instance_uuid} was deleted during its move."
        super().__init__(self.message)


def deleted_by_user(cell_db, instance_uuid):
    """This cell's copy of the server was deleted (or is being deleted); a copy that
    is not there was never made or was removed by the move itself."""
    with cell_db.read_session() as s:
        try:
            inst = records.get_instance(s, instance_uuid, read_deleted=True)
        except records.InstanceNotFound:
            return False
        return bool(inst.deleted) or inst.task_state == task_states.DELETING


class SelectDestination(MoveTask):
    """The scheduler picks and claims the destination (the instance is the consumer).

    In the server's cell, or, ``across_cells``, in any cell the request
    allows (the CrossCellWeigher prefers the source's).
    """

    def __init__(self, move, across_cells=False):
        super().__init__(move)
        self.across_cells = across_cells

    def execute(self):
        move = self.move
        spec = dict(move.request_spec, instance_uuid=move.instance_uuid, num_instances=1,
                    flavor=move.new_flavor, retry=None, force_hosts=[], force_nodes=[])
        if self.across_cells:
            target_cell = (cells_mod.host_cell(move.api_db, move.target_host)
                           if move.target_host else None)
            spec["requested_destination"] = {
                "host": move.target_host, "node": None,
                "cell_uuid": target_cell.uuid if target_cell else None,
                "allow_cross_cell_move": True, "source_cell_uuid": move.cell.uuid}
        else:
            spec["requested_destination"] = {"host": move.target_host, "node": None,
                                             "cell_uuid": move.cell.uuid}
        move.requested_destination = spec["requested_destination"]
        same_host_ok = move.is_resize and move.conf.allow_resize_to_same_host
        spec["ignore_hosts"] = [] if same_host_ok else [move.source_host]
        host_lists = move.scheduler.select_destinations(move.ctxt, spec, [move.instance_uuid],
                                                        return_alternates=True)
        move.host_list = host_lists[0][:move.conf.scheduler.max_attempts]
        move.selection = move.host_list[0]

    def undo(self, exc):
        pass  # MigrationAllocation's undo replaces the instance's claim atomically


def unless_settled(task, call, *args, **kwargs):
    """``call(*args, **kwargs)``; a host that gives no answer but whose records show
    it took the server (``task.settled()``: it died past its point of no return)
    leaves the step done, the operation going forward as a fresh conductor's would."""
    try:
        return call(*args, **kwargs)
    except rpc.Timeout:
        if not task.settled():
            raise


def on_a_destination(state, what, prepare):
    """``prepare(selection)`` on the chosen destination, else on each alternate in turn.

    ``state`` has ``host_list``, ``selection``, ``placement``,
    ``instance_uuid``, ``project_id`` and ``user_id``. An alternate is
    claimed in Placement first (the instance as consumer) and a host that
    refuses has its claim deleted before the next is tried. Returns what
    ``prepare`` returned; raises MaxRetriesExceeded when no host accepts.
    ``what`` names the step in the log.
    """
    reasons = []
    for attempt, sel in enumerate(state.host_list):
        if attempt and not claim_alternate(state, sel):
            reasons.append(f"{sel['service_host']}: claim refused")
            continue
        state.selection = sel
        try:
            return prepare(sel)
        except Exception as exc:  # noqa: BLE001 - the host said no: try the next one
            LOG.info("%s of %s on %s failed: %s", what, state.instance_uuid,
                     sel["service_host"], exc)
            reasons.append(f"{sel['service_host']}: {exc}")
            if isinstance(exc, rpc.Timeout):  # it could not take back what it began
                unanswered(state, sel["service_host"])
        allocations.give_back(state.placement, state.instance_uuid)  # the refused claim
    state.selection = None
    raise MaxRetriesExceeded(state.instance_uuid, reasons)


def prepare_destination(move, method, *args):
    """``method(ctxt, host, instance, migration, *args, port_profiles=...)`` on the
    chosen destination, else on each alternate (``on_a_destination``); the
    ports' binding profiles name the providers of that host's allocation."""
    return on_a_destination(move, method.__name__, lambda sel: method(
        move.ctxt, sel["service_host"], move.instance_uuid, move.migration_uuid, *args,
        port_profiles=scheduler_utils.selection_port_profiles(move.request_spec, sel)))


def claim_alternate(state, sel):
    """Claim an alternate's allocation request for the instance; False if refused."""
    return allocations.claim(state.placement, state.instance_uuid, sel["allocation_request"],
                             state.project_id, state.user_id)


class Resized(Recorded):
    """A move in VERIFY_RESIZE, to be confirmed or reverted.

    ``cell``: where the server is mapped now (the destination's cell);
    ``source_cell``: the source host's (the same cell unless the move
    crossed cells, when the source cell still holds a hidden copy).
    """

    SERVICES = ("conf", "api_db", "ctxt", "placement", "volume_api", "cell_db", "source_db",
                "dest_compute", "source_compute")
    CELLS = ("cell", "source_cell")

    def __init__(self, services, ctxt, instance_uuid, migration, instance_power_state,
                 cell=None):
        """``instance_power_state``: the server's, as read with ``migration``;
        ``cell``: the server's cell mapping, when the caller has just read it."""
        self.instance_uuid = instance_uuid
        self.migration = migration
        self.migration_uuid = migration["uuid"]
        self.source_host = migration["source_compute"]
        self.dest_host = migration["dest_compute"]
        self.cell = cell or cells_mod.instance_cell(services.api_db, instance_uuid)
        self.source_cell = (cells_mod.host_cell(services.api_db, self.source_host)
                            if migration.get("cross_cell_move") else self.cell)
        self.attach(services, ctxt)
        self.power_on = instance_power_state == power_state.RUNNING
        self.mapped_back = False  # a cross-cell revert: the mapping points at the source again

    def attach(self, services, ctxt):
        self.conf, self.api_db, self.ctxt = services.conf, services.api_db, ctxt
        self.placement, self.volume_api = services.placement, services.volume_api
        self.cell_db = cells_mod.cell_database(self.cell)
        self.source_db = cells_mod.cell_database(self.source_cell)
        self.dest_compute = compute_api(self.conf, self.cell)
        self.source_compute = compute_api(self.conf, self.source_cell)

    def places(self):
        return [(self.source_cell, self.source_host), (self.cell, self.dest_host)]

    @property
    def instance_cell(self):
        """The cell of the server's visible copy."""
        return self.source_cell if self.mapped_back else self.cell

    @property
    def instance_db(self):
        """The cell database of the server's visible copy."""
        return self.source_db if self.mapped_back else self.cell_db


class ResizedTask(Task):
    def __init__(self, resized):
        self.resized = resized
