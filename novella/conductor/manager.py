"""The super-conductor (topic ``conductor``): its RPC entry points.

Each entry point loads what the operation needs, picks its task list
(novella/conductor/tasks: one module per operation) and runs it under the
conductor's action event; the task list undoes a failure. The API has
already written the migration row (pre-migrating), set the task state and
started the instance action; the conductor finishes the action.

It reaches the scheduler over the top-level transport, each cell's compute
hosts over that cell's transport (from the cell mapping) and writes the API
database and every cell database.
"""
import collections
import contextlib
import datetime
import itertools
import json
import logging
import types

import sqlalchemy as sa

from novella import rpc, service
from novella.compute import states
from novella.compute.states import migration_status as ms
from novella.conductor import journal, operations
from novella.conductor.tasks import build as build_tasks
from novella.conductor.tasks import common
from novella.conductor.tasks import cross_cell as cross_cell_tasks
from novella.conductor.tasks import shelve as shelve_tasks
from novella.conductor.tasks.base import TaskList, Unfinished
from novella.context import RequestContext, get_admin_context
from novella.db import api_models as am
from novella.db import cell_models as cm
from novella.db import cells as cells_mod
from novella.db import instance_copy
from novella.db import migration_records
from novella.db import records
from novella.db import request_specs
from novella.rpc import notifications
from novella.rpc import notifier as notifier_mod
from novella.scheduler.rpcapi import SchedulerAPI

LOG = logging.getLogger(__name__)

def _now():
    """The clock lost requests are judged by (their records' timestamps are UTC)."""
    return records.utcnow()


# A request the API accepted, as it left it: what it asks ('build', 'move',
# 'confirm', 'revert', 'unshelve'), its cell (None for a build), its server, its
# migration (a dict; None for a build or an unshelve), when it was accepted, a
# context of the user's action, its claim's name.
LostRequest = collections.namedtuple(
    "LostRequest", "what cell cell_db instance_uuid migration accepted_at ctxt key")


class RequestLost(Exception):
    """Why a request no conductor began was settled (its cast was lost)."""

    def __init__(self, request, what):
        self.message = (f"The request to {what} server {request.instance_uuid}, accepted "
                        f"at {request.accepted_at:%Y-%m-%d %H:%M:%S} UTC, was never begun by "
                        "a conductor (its message was lost); it was not carried out.")
        super().__init__(self.message)


class RequestNotRecorded(Exception):
    """Why the task state of a request the API never recorded in full was cleared."""

    def __init__(self, instance_uuid, action):
        self.message = (f"The request {action} of server {instance_uuid} was not recorded "
                        "in full (the API process stopped or failed between its writes) and "
                        "was never sent to a conductor; it was not carried out.")
        super().__init__(self.message)


def _uuid_of(build_request):
    return build_request if isinstance(build_request, str) else build_request["instance_uuid"]


_BUILD_REQUEST = sa.select(
    am.BuildRequest.instance, am.BuildRequest.block_device_mappings, am.BuildRequest.tags
).where(am.BuildRequest.instance_uuid == sa.bindparam("b_uuid"))


def _what_the_conductor_reads(row):
    """The instance row's values the conductor goes by (its flavor among them)."""
    return types.SimpleNamespace(
        flavor=records.flavor_of(row),
        **{k: getattr(row, k) for k in ("uuid", "project_id", "user_id", "host", "node",
                                        "availability_zone", "vm_state", "task_state",
                                        "power_state")})


class ConductorManager:
    def __init__(self, conf, api_db, placement, network_api=None, volume_api=None,
                 image_api=None, notifier=None):
        self.conf = conf
        self.api_db = api_db
        self.placement = placement
        self.network_api = network_api
        self.volume_api = volume_api
        self.image_api = image_api
        self.notifier = notifier
        self.scheduler = SchedulerAPI(rpc.get_transport(conf.transport_url),
                                      timeout=conf.long_rpc_timeout)
        self.owner = journal.conductor_id()
        self.lease = conf.conductor.operation_lease

    @property
    def periodic_tasks(self):
        # Cross-cell moves are confirmed here, at the period the hosts confirm theirs.
        confirm = service.DEFAULT_INTERVAL if self.conf.resize_confirm_window > 0 else 0
        return {"poll_unconfirmed_cross_cell_resizes": confirm,
                "renew_leases": max(1, self.lease // 3),
                "recover_operations": self.lease}

    def _journal(self, kind, ctxt, state, key=None):
        """The durable record of an operation about to start (``key``: the request's
        name for it, ``journal.request_key``)."""
        return journal.Journal(self.api_db, self.owner, self.lease, kind, state.instance_uuid,
                               ctxt, state).begin(key)

    @staticmethod
    def _claim(tasks):
        """The request ``tasks`` begins is this conductor's (``Journal.claim``, before
        anything is written of it); False, and nothing done, if another conductor began
        it or settled it as lost (this cast came late)."""
        quiet = list(itertools.takewhile(lambda task: not task.acts(), tasks.tasks[:-1]))
        try:
            tasks.journal.claim(tasks.tasks[len(quiet)].name, done=[t.name for t in quiet])
        except journal.Taken as exc:
            LOG.warning("%s: not begun: %s", tasks.name, exc)
            return False
        return True

    # -- builds ----------------------------------------------------------------------
    def schedule_and_build_instances(self, ctxt, build_requests, request_specs=None,
                                     requested_networks=None, block_device_mappings=None,
                                     tags=None):
        uuids = [_uuid_of(br) for br in build_requests]
        specs = list(request_specs or [None] * len(uuids))
        builds = []  # one journaled task list per server not deleted meanwhile
        for uuid, spec in zip(uuids, specs):
            br = self._load_build_request(uuid, block_device_mappings, tags)
            if br is None:
                LOG.info("server %s was deleted before scheduling", uuid)
                continue
            build = build_tasks.Build(self, ctxt, uuid, spec or self._request_spec(uuid), br,
                                      requested_networks, launch_index=len(builds))
            tasks = TaskList(f"build {uuid}", build_tasks.build_tasks(build),
                             journal=self._journal("build", ctxt, build,
                                                   key=journal.request_key("build", uuid)))
            if self._claim(tasks):  # else settled as lost already: buried in cell0
                builds.append(tasks)
        if not builds:
            return
        for tasks in builds:
            tasks.started(0)  # the scheduler claims for every server of the request at once
        first = builds[0].tasks[0].build
        spec = dict(first.request_spec, num_instances=len(builds))
        try:
            host_lists = self.scheduler.select_destinations(
                ctxt, spec, [tasks.journal.instance_uuid for tasks in builds],
                return_alternates=True)
        except Exception as exc:  # noqa: BLE001 - NoValidHost or an unreachable scheduler
            LOG.info("scheduling %s failed: %s", uuids, exc)
            for tasks in builds:
                self._build_failed(ctxt, tasks, exc)
            return
        for tasks, host_list in zip(builds, host_lists):
            build = tasks.tasks[0].build
            build.scheduled(host_list)
            try:
                tasks.run()
            except build_tasks.BuildRequestNotFound:
                LOG.info("server %s was deleted while it was scheduled", build.instance_uuid)
            except Exception as exc:  # noqa: BLE001 - undone; the server must still show why
                LOG.exception("build of %s failed", build.instance_uuid)
                self._bury_in_cell0_or_log(ctxt, build, exc)

    def _build_failed(self, ctxt, tasks, exc):
        """A build that got no host: its claim (if any) freed, then buried in cell0."""
        build = tasks.tasks[0].build
        tasks.undo([(0, tasks.tasks[0])], exc)
        self._bury_in_cell0_or_log(ctxt, build, exc)

    def _bury_in_cell0_or_log(self, ctxt, build, exc):
        """Bury a failed build; a failure to do so is logged, never raised: the other
        servers of the request must still be built (their claims are held)."""
        try:
            self._bury_in_cell0(ctxt, build.instance_uuid, build.request_spec,
                                build.build_request, exc)
        except Exception:  # noqa: BLE001 - its build request stays: the server shows BUILD
            LOG.exception("could not record the failed build of %s in cell0",
                          build.instance_uuid)

    def _bury_in_cell0(self, ctxt, instance_uuid, spec, build_request, exc):
        """A server that got no host: in cell0, ERROR, with a fault, mapped there."""
        cell0 = cells_mod.cell_by_uuid(self.api_db, cells_mod.CELL0_UUID)
        cell0_db = cells_mod.cell_database(cell0)
        build_tasks.create_instance(cell0_db, ctxt, instance_uuid, build_request, spec,
                                    action="create", vm_state=states.ERROR, task_state=None)
        records.failed_event(cell0_db, ctxt, instance_uuid, build_tasks.CONDUCTOR_EVENT, exc,
                             finish_action=True)
        records.add_fault(cell0_db, instance_uuid, exc)
        build_tasks.map_instance(self.api_db, instance_uuid, cell0.id)
        if not build_tasks.delete_build_request(self.api_db, instance_uuid):
            # Deleted by its user meanwhile: it is gone from cell0 too.
            build_tasks.soft_delete_instance(cell0_db, instance_uuid)
        self._notify(ctxt, notifications.event_type(notifications.BUILD_INSTANCES, "error"),
                     notifier_mod.compute_task_payload(instance_uuid, spec, states.ERROR, exc))

    # -- moves -------------------------------------------------------------------------

    def migrate_server(self, ctxt, instance_uuid, migration_uuid, flavor=None, host=None,
                       clean_shutdown=True, allow_cross_cell=False):
        """Resize (``flavor`` given) or cold migrate (optionally to ``host``).

        ``allow_cross_cell``: the API found the cross-cell policy passing; the
        move may then leave the cell when every compute service can.
        """
        move = self._move(ctxt, instance_uuid, migration_uuid, host=host, flavor=flavor,
                          clean_shutdown=clean_shutdown)
        kind = ("migrate-cross-cell" if allow_cross_cell
                and cross_cell_tasks.cross_cell_move_allowed(self.api_db) else "migrate")
        return self._run_move(ctxt, move, kind)

    def live_migrate_instance(self, ctxt, instance_uuid, migration_uuid, host=None):
        """Live-migrate a running server inside its cell (tasks/live_migrate.py)."""
        move = self._move(ctxt, instance_uuid, migration_uuid, host=host)
        return self._run_move(ctxt, move, "live-migrate")

    def evacuate_instance(self, ctxt, instance_uuid, migration_uuid, host=None):
        """Rebuild elsewhere in its cell a server whose host is down (tasks/evacuate.py)."""
        move = self._move(ctxt, instance_uuid, migration_uuid, host=host)
        return self._run_move(ctxt, move, "evacuate")

    def _move(self, ctxt, instance_uuid, migration_uuid, host=None, flavor=None,
              clean_shutdown=True):
        """The state of a move about to start; ``flavor``: the new one (a resize)."""
        cell, spec = request_specs.get_with_cell(self.api_db, instance_uuid)
        migration, row = migration_records.get_with_instance(
            cells_mod.cell_database(cell), migration_uuid, instance_uuid)
        inst = _what_the_conductor_reads(row)
        return common.Move(self, ctxt, cell, inst, migration, flavor or inst.flavor, spec,
                           target_host=host, clean_shutdown=clean_shutdown)

    def _run_move(self, ctxt, move, kind):
        """Run a move's tasks under the conductor's event; a failure is undone
        and recorded (the fault and the migration say why), not raised."""
        operation = operations.OPERATIONS[kind]
        task_list = TaskList(f"{kind} {move.instance_uuid}", operation.tasks(move),
                             journal=self._journal(kind, ctxt, move, key=journal.request_key(
                                 "move", move.migration_uuid)))
        if not self._claim(task_list):
            return {"completed": [], "failed_task": None, "undone": [], "cross_cell": False}
        try:
            with records.action_event(move.cell_db, ctxt, move.instance_uuid,
                                      operation.event):
                task_list.run()
        except Exception as exc:  # noqa: BLE001 - undone; the fault and migration say why
            LOG.info("%s %s of %s failed (undone: %s)", kind, move.migration_uuid,
                     move.instance_uuid, task_list.undone)
            self.move_failed(ctxt, move, exc)
        self._move_ended(ctxt, move)
        return {"completed": task_list.completed, "failed_task": task_list.failed_task,
                "undone": task_list.undone, "cross_cell": move.target_cell is not None}

    def move_failed(self, ctxt, move, exc):
        """compute_task.migrate_server.error (rebuild_server for an evacuation)."""
        task = (notifications.REBUILD_SERVER if move.migration["migration_type"] == "evacuation"
                else notifications.MIGRATE_SERVER)
        db = move.target_db if move.moved else move.cell_db
        try:
            with db.read_session() as s:
                state = records.get_instance(s, move.instance_uuid, read_deleted=True).vm_state
        except Exception:  # noqa: BLE001 - a notification never breaks an operation
            state = None
        # The request spec as the scheduler was given it (the destination asked for).
        spec = dict(move.request_spec, requested_destination=getattr(
            move, "requested_destination", None))
        self._notify(ctxt, notifications.event_type(task, "error"),
                     notifier_mod.compute_task_payload(move.instance_uuid, spec, state, exc))

    def _move_ended(self, ctxt, move):
        if common.end_request(self, ctxt, move.cell, move.instance_uuid, move.migration_uuid,
                              move.places()):
            return
        if move.moved:  # the events recorded in the source cell join the server's copy
            instance_copy.sync_actions(move.cell_db, move.target_db, move.instance_uuid)

    # -- confirm and revert ---------------------------------------------------------------

    def confirm_resize(self, ctxt, instance_uuid, migration_uuid):
        self._run_resized(ctxt, self._resized(ctxt, instance_uuid, migration_uuid), "confirm")

    def revert_resize(self, ctxt, instance_uuid, migration_uuid):
        self._run_resized(ctxt, self._resized(ctxt, instance_uuid, migration_uuid), "revert")

    def _resized(self, ctxt, instance_uuid, migration_uuid):
        cell = cells_mod.instance_cell(self.api_db, instance_uuid)
        migration, inst = migration_records.get_with_instance(
            cells_mod.cell_database(cell), migration_uuid, instance_uuid)
        return common.Resized(self, ctxt, instance_uuid, migration, inst.power_state, cell=cell)

    def _run_resized(self, ctxt, resized, action):
        """Confirm or revert: on failure the migration in error and a fault, then raised.
        (Nothing is returned: the migration says how it ended.)

        Across cells the conductor sends the .start and .end notifications, as
        no one host sees the whole of it.
        """
        cross_cell = bool(resized.migration.get("cross_cell_move"))
        kind = action + ("-cross-cell" if cross_cell else "")
        uuid = resized.instance_uuid
        tasks = TaskList(f"{kind} {uuid}", operations.OPERATIONS[kind].tasks(resized),
                         journal=self._journal(kind, ctxt, resized, key=journal.request_key(
                             action, resized.migration_uuid)), forward=True)
        if not self._claim(tasks):
            return
        if cross_cell:
            name = (notifications.RESIZE_CONFIRM if action == "confirm"
                    else notifications.RESIZE_REVERT)
            with notifications.action(lambda event_type, fault=None: self.notify_instance(
                    ctxt, resized.instance_db, uuid, event_type, fault=fault), name):
                self._resized_ended(ctxt, resized, tasks.run)
        else:
            self._resized_ended(ctxt, resized, tasks.run)

    def _resized_ended(self, ctxt, resized, run):
        """``run()`` the rest of a confirm or revert, then record how it ended (unless
        it waits for a host, to be carried on by recovery)."""
        try:
            run()
        except Unfinished:
            return
        except Exception as exc:
            migration_records.update(resized.instance_db, resized.migration_uuid,
                                     status=ms.ERROR)
            with contextlib.suppress(records.InstanceNotFound):
                records.add_fault(resized.instance_db, resized.instance_uuid, exc)
            self._resized_closed(ctxt, resized)
            raise
        self._resized_closed(ctxt, resized)

    def _resized_closed(self, ctxt, resized):
        common.end_request(self, ctxt, resized.instance_cell, resized.instance_uuid,
                           resized.migration_uuid, resized.places())

    def poll_unconfirmed_cross_cell_resizes(self, ctxt=None):
        """Confirm cross-cell moves in VERIFY_RESIZE longer than ``resize_confirm_window``.

        (A move inside a cell is confirmed by its source host's own poll.)
        """
        window = self.conf.resize_confirm_window
        if window <= 0:
            return []
        cutoff = records.utcnow() - datetime.timedelta(seconds=window)

        def due(cell, db):
            with db.session() as s:
                return [(db, *row) for row in s.execute(
                    sa.select(cm.Migration.uuid, cm.Migration.instance_uuid).where(
                        cm.Migration.cross_cell_move.is_(True), cm.Migration.hidden.is_(False),
                        cm.Migration.status == ms.FINISHED, cm.Migration.deleted == 0,
                        cm.Migration.updated_at <= cutoff))]
        confirmed = []
        cells = cells_mod.list_cells(self.api_db, include_cell0=False)
        for result in cells_mod.scatter(cells, due).values():
            if isinstance(result, Exception):
                continue
            for db, migration_uuid, instance_uuid in result:
                actx = get_admin_context()
                try:
                    if migration_records.update(db, migration_uuid, expected_status=ms.FINISHED,
                                                status=ms.CONFIRMING) is None:
                        continue
                    records.start_action(db, actx, instance_uuid, "confirmResize")
                    self.confirm_resize(actx, instance_uuid, migration_uuid)
                    confirmed.append(migration_uuid)
                except Exception:  # noqa: BLE001 - one stuck move must not block the others
                    LOG.exception("automatic confirmation of migration %s failed",
                                  migration_uuid)
        return confirmed

    # -- shelve --------------------------------------------------------------------------

    def unshelve_instance(self, ctxt, instance_uuid, host=None):
        """``host``: the host asked for (2.91); the zone asked for is in the request spec."""
        cell, cell_db, inst = self._instance(instance_uuid)
        unshelve = shelve_tasks.Unshelve(self, ctxt, cell, inst,
                                         self._request_spec(instance_uuid), host=host)
        tasks = TaskList(f"unshelve {instance_uuid}", shelve_tasks.unshelve_tasks(unshelve),
                         journal=self._journal("unshelve", ctxt, unshelve, key=journal.request_key(
                             "unshelve", instance_uuid, str(ctxt.request_id))))
        if not self._claim(tasks):
            return
        try:
            with records.action_event(cell_db, ctxt, instance_uuid,
                                      shelve_tasks.CONDUCTOR_EVENT):
                tasks.run()
        except Exception:  # noqa: BLE001 - undone: the server stays shelved, with a fault
            pass
        finally:
            records.finish_action(cell_db, ctxt, instance_uuid)
            common.free_what_a_delete_left(self, ctxt, instance_uuid, None, unshelve.places())

    # -- recovery ------------------------------------------------------------------------

    def renew_leases(self, ctxt=None):
        """This conductor lives: the operations it runs stay its own."""
        return journal.renew_leases(self.api_db, self.owner, self.lease)

    def recover_operations(self, ctxt=None, previous_owners=False):
        """Finish or undo every operation whose conductor died (its lease ran out), then
        settle the requests the API accepted that no conductor began in time.

        Run at start-up and periodically; of several conductors exactly one
        takes each orphan (novella/conductor/operations.py says which way each
        goes) and exactly one settles each lost request (``settle_lost_requests``).
        ``previous_owners``: every other owner is known dead (the all-in-one, its
        databases' only conductor, starting again): their operations are taken
        over at once, and every request not begun is settled whatever its age.
        """
        if previous_owners:
            journal.expire_others(self.api_db, self.owner)
        recovered = []
        for operation_uuid in journal.orphans(self.api_db):
            operation = journal.take_over(self.api_db, operation_uuid, self.owner, self.lease)
            if operation is None:
                continue  # another conductor took it first
            try:
                operations.recover(self, operation)
            except Exception:  # noqa: BLE001 - one stuck operation must not block the others
                LOG.exception("recovery of operation %s (%s of %s) failed", operation_uuid,
                              operation["kind"], operation["instance_uuid"])
            recovered.append(operation_uuid)
        return recovered + self.settle_lost_requests(everything=previous_owners)

    # -- requests whose cast was lost ----------------------------------------------------
    #
    # The API records a request (a build request; a migration row, the task state,
    # the instance action), then casts it to a conductor. A cast dies with the process
    # that sent it or with the conductor that took it off the queue before journaling
    # its first step; nothing then begins the request. The conductor that begins a
    # request claims it: the operation's row, named after the request
    # (journal.request_key), is written before anything else of it. A request
    # accepted longer than ``[conductor] lost_request_timeout`` ago and not claimed is
    # claimed by the first conductor whose periodic recovery finds it, and settled as
    # if its conductor had died in its first step: a build, a move or an unshelve goes
    # back (refused), a confirm or a revert forward (carried out). Of a settler and a
    # beginner (a cast that was only slow), or of two settlers, exactly one writes the
    # row; the other does nothing.

    # The migration statuses the API gives a move it accepted, with the task state set then.
    _ACCEPTED_MOVES = {ms.PRE_MIGRATING: (states.task_states.RESIZE_PREP,),
                       ms.ACCEPTED: (states.task_states.MIGRATING,
                                     states.task_states.REBUILDING)}
    # By migration type: the operation that begins a move, and the user's action.
    _MOVE_KINDS = {"resize": "migrate", "migration": "migrate", "live-migration": "live-migrate",
                   "evacuation": "evacuate"}
    _ACTIONS = {"resize": "resize", "migration": "migrate", "live-migration": "live-migration",
                "evacuation": "evacuate", "confirm": "confirmResize", "revert": "revertResize",
                "unshelve": "unshelve"}
    # The operations that may have begun each kind of request.
    _BEGUN_BY = {"build": ("build",),
                 "move": ("migrate", "migrate-cross-cell", "live-migrate", "evacuate"),
                 "confirm": ("confirm", "confirm-cross-cell"),
                 "revert": ("revert", "revert-cross-cell"), "unshelve": ("unshelve",)}

    def settle_lost_requests(self, everything=False):
        """Settle each request the API accepted more than ``[conductor]
        lost_request_timeout`` seconds ago (``everything``: whatever its age) that no
        conductor began. A move (its migration still as the API made it) is undone as
        a refused move: the migration ``error``, the task state cleared, a fault, the
        conductor's event and the action ``Error``. An unshelve is undone the same way
        (the server stays shelved). A build (its build request still in the API
        database) goes to cell0 in ERROR with a fault, as when no host is found. A
        confirm or a revert is carried out. Returns the migrations settled (the
        servers, for an unshelve or a build)."""
        bound = self.conf.conductor.lost_request_timeout
        if not everything and bound <= 0:
            return []
        cutoff = _now() - datetime.timedelta(seconds=0 if everything else bound)
        settled = []
        for request in list(self._lost_requests(cutoff)):
            try:
                if self._settle(request):
                    settled.append(request.migration["uuid"] if request.migration
                                   else request.instance_uuid)
            except Exception:  # noqa: BLE001 - one stuck request must not block the others
                LOG.exception("settling the lost %s of %s failed", request.what,
                              request.instance_uuid)
        return settled + self._clear_stranded_task_states(cutoff)

    # The task states the API sets for a request before it writes what a conductor reads
    # of it (the migration row, or the migration's 'reverting'), by the actions it
    # records with them.
    _STRANDED = {states.task_states.RESIZE_PREP: ("resize", "migrate"),
                 states.task_states.MIGRATING: ("live-migration",),
                 states.task_states.RESIZE_REVERTING: ("revertResize",)}

    def _clear_stranded_task_states(self, cutoff):
        """Servers left with the task state the API set for a request it never recorded
        in full (it died, or its next write failed, between the two), and so never
        cast, set at ``cutoff`` or before: a resize's or a live migration's task state
        with no migration made since its action, a revert's while the migration is still
        ``finished``, and no operation of the server running. The task state is
        cleared (compare-and-set: of several conductors one does it), the action's
        events end ``Error``, a fault says why. Returns the servers."""
        cleared = []
        for cell in cells_mod.list_cells(self.api_db, include_cell0=False):
            cell_db = cells_mod.cell_database(cell)
            try:
                stranded = list(self._stranded(cell_db, cutoff))
            except Exception:  # noqa: BLE001 - a cell out of reach must not block the others
                LOG.exception("could not look for stranded servers in cell %s", cell.name)
                continue
            for uuid, task_state, ctxt, action in stranded:
                if journal.running_for(self.api_db, uuid):
                    continue
                try:
                    records.update_instance(cell_db, uuid, reload=False,
                                            expected_task_state=(task_state,), task_state=None)
                except (records.UnexpectedTaskStateError, records.InstanceNotFound):
                    continue  # another conductor cleared it, or the server moved on
                exc = RequestNotRecorded(uuid, action)
                LOG.warning("%s", exc.message)
                with contextlib.suppress(records.InstanceNotFound):
                    records.add_fault(cell_db, uuid, exc)
                records.finish_open_events(cell_db, ctxt, uuid, "Error")
                cleared.append(uuid)
        return cleared

    def _stranded(self, cell_db, cutoff):
        """(server, task state, context of its action, action) of each stranded server."""
        with cell_db.read_session() as s:
            rows = s.execute(sa.select(cm.Instance.uuid, cm.Instance.task_state).where(
                cm.Instance.task_state.in_(tuple(self._STRANDED)), cm.Instance.deleted == 0,
                cm.Instance.hidden.is_(False), cm.Instance.updated_at <= cutoff)).all()
        for uuid, task_state in rows:
            ctxt, at, action = self._action_context(cell_db, uuid, self._STRANDED[task_state])
            if at is None or at > cutoff:
                continue
            with cell_db.read_session() as s:
                if task_state == states.task_states.RESIZE_REVERTING:
                    recorded = not s.scalar(sa.select(sa.func.count()).select_from(
                        cm.Migration).where(cm.Migration.instance_uuid == uuid,
                                            cm.Migration.status == ms.FINISHED,
                                            cm.Migration.deleted == 0))
                else:
                    recorded = s.scalar(sa.select(sa.func.count()).select_from(
                        cm.Migration).where(cm.Migration.instance_uuid == uuid,
                                            cm.Migration.created_at >= at)) > 0
            if not recorded:
                yield uuid, task_state, ctxt, action

    def _lost_requests(self, cutoff):
        """LostRequest for each request of every cell accepted at ``cutoff`` or before,
        as the API left it, that no operation claimed."""
        with self.api_db.read_session() as s:
            builds = s.execute(sa.select(am.BuildRequest.instance_uuid,
                                         am.BuildRequest.project_id, am.BuildRequest.created_at)
                               .where(am.BuildRequest.created_at <= cutoff)).all()
        for uuid, project_id, at in builds:
            key = journal.request_key("build", uuid)
            if not self._begun(key, uuid, at, "build"):
                ctxt = RequestContext(project_id=project_id, roles=["admin"], is_admin=True)
                yield LostRequest("build", None, None, uuid, None, at, ctxt, key)
        for cell in cells_mod.list_cells(self.api_db, include_cell0=False):
            cell_db = cells_mod.cell_database(cell)
            try:
                migrations, unshelving = self._accepted_requests(cell_db)
            except Exception:  # noqa: BLE001 - a cell out of reach must not block the others
                LOG.exception("could not look for lost requests in cell %s", cell.name)
                continue
            for row in migrations:
                if row.status in self._ACCEPTED_MOVES:
                    what, at, action = "move", row.created_at, self._ACTIONS[row.migration_type]
                else:
                    what = "confirm" if row.status == ms.CONFIRMING else "revert"
                    at, action = row.updated_at or row.created_at, self._ACTIONS[what]
                key = journal.request_key(what, row.uuid)
                if at > cutoff or self._begun(key, row.instance_uuid, at, what):
                    continue
                mapped = cells_mod.instance_cell(self.api_db, row.instance_uuid)
                if mapped is None or mapped.uuid != cell.uuid:
                    continue  # the copy of a cross-cell move in the cell it left
                migration = {"uuid": row.uuid, "status": row.status,
                             "migration_type": row.migration_type,
                             "cross_cell_move": bool(row.cross_cell_move)}
                ctxt, _at, _action = self._action_context(cell_db, row.instance_uuid, action)
                yield LostRequest(what, cell, cell_db, row.instance_uuid, migration, at, ctxt,
                                  key)
            for uuid, updated_at in unshelving:
                if updated_at is not None and updated_at > cutoff:
                    continue  # the API set the task state since (its action comes after)
                # No action: the API died before it recorded one, and before its cast.
                ctxt, at, action = self._action_context(cell_db, uuid, "unshelve")
                at = at or updated_at
                key = journal.request_key("unshelve", uuid,
                                          str(ctxt.request_id) if action else "-")
                if at is None or at > cutoff or self._begun(key, uuid, at, "unshelve"):
                    continue
                yield LostRequest("unshelve", cell, cell_db, uuid, None, at, ctxt, key)

    def _accepted_requests(self, cell_db):
        """(migrations, unshelving servers) of ``cell_db`` as the API leaves requests."""
        with cell_db.read_session() as s:
            migrations = s.execute(sa.select(
                cm.Migration.uuid, cm.Migration.instance_uuid, cm.Migration.status,
                cm.Migration.migration_type, cm.Migration.cross_cell_move,
                cm.Migration.created_at, cm.Migration.updated_at).join(
                cm.Instance, cm.Instance.uuid == cm.Migration.instance_uuid).where(
                cm.Migration.status.in_(tuple(self._ACCEPTED_MOVES)
                                        + (ms.CONFIRMING, ms.REVERTING)),
                cm.Migration.hidden.is_(False), cm.Migration.deleted == 0,
                cm.Instance.deleted == 0)).all()
            unshelving = s.execute(sa.select(cm.Instance.uuid, cm.Instance.updated_at).where(
                cm.Instance.task_state == states.task_states.UNSHELVING,
                cm.Instance.vm_state.in_((states.SHELVED, states.SHELVED_OFFLOADED)),
                cm.Instance.hidden.is_(False), cm.Instance.deleted == 0)).all()
        return migrations, unshelving

    def _begun(self, key, instance_uuid, accepted_at, what):
        """The request's claim exists, or (written before requests were claimed by name)
        an operation of its kind on the server began after it was accepted."""
        with self.api_db.read_session() as s:
            return s.scalar(sa.select(sa.func.count()).select_from(am.Operation).where(
                sa.or_(am.Operation.uuid == key, sa.and_(
                    am.Operation.instance_uuid == instance_uuid,
                    am.Operation.kind.in_(self._BEGUN_BY[what]),
                    am.Operation.created_at > accepted_at)))) > 0

    @staticmethod
    def _action_context(cell_db, instance_uuid, actions):
        """(an admin context of the user's latest action on the server named ``actions``
        (one name or several): its request id (the beginner's, which names the action
        and its events), user and project; when the API recorded it; its name). A fresh
        admin context and None, None if there is none."""
        names = (actions,) if isinstance(actions, str) else tuple(actions)
        with cell_db.read_session() as s:
            row = s.execute(sa.select(
                cm.InstanceAction.request_id, cm.InstanceAction.user_id,
                cm.InstanceAction.project_id, cm.InstanceAction.start_time,
                cm.InstanceAction.action).where(
                cm.InstanceAction.instance_uuid == instance_uuid,
                cm.InstanceAction.action.in_(names)).order_by(
                cm.InstanceAction.id.desc()).limit(1)).first()
        if row is None:
            return get_admin_context(), None, None
        return (RequestContext(user_id=row.user_id, project_id=row.project_id, roles=["admin"],
                               is_admin=True, request_id=row.request_id),
                row.start_time, row.action)

    @staticmethod
    def _newer_migration(cell_db, instance_uuid, migration_uuid):
        """The server has a migration made after ``migration_uuid``."""
        with cell_db.read_session() as s:
            this = sa.select(cm.Migration.id).where(
                cm.Migration.uuid == migration_uuid).scalar_subquery()
            return s.scalar(sa.select(sa.func.count()).select_from(cm.Migration).where(
                cm.Migration.instance_uuid == instance_uuid, cm.Migration.id > this)) > 0

    def _settle(self, request):
        """Claim ``request`` and settle it (as its conductor dying in its first step
        would be recovered); False if another conductor began or settled it first."""
        ctxt, uuid, migration = request.ctxt, request.instance_uuid, request.migration
        moved_on = False  # the server is no longer as this request left it
        if request.what == "build":
            build_request = self._load_build_request(uuid, None, None)
            if build_request is None:
                return False  # deleted by its user meanwhile: nothing to settle
            spec = self._request_spec(uuid)
            ctxt = RequestContext(user_id=spec.get("user_id"), project_id=ctxt.project_id,
                                  roles=["admin"], is_admin=True)
            state = build_tasks.Build(self, ctxt, uuid, spec, build_request)
            kind = "build"
        elif request.what == "unshelve":  # (the latest unshelve of the server is the one)
            cell, _db, inst = self._instance(uuid)
            state = shelve_tasks.Unshelve(self, ctxt, cell, inst, self._request_spec(uuid))
            kind = "unshelve"
        elif request.what == "move":
            state = self._move(ctxt, uuid, migration["uuid"])
            kind = self._MOVE_KINDS[migration["migration_type"]]
            task_state = self._instance(uuid)[2].task_state
            moved_on = (task_state not in self._ACCEPTED_MOVES[migration["status"]]
                        or self._newer_migration(request.cell_db, uuid, migration["uuid"]))
        else:
            state = self._resized(ctxt, uuid, migration["uuid"])
            kind = request.what + ("-cross-cell" if migration["cross_cell_move"] else "")
        operation = operations.OPERATIONS[kind]
        # A server that moved on (its state reset by an admin, maybe a new request
        # accepted since) is left as it is: no step started, none is undone; only the
        # request's own records (migration, action) end.
        first = None if moved_on else operation.tasks(state)[0].name
        try:
            journal.Journal(self.api_db, self.owner, self.lease, kind, uuid, ctxt,
                            state).begin(request.key).claim(first)
        except journal.Taken:
            LOG.info("the %s of %s was begun or settled by another conductor", request.what,
                     uuid)
            return False
        verb = (self._ACTIONS[migration["migration_type"]] if request.what == "move"
                else {"build": "create"}.get(request.what, request.what))
        lost = RequestLost(request, "live-migrate" if verb == "live-migration" else verb)
        if operation.recovery == operations.FORWARD:
            LOG.warning("the %s of migration %s of %s, accepted at %s, was never begun by a "
                        "conductor (its message was lost): carrying it out", request.what,
                        migration["uuid"], uuid, request.accepted_at)
        else:
            LOG.warning("%s", lost.message)
        if operation.event is not None:  # the conductor's event of the action says why
            try:
                with records.action_event(request.cell_db, ctxt, uuid, operation.event):
                    raise lost
            except RequestLost:
                pass
        operations.recover(self, journal.load(self.api_db, request.key), exc=lost)
        return True

    # -- lookups and notifications -------------------------------------------------------

    def _instance(self, instance_uuid):
        """(cell mapping, cell database, what the conductor reads of the server)."""
        cell = cells_mod.instance_cell(self.api_db, instance_uuid)
        cell_db = cells_mod.cell_database(cell)
        with cell_db.read_session() as s:
            row = records.get_instance(s, instance_uuid)
        return cell, cell_db, _what_the_conductor_reads(row)

    def _load_build_request(self, instance_uuid, default_bdms, default_tags):
        """{"instance", "block_device_mappings", "tags"} of a build request, or None if gone."""
        with self.api_db.reader() as conn:
            br = conn.execute(_BUILD_REQUEST, {"b_uuid": instance_uuid}).first()
            if br is None:
                return None
            bdms = json.loads(br.block_device_mappings) if br.block_device_mappings else None
            tags = json.loads(br.tags) if br.tags else None
            return {"instance": json.loads(br.instance),
                    "block_device_mappings": bdms if bdms is not None else list(default_bdms or []),
                    "tags": tags if tags is not None else list(default_tags or [])}

    def _request_spec(self, instance_uuid):
        return request_specs.get(self.api_db, instance_uuid)

    def notify_instance(self, ctxt, cell_db, instance_uuid, event_type, host=None, fault=None):
        """``event_type`` (novella/rpc/notifications.py) about a server as ``cell_db``
        has it; ``host``: the publisher's host (the conductor's unless given)."""
        if self.notifier is None:
            return
        try:
            payload = notifier_mod.instance_payload_from_db(cell_db, ctxt, instance_uuid,
                                                            event_type, fault=fault)
        except Exception:  # noqa: BLE001 - a notification never breaks an operation
            LOG.exception("could not read %s for %s", instance_uuid, event_type)
            return
        self._notify(ctxt, event_type, payload, host=host)

    def _notify(self, ctxt, event_type, payload, host=None):
        if self.notifier is None:
            return
        try:
            self.notifier(ctxt, f"nova-conductor:{host or self.conf.host or 'conductor'}",
                          event_type, payload)
        except Exception:  # noqa: BLE001 - a notification never breaks an operation
            LOG.exception("could not send %s", event_type)
