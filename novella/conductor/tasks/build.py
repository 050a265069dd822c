"""Building one server on the host the scheduler chose (or an alternate).

The composition, in order, and what each step undoes:

    ClaimedAllocation     the scheduler's claim   | undo: free the allocation (recorded
                          (asked for before it,   |   started before the scheduler is asked)
                          for all servers of the
                          request at once)
    CreateInstanceInCell  rows in the cell db and | undo: delete the server there
                          the 'create' action
    MapInstanceToCell     in one transaction: the | undo: point the mapping back
                          build request deleted     where it was
                          (fails if the user deleted
                          the server meanwhile) and
                          the mapping pointed here
    AddToServerGroup      group membership        | undo: leave the group
    BuildOnHost           compute build, rescheduled to alternates on
                          RescheduledException; when none is left the server
                          is put in ERROR with a fault and no allocation. The
                          point of no return once a host took the server.

After a conductor's death a build goes back (every step that started undone,
then the server in cell0, ERROR, with a fault, as when no host is found)
unless a host had taken it, from where it is that host's
(novella/conductor/operations.py).
"""
import json
import logging
import uuid as uuid_mod

import sqlalchemy as sa

from novella import rpc
from novella.compute import exceptions as compute_exc
from novella.compute import states
from novella.conductor.tasks import common
from novella.conductor.tasks.base import Task
from novella.db import aggregates
from novella.db import api_models as am
from novella.db import cell_models as cm
from novella.db import cells as cells_mod
from novella.db import records
from novella.db.engine import insert_row, insert_rows
from novella.placement import allocations
from novella.scheduler import utils as scheduler_utils

LOG = logging.getLogger(__name__)

CONDUCTOR_EVENT = "conductor_schedule_and_build_instances"
_INSTANCE_COLUMNS = {c.key for c in cm.Instance.__table__.columns} - {"id", "deleted", "deleted_at"}
_BDM_COLUMNS = {c.key for c in cm.BlockDeviceMapping.__table__.columns} - {
    "id", "instance_uuid", "deleted", "deleted_at", "created_at", "updated_at"}


class BuildRequestNotFound(Exception):
    """The server was deleted by its user before it reached its cell."""


class MaxRetriesExceeded(Exception):
    code = 500

    def __init__(self, instance_uuid):
        self.message = ("Exceeded maximum number of retries. Exhausted all hosts available "
                        f"for retrying build failures for instance {instance_uuid}.")
        super().__init__(self.message)


class Build(common.Recorded):
    """What the build of one server knows, shared by its tasks (and journaled).

    Recorded before the scheduler is asked, so a fresh conductor knows of a
    server whose conductor died while it was scheduled; ``host_list`` is
    empty and ``cell`` None until then (``scheduled``).
    """

    SERVICES = ("conf", "api_db", "placement", "ctxt", "cell_db")
    CELLS = ("cell",)

    def __init__(self, services, ctxt, instance_uuid, request_spec, build_request,
                 requested_networks=None, launch_index=0):
        self.instance_uuid = instance_uuid
        self.request_spec = request_spec
        self.build_request = build_request  # {"instance": {...}, "block_device_mappings": [...], "tags": [...]}
        self.requested_networks = requested_networks
        self.launch_index = launch_index
        self.host_list, self.selection, self.cell = [], None, None
        self.failed_hosts = []
        self.action_id = None        # the 'create' action, once recorded in the cell
        self.previous_cell_id = None  # where the mapping pointed before this build's cell
        self.in_group = False         # this build made the server a member of its group
        self.attach(services, ctxt)

    def attach(self, services, ctxt):
        self.conf, self.api_db, self.placement, self.ctxt = (
            services.conf, services.api_db, services.placement, ctxt)
        self.cell_db = cells_mod.cell_database(self.cell) if self.cell is not None else None

    def scheduled(self, host_list):
        """The scheduler's answer: the first host claimed, the alternates kept."""
        self.host_list = host_list[:self.conf.scheduler.max_attempts]
        self.selection = self.host_list[0]
        self.cell = cells_mod.cell_by_uuid(self.api_db, self.selection["cell_uuid"])
        self.cell_db = cells_mod.cell_database(self.cell)

    @property
    def project_id(self):
        return self.request_spec.get("project_id") or self.ctxt.project_id

    @property
    def user_id(self):
        return self.request_spec.get("user_id") or self.ctxt.user_id


def build_tasks(build):
    """The steps of building one server (a Build), in order."""
    return [ClaimedAllocation(build), CreateInstanceInCell(build), MapInstanceToCell(build),
            AddToServerGroup(build), BuildOnHost(build)]


class BuildTask(Task):
    def __init__(self, build):
        self.build = build


class ClaimedAllocation(BuildTask):
    """The scheduler claimed the first selection; nothing to do but to own it."""

    def acts(self):
        # Before the scheduler is asked its claim is to come (recorded at once, with
        # the operation's row); once the scheduler answered, nothing is left to do.
        return not self.build.host_list

    def execute(self):
        pass

    def undo(self, exc):
        allocations.give_back(self.build.placement, self.build.instance_uuid)


class CreateInstanceInCell(BuildTask):
    def execute(self):
        build = self.build
        # The scheduler's answer carries the host's zone; a selection without
        # one (from an older scheduler) is looked up here.
        zone = build.selection.get("availability_zone") or aggregates.host_availability_zone(
            build.api_db, build.selection["service_host"], build.conf.default_availability_zone)
        build.action_id = create_instance(
            build.cell_db, build.ctxt, build.instance_uuid, build.build_request, build.request_spec,
            vm_state=states.BUILDING, task_state=states.task_states.SCHEDULING,
            launch_index=build.launch_index, availability_zone=zone, action="create")

    def undo(self, exc):
        soft_delete_instance(self.build.cell_db, self.build.instance_uuid)


class MapInstanceToCell(BuildTask):
    def execute(self):
        build = self.build
        with build.api_db.connection(write=True) as conn:
            if not _delete_build_request(conn, build.instance_uuid):
                raise BuildRequestNotFound(f"Build request for {build.instance_uuid} is gone")
            build.previous_cell_id = _map_instance(conn, build.instance_uuid, build.cell.id)

    def undo(self, exc):
        """The mapping points back and the build request is there again, unless the
        user deleted the server meanwhile (its mapping is gone then)."""
        build = self.build
        with build.api_db.connection(write=True) as conn:
            if _map_instance(conn, build.instance_uuid, build.previous_cell_id) is None:
                return
            if conn.execute(_HAS_BUILD_REQUEST, {"b_uuid": build.instance_uuid}).first():
                return  # this step never deleted it
            br = build.build_request
            insert_row(conn, am.BuildRequest, {
                "instance_uuid": build.instance_uuid, "project_id": build.project_id,
                "instance": json.dumps(br.get("instance") or {}),
                "block_device_mappings": json.dumps(br.get("block_device_mappings") or []),
                "tags": json.dumps(br.get("tags") or []), "created_at": records.utcnow()})


class AddToServerGroup(BuildTask):
    def acts(self):
        return bool((self.build.request_spec.get("instance_group") or {}).get("uuid"))

    def execute(self):
        group = self.build.request_spec.get("instance_group") or {}
        self.build.in_group = bool(group.get("uuid")) and add_group_member(
            self.build.api_db, group["uuid"], self.build.instance_uuid)

    def undo(self, exc):
        if self.build.in_group:
            remove_group_member(self.build.api_db,
                                self.build.request_spec["instance_group"]["uuid"],
                                self.build.instance_uuid)


class BuildOnHost(BuildTask):
    """Ask compute to build; on RescheduledException free the claim, claim the next alternate.

    The point of no return: once a host has taken the server (its task state
    is past ``scheduling``) the build is that host's to finish or fail.
    """

    no_return = True

    def settled(self):
        try:
            with self.build.cell_db.read_session() as s:
                inst = records.get_instance(s, self.build.instance_uuid)
        except records.InstanceNotFound:
            return True  # deleted by its user: the delete owns it
        return inst.task_state != states.task_states.SCHEDULING

    def execute(self):
        build = self.build
        try:
            try:
                self._build_with_alternates()
            except Exception as exc:
                # The conductor's part of a build is an event of the create action
                # only when it fails (the compute's part is the one a build shows).
                records.failed_event(build.cell_db, build.ctxt, build.instance_uuid,
                                     CONDUCTOR_EVENT, exc, finish_action=True,
                                     action_id=build.action_id)
                raise
            records.end_action(build.cell_db, build.action_id)
        except (compute_exc.BuildAbortException, records.InstanceNotFound):
            # Deleted by its user during the build: the delete owns the server now.
            allocations.give_back(build.placement, build.instance_uuid)
        except rpc.Timeout as exc:
            # The host did not answer: it may have made the guest. ERROR on that host,
            # which keeps its claim; the delete goes there and frees both.
            self._failed(exc)
        except (MaxRetriesExceeded, compute_exc.ComputeException, rpc.RemoteError) as exc:
            # The host list is spent or the build failed for good: ERROR, nothing held.
            allocations.give_back(build.placement, build.instance_uuid)
            self._failed(exc, host=None, node=None)

    def _failed(self, exc, **values):
        build = self.build
        try:
            records.update_instance(build.cell_db, build.instance_uuid, vm_state=states.ERROR,
                                    task_state=None, reload=False, **values)
        except records.InstanceNotFound:
            return  # deleted by its user meanwhile
        records.add_fault(build.cell_db, build.instance_uuid, exc)

    def _build_with_alternates(self):
        build = self.build
        for attempt, sel in enumerate(build.host_list):
            if attempt and not common.claim_alternate(build, sel):
                continue
            build.selection = sel
            try:  # compute sets the host and node, and clears them when it gives up
                common.compute_api(build.conf, build.cell).build_and_run_instance(
                    build.ctxt, sel["service_host"], instance_uuid=build.instance_uuid,
                    request_spec=build.request_spec, node=sel["nodename"],
                    allocations=sel["allocation_request"]["allocations"],
                    requested_networks=build.requested_networks,
                    block_device_mappings=build.build_request.get("block_device_mappings") or [],
                    injected_files=(build.build_request.get("instance") or {}).get(
                        "injected_files"),
                    port_profiles=scheduler_utils.selection_port_profiles(build.request_spec,
                                                                          sel))
                return
            except compute_exc.RescheduledException as exc:
                LOG.info("build of %s on %s rescheduled: %s", build.instance_uuid,
                         sel["service_host"], exc)
            build.failed_hosts.append(sel["service_host"])
            allocations.give_back(build.placement, build.instance_uuid)
        raise MaxRetriesExceeded(build.instance_uuid)


# --- rows -----------------------------------------------------------------------------

def create_instance(cell_db, ctxt, instance_uuid, build_request, request_spec, action=None,
                    **values):
    """The server's rows in a cell: instance, extra (flavor), metadata, tags, BDMs, info cache.

    ``action``: the instance action the request starts (e.g. 'create'), recorded with
    them; its id is returned.
    """
    fields = dict(build_request.get("instance") or {})
    flavor = fields.get("flavor") or request_spec.get("flavor") or {}
    row = {k: v for k, v in fields.items() if k in _INSTANCE_COLUMNS}
    row.update(uuid=instance_uuid,
               project_id=fields.get("project_id") or request_spec.get("project_id") or ctxt.project_id,
               user_id=fields.get("user_id") or request_spec.get("user_id") or ctxt.user_id,
               power_state=states.power_state.NOSTATE, host=None, node=None,
               memory_mb=flavor.get("memory_mb", 0), vcpus=flavor.get("vcpus", 0),
               root_gb=flavor.get("root_gb", 0), ephemeral_gb=flavor.get("ephemeral_gb", 0))
    if flavor.get("id") is not None:
        row.setdefault("instance_type_id", flavor["id"])
    for key in ("created_at", "updated_at", "launched_at", "terminated_at"):
        row.pop(key, None)  # JSON strings; the row keeps its own timestamps
    row.update(values)
    if row.get("availability_zone") is None and fields.get("availability_zone"):
        row["availability_zone"] = fields["availability_zone"]
    bdms = []
    for bdm in build_request.get("block_device_mappings") or []:
        cols = {k: v for k, v in bdm.items() if k in _BDM_COLUMNS}
        cols.setdefault("uuid", str(uuid_mod.uuid4()))
        if isinstance(cols.get("connection_info"), dict):
            cols["connection_info"] = json.dumps(cols["connection_info"])
        bdms.append(dict(cols, instance_uuid=instance_uuid))
    metadata = [{"instance_uuid": instance_uuid, "key": k, "value": v}
                for k, v in (fields.get("metadata") or {}).items()]
    tags = [{"resource_id": instance_uuid, "tag": t}
            for t in sorted(set(build_request.get("tags") or []))]
    # Plain INSERTs: nothing here needs the ORM's unit of work.
    with cell_db.connection(write=True) as conn:
        insert_row(conn, cm.Instance, row)
        insert_row(conn, cm.InstanceExtra, {
            "instance_uuid": instance_uuid,
            "flavor": json.dumps({"cur": flavor, "old": None, "new": None})})
        insert_row(conn, cm.InstanceInfoCache, {"instance_uuid": instance_uuid,
                                                "network_info": "[]"})
        insert_rows(conn, cm.InstanceMetadata, metadata)
        insert_rows(conn, cm.Tag, tags)
        for bdm in bdms:  # each its own columns
            insert_row(conn, cm.BlockDeviceMapping, bdm)
        if action:
            return records.add_action(conn, ctxt, instance_uuid, action)
    return None


def soft_delete_instance(cell_db, instance_uuid):
    """Mark the server deleted, as a user's delete would."""
    with cell_db.session(write=True) as s:
        inst = s.scalars(sa.select(cm.Instance).where(cm.Instance.uuid == instance_uuid,
                                                      cm.Instance.deleted == 0)).first()
        if inst is None:
            return
        now = records.utcnow()
        inst.deleted, inst.deleted_at = inst.id, now
        inst.vm_state, inst.task_state, inst.terminated_at = states.DELETED, None, now
        s.execute(sa.update(cm.BlockDeviceMapping)
                  .where(cm.BlockDeviceMapping.instance_uuid == instance_uuid,
                         cm.BlockDeviceMapping.deleted == 0)
                  .values(deleted=cm.BlockDeviceMapping.id, deleted_at=now))


def map_instance(api_db, instance_uuid, cell_id):
    """Point the instance mapping at a cell; return the cell id it had."""
    with api_db.connection(write=True) as conn:
        return _map_instance(conn, instance_uuid, cell_id)


_MAPPED_CELL = sa.select(am.InstanceMapping.cell_id).where(
    am.InstanceMapping.instance_uuid == sa.bindparam("b_uuid"))
_MAP_TO_CELL = sa.update(am.InstanceMapping).where(
    am.InstanceMapping.instance_uuid == sa.bindparam("b_uuid")).values(
    cell_id=sa.bindparam("b_cell_id"))


_MAP_UNMAPPED = sa.update(am.InstanceMapping).where(
    am.InstanceMapping.instance_uuid == sa.bindparam("b_uuid"),
    am.InstanceMapping.cell_id.is_(None)).values(cell_id=sa.bindparam("b_cell_id"))


def _map_instance(s, instance_uuid, cell_id):
    params = {"b_uuid": instance_uuid, "b_cell_id": cell_id}
    if cell_id is not None and s.execute(_MAP_UNMAPPED, params).rowcount:
        return None  # it had no cell (a server mapped for the first time): one statement
    previous = s.execute(_MAPPED_CELL, params).first()
    if previous is None:
        return None
    s.execute(_MAP_TO_CELL, params)
    return previous.cell_id


def delete_build_request(api_db, instance_uuid):
    """Delete the build request; False if it was already gone."""
    with api_db.connection(write=True) as conn:
        return _delete_build_request(conn, instance_uuid)


_HAS_BUILD_REQUEST = sa.select(am.BuildRequest.id).where(
    am.BuildRequest.instance_uuid == sa.bindparam("b_uuid"))
_DELETE_BUILD_REQUEST = sa.delete(am.BuildRequest).where(
    am.BuildRequest.instance_uuid == sa.bindparam("b_uuid"))


def _delete_build_request(s, instance_uuid):
    return s.execute(_DELETE_BUILD_REQUEST, {"b_uuid": instance_uuid}).rowcount > 0


def add_group_member(api_db, group_uuid, instance_uuid):
    with api_db.session(write=True) as s:
        group = s.scalars(sa.select(am.InstanceGroup).where(am.InstanceGroup.uuid == group_uuid)).first()
        if group is None or any(m.instance_uuid == instance_uuid for m in group.members):
            return False
        group.members.append(am.InstanceGroupMember(instance_uuid=instance_uuid))
        return True


def remove_group_member(api_db, group_uuid, instance_uuid):
    with api_db.session(write=True) as s:
        group = s.scalars(sa.select(am.InstanceGroup).where(am.InstanceGroup.uuid == group_uuid)).first()
        if group is not None:
            group.members = [m for m in group.members if m.instance_uuid != instance_uuid]
