"""The super-conductor (topic ``conductor``): its RPC entry points.

Each entry point loads the state of the operation it begins, looks up the
operation's declaration (novella/conductor/operations.py: its task list,
its conductor event, how it ends) and runs it; the task list undoes a
failure. The API has already written the migration row (pre-migrating),
set the task state and started the instance action; the conductor finishes
the action. Periodically it recovers the operations of conductors that died
(operations.recover) and settles the requests no conductor began
(novella/conductor/lost_requests.py).

It reaches the scheduler over the top-level transport, each cell's compute
hosts over that cell's transport (from the cell mapping) and writes the API
database and every cell database.
"""
import datetime
import logging

import sqlalchemy as sa

from novella import rpc, service
from novella.compute.states import migration_status as ms
from novella.conductor import ends, journal, lost_requests, operations
from novella.conductor.tasks import build as build_tasks
from novella.conductor.tasks import common as task_common
from novella.conductor.tasks import cross_cell as cross_cell_tasks
from novella.context import get_admin_context
from novella.db import cell_models as cm
from novella.db import cells as cells_mod
from novella.db import migration_records
from novella.db import records
from novella.db import request_specs
from novella.rpc import notifier as notifier_mod
from novella.scheduler.rpcapi import SchedulerAPI

LOG = logging.getLogger(__name__)


def _uuid_of(build_request):
    return build_request if isinstance(build_request, str) else build_request["instance_uuid"]


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

    # -- builds ----------------------------------------------------------------------
    def schedule_and_build_instances(self, ctxt, build_requests, request_specs=None,
                                     requested_networks=None, block_device_mappings=None,
                                     tags=None):
        """The scheduler claims for every server of the request at once; then each
        server's build runs on (operations.BUILD)."""
        operation = operations.named(operations.BUILD)
        uuids = [_uuid_of(br) for br in build_requests]
        specs = list(request_specs or [None] * len(uuids))
        builds = []  # one journaled task list per server not deleted meanwhile
        for uuid, spec in zip(uuids, specs):
            br = operations.load_build_request(self.api_db, uuid, block_device_mappings, tags)
            if br is None:
                LOG.info("server %s was deleted before scheduling", uuid)
                continue
            build = build_tasks.Build(self, ctxt, uuid, spec or self._request_spec(uuid), br,
                                      requested_networks, launch_index=len(builds))
            tasks = operations.begin(self, ctxt, operation, build, uuid)
            if tasks is not None:  # else settled as lost already: buried in cell0
                builds.append((build, tasks))
        if not builds:
            return
        for _build, tasks in builds:
            tasks.started(0)  # the scheduler claims for every server of the request at once
        first = builds[0][0]
        spec = dict(first.request_spec, num_instances=len(builds))
        try:
            host_lists = self.scheduler.select_destinations(
                ctxt, spec, [build.instance_uuid for build, _tasks in builds],
                return_alternates=True)
        except Exception as exc:  # noqa: BLE001 - NoValidHost or an unreachable scheduler
            LOG.info("scheduling %s failed: %s", uuids, exc)
            for build, tasks in builds:  # its claim (if any) freed, then buried in cell0
                tasks.undo([(0, tasks.tasks[0])], exc)
                ends.build_failed(self, ctxt, build, exc)
            return
        for (build, tasks), host_list in zip(builds, host_lists):
            build.scheduled(host_list)
            operation.end(self, ctxt, operation, build, tasks.run)

    # -- moves -------------------------------------------------------------------------

    def migrate_server(self, ctxt, instance_uuid, migration_uuid, flavor=None, host=None,
                       clean_shutdown=True, allow_cross_cell=False):
        """Resize (``flavor`` given) or cold migrate (optionally to ``host``).

        ``allow_cross_cell``: the API found the cross-cell policy passing; the
        move may then leave the cell when every compute service can.
        """
        move = operations.load_move(self, ctxt, instance_uuid, migration_uuid, host=host,
                                    flavor=flavor, clean_shutdown=clean_shutdown)
        kind = (operations.CROSS_CELL_RESIZE if allow_cross_cell
                and cross_cell_tasks.cross_cell_move_allowed(self.api_db)
                else operations.RESIZE)
        return self._run_move(ctxt, move, kind)

    def live_migrate_instance(self, ctxt, instance_uuid, migration_uuid, host=None):
        """Live-migrate a running server inside its cell (tasks/live_migrate.py)."""
        move = operations.load_move(self, ctxt, instance_uuid, migration_uuid, host=host)
        return self._run_move(ctxt, move, operations.LIVE_MIGRATION)

    def evacuate_instance(self, ctxt, instance_uuid, migration_uuid, host=None):
        """Rebuild elsewhere in its cell a server whose host is down (tasks/evacuate.py)."""
        move = operations.load_move(self, ctxt, instance_uuid, migration_uuid, host=host)
        return self._run_move(ctxt, move, operations.EVACUATION)

    def _run_move(self, ctxt, move, kind):
        """A failure is undone and recorded (the fault and the migration say why),
        not raised; returns what the steps did."""
        tasks = operations.run(self, ctxt, operations.named(kind), move, move.migration_uuid)
        if tasks is None:
            return {"completed": [], "failed_task": None, "undone": [], "cross_cell": False}
        return {"completed": tasks.completed, "failed_task": tasks.failed_task,
                "undone": tasks.undone, "cross_cell": move.target_cell is not None}

    # -- confirm and revert ---------------------------------------------------------------

    def confirm_resize(self, ctxt, instance_uuid, migration_uuid):
        self._run_resized(ctxt, instance_uuid, migration_uuid, operations.CONFIRM,
                          operations.CROSS_CELL_CONFIRM)

    def revert_resize(self, ctxt, instance_uuid, migration_uuid):
        self._run_resized(ctxt, instance_uuid, migration_uuid, operations.REVERT,
                          operations.CROSS_CELL_REVERT)

    def _run_resized(self, ctxt, instance_uuid, migration_uuid, kind, cross_cell_kind):
        """On failure the migration in error and a fault, then raised."""
        resized = operations.load_resized(self, ctxt, instance_uuid, migration_uuid)
        if resized.migration.get("cross_cell_move"):
            kind = cross_cell_kind
        operations.run(self, ctxt, operations.named(kind), resized, migration_uuid)

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
                    records.start_action(db, actx, instance_uuid, operations.named(
                        operations.CROSS_CELL_CONFIRM).action())
                    self.confirm_resize(actx, instance_uuid, migration_uuid)
                    confirmed.append(migration_uuid)
                except Exception:  # noqa: BLE001 - one stuck move must not block the others
                    LOG.exception("automatic confirmation of migration %s failed",
                                  migration_uuid)
        return confirmed

    # -- shelve --------------------------------------------------------------------------

    def unshelve_instance(self, ctxt, instance_uuid, host=None):
        """``host``: the host asked for (2.91); the zone asked for is in the request spec."""
        unshelve = operations.load_unshelve(self, ctxt, instance_uuid, host=host)
        operations.run(self, ctxt, operations.named(operations.UNSHELVE), unshelve,
                       instance_uuid, str(ctxt.request_id))

    # -- image cache ---------------------------------------------------------------------

    def cache_images(self, ctxt, aggregate_id, hosts, image_ids):
        """An aggregate's image cache request (Compute API 2.81): each host asked in
        turn, over its cell's transport. Nothing changes state, so nothing is
        recorded: a request lost with its conductor is asked again."""
        for host in hosts:
            cell = cells_mod.host_cell(self.api_db, host)
            if cell is None:
                LOG.warning("image cache of aggregate %s: host %s is in no cell",
                            aggregate_id, host)
                continue
            try:
                results = task_common.compute_api(self.conf, cell).cache_images(ctxt, host, image_ids)
            except Exception as exc:  # noqa: BLE001 - a host down is skipped, as the reference
                LOG.warning("image cache of aggregate %s: host %s failed: %s",
                            aggregate_id, host, exc)
                continue
            LOG.info("image cache of aggregate %s on %s: %s", aggregate_id, host, results)

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

    def settle_lost_requests(self, everything=False):
        """The requests the API accepted that no conductor began (lost_requests.settle)."""
        return lost_requests.settle(self, everything=everything)

    # -- lookups and notifications -------------------------------------------------------

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
