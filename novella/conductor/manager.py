"""The super-conductor (topic ``conductor``): schedules and builds across cells.

It reaches the scheduler over the top-level transport, each cell's compute
hosts over that cell's transport (from the cell mapping) and writes the API
database and every cell database. Each operation is a list of tasks
(novella/conductor/tasks) whose failures roll back in reverse order.
"""
import json
import logging

import sqlalchemy as sa

from novella import rpc
from novella.compute import states
from novella.conductor.cross_cell import ConductorCrossCell
from novella.conductor.moves import ConductorMoves
from novella.conductor.shelve import ConductorShelve
from novella.conductor.tasks import build as build_tasks
from novella.conductor.tasks.base import TaskList
from novella.db import api_models as am
from novella.db import cells as cells_mod
from novella.db import records
from novella.rpc import notifier as notifier_mod
from novella.scheduler.rpcapi import SchedulerAPI

LOG = logging.getLogger(__name__)


def _uuid_of(build_request):
    return build_request if isinstance(build_request, str) else build_request["instance_uuid"]


_BUILD_REQUEST = sa.select(
    am.BuildRequest.instance, am.BuildRequest.block_device_mappings, am.BuildRequest.tags
).where(am.BuildRequest.instance_uuid == sa.bindparam("b_uuid"))


class ConductorManager(ConductorMoves, ConductorCrossCell, ConductorShelve):
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

    # -- builds ----------------------------------------------------------------------
    def schedule_and_build_instances(self, ctxt, build_requests, request_specs=None,
                                     requested_networks=None, block_device_mappings=None,
                                     tags=None):
        uuids = [_uuid_of(br) for br in build_requests]
        specs = list(request_specs or [None] * len(uuids))
        pending = []  # (uuid, spec, build request) of servers not deleted meanwhile
        for uuid, spec in zip(uuids, specs):
            br = self._load_build_request(uuid, block_device_mappings, tags)
            if br is None:
                LOG.info("server %s was deleted before scheduling", uuid)
                continue
            pending.append((uuid, spec or self._load_request_spec(uuid), br))
        if not pending:
            return
        spec = dict(pending[0][1], num_instances=len(pending))
        try:
            host_lists = self.scheduler.select_destinations(
                ctxt, spec, [uuid for uuid, _, _ in pending], return_alternates=True)
        except Exception as exc:  # noqa: BLE001 - NoValidHost or an unreachable scheduler
            LOG.info("scheduling %s failed: %s", [u for u, _, _ in pending], exc)
            for uuid, spec_i, br in pending:
                self._bury_in_cell0(ctxt, uuid, spec_i, br, exc)
            return
        for index, ((uuid, spec_i, br), host_list) in enumerate(zip(pending, host_lists)):
            b = build_tasks.Build(self.conf, self.api_db, self.placement, ctxt, uuid, spec_i,
                                  host_list, br, requested_networks, launch_index=index)
            try:
                TaskList(f"build {uuid}", build_tasks.build_tasks(b)).run()
            except build_tasks.BuildRequestNotFound:
                LOG.info("server %s was deleted while it was scheduled", uuid)
            except Exception as exc:  # noqa: BLE001 - rolled back; the server must still show why
                LOG.exception("build of %s failed", uuid)
                self._bury_in_cell0(ctxt, uuid, spec_i, br, exc)

    def _bury_in_cell0(self, ctxt, instance_uuid, spec, build_request, exc):
        """A server that got no host: in cell0, ERROR, with a fault, mapped there."""
        cell0 = self._cell0()
        cell0_db = cells_mod.cell_database(cell0)
        build_tasks.create_instance(cell0_db, ctxt, instance_uuid, build_request, spec,
                                    action="create", vm_state=states.ERROR, task_state=None)
        try:
            with records.action_event(cell0_db, ctxt, instance_uuid, build_tasks.CONDUCTOR_EVENT):
                raise exc
        except Exception:  # noqa: BLE001 - recorded as the event's error
            pass
        records.finish_action(cell0_db, ctxt, instance_uuid)
        records.add_fault(cell0_db, instance_uuid, exc)
        build_tasks.map_instance(self.api_db, instance_uuid, cell0.id)
        if not build_tasks.delete_build_request(self.api_db, instance_uuid):
            # Deleted by its user meanwhile: it is gone from cell0 too.
            build_tasks.soft_delete_instance(cell0_db, instance_uuid)
        self._notify_build_error(ctxt, instance_uuid, spec, exc)

    def _notify_build_error(self, ctxt, instance_uuid, spec, exc):
        if self.notifier is None:
            return
        payload = notifier_mod.versioned("ComputeTaskPayload", {
            "instance_uuid": instance_uuid, "reason": notifier_mod.exception_payload(exc),
            "request_spec": spec, "state": states.ERROR})
        try:
            self.notifier(ctxt, f"nova-conductor:{self.conf.host or 'conductor'}",
                          "compute_task.build_instances.error", payload)
        except Exception:  # noqa: BLE001 - a notification never breaks an operation
            LOG.exception("could not send compute_task.build_instances.error")

    # -- lookups -------------------------------------------------------------------------
    def _cell0(self):
        return cells_mod.cell_by_uuid(self.api_db, cells_mod.CELL0_UUID)

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

    def _load_request_spec(self, instance_uuid):
        with self.api_db.session() as s:
            row = s.scalars(sa.select(am.RequestSpec).where(
                am.RequestSpec.instance_uuid == instance_uuid)).one()
            return json.loads(row.spec)
