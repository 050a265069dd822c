"""Server actions: the registry ``POST /servers/{id}/action`` dispatches by, and
what the handlers that change a server share (the policy target, the state and
lock checks, starting a task, the server's compute client, deleting a server).

An action is registered with ``@action("name", schema)``; a handler module adding
actions only needs to be imported by the application (``wsgi.HANDLER_MODULES``)::

    @actions.action("resize", schemas.resize)
    def resize(req, rec, body): ...   # rec: the server record, body: validated
        return 202, None
"""
import logging

from novella import rpc
from novella.api.compute import common, errors, instances, rpcclients, validation
from novella.compute import rpcapi, states
from novella.compute.states import migration_status as ms
from novella.conductor.rpcapi import ConductorAPI
from novella.db import build_requests as build_requests_db, cells as cells_mod
from novella.db import migration_records, records, servers as servers_db
from novella.network import ownership

LOG = logging.getLogger(__name__)

ACTIONS = {}


def action(name, schema=None, min_version=None, view=True):
    """``view=False``: the handler reads none of the server's metadata, tags, fault
    and volumes, which are then not loaded (``instances.load``)."""
    def register(fn):
        ACTIONS[name] = (fn, schema, min_version, view)
        return fn
    return register


# The actions /os-volumes_boot/{id}/action knows: the servers' own, none of the others.
VOLUMES_BOOT_ACTIONS = frozenset(("confirmResize", "revertResize", "reboot", "resize",
                                  "rebuild", "createImage", "os-start", "os-stop",
                                  "trigger_crash_dump"))


def dispatch_volumes_boot(req, server_id):
    return dispatch(req, server_id, known=VOLUMES_BOOT_ACTIONS)


def dispatch(req, server_id, known=None):
    body = req.body_json()
    if not isinstance(body, dict) or len(body) != 1:
        raise errors.BadRequest("Malformed request body")
    name = next(iter(body))
    entry = ACTIONS.get(name) if known is None or name in known else None
    if entry is None or (entry[2] and not req.at_least(entry[2])):
        raise errors.BadRequest(f"There is no such action: {name}")
    fn, schema, _min, view = entry
    if schema is not None:
        validation.validate(schema, body, req.version)
    rec = instances.get(req, server_id, view=view)
    return fn(req, rec, body)


# --- what an action checks and records before it asks a host ----------------------------
def target(rec):
    return {"project_id": rec["project_id"], "user_id": rec["user_id"]}


def check_state(rec, name, vm_states=None, task_states=(None,)):
    """409 unless the server is in one of the allowed vm and task states."""
    if vm_states is not None and rec["vm_state"] not in vm_states:
        raise errors.invalid_state(name, rec["uuid"], "vm_state", rec["vm_state"])
    if task_states is not None and rec["task_state"] not in task_states:
        raise errors.invalid_state(name, rec["uuid"], "task_state", rec["task_state"])


def compute_client(rec):
    """The compute RPC client of the server's cell."""
    return rpcapi.ComputeAPI(rpc.get_transport(rec["cell"].transport_url))


def check_unlocked(req, rec):
    if rec.get("locked") and not req.is_admin():
        raise errors.Conflict(f"Instance {rec['uuid']} is locked")


def start_task(req, rec, action_name, task_state, expected_task_state=None, on_a_host=True,
               **values):
    """Set the task state (guarded) and ``values``, record the instance action; the
    cell's db.

    ``on_a_host``: the server must be on a host (all but an offloaded one's unshelve).
    """
    if rec["cell"] is None:
        raise errors.invalid_state(action_name, rec["uuid"], "vm_state", states.BUILDING)
    if on_a_host and not rec.get("host"):
        raise errors.Conflict(f"Instance {rec['uuid']} is not ready")
    cell_db = cells_mod.cell_database(rec["cell"])
    try:
        records.update_instance(cell_db, rec["uuid"], expected_task_state=expected_task_state,
                                task_state=task_state, reload=False, **values)
    except records.UnexpectedTaskStateError:
        latest = instances.load(req.api.api_db, rec["uuid"]) or rec
        raise errors.invalid_state(action_name, rec["uuid"], "task_state", latest["task_state"])
    except records.InstanceNotFound:
        raise errors.instance_not_found(rec["uuid"])
    records.start_action(cell_db, req.context, rec["uuid"], action_name)
    return cell_db


# --- delete ---------------------------------------------------------------------------
def delete_instance(api, ctxt, rec):
    """Delete a server that is in a cell: on its host, or here when it has none."""
    cell = rec["cell"]
    cell_db = cells_mod.cell_database(cell)
    uuid = rec["uuid"]
    if rec.get("task_state") == states.task_states.DELETING:
        return
    records.start_action(cell_db, ctxt, uuid, "delete")
    migration_records.end_unstarted(cell_db, uuid)
    if rec.get("vm_state") == states.RESIZED:  # confirm first: both hosts are freed
        _confirm_before_delete(api, ctxt, rec)
    build_requests_db.queue_for_delete(api.api_db, uuid)
    if cell.uuid == cells_mod.CELL0_UUID or not rec.get("host") or \
            common.host_down(api, cell, rec["host"]):
        if cell.uuid != cells_mod.CELL0_UUID:
            _release_without_host(api, cell_db, uuid)
        servers_db.delete_here(cell_db, uuid)
        return
    try:
        records.update_instance(cell_db, uuid, task_state=states.task_states.DELETING)
    except records.InstanceNotFound:
        raise errors.instance_not_found(uuid)
    rpcclients.cast_to_compute(ctxt, cell, rec["host"], "terminate_instance", instance_uuid=uuid)


def _confirm_before_delete(api, ctxt, rec):
    """A server deleted in VERIFY_RESIZE: confirm first (and wait), so both sides are freed.

    The delete goes on even if the confirmation fails; the error is logged.
    """
    cell_db = cells_mod.cell_database(rec["cell"])
    migration = migration_records.unconfirmed(cell_db, rec["uuid"])
    if migration is None or migration_records.update(
            cell_db, migration["uuid"], expected_status=ms.FINISHED,
            status=ms.CONFIRMING) is None:
        return
    try:
        ConductorAPI(api.transport).confirm_resize(ctxt, rec["uuid"], migration["uuid"],
                                                   do_cast=False)
    except Exception:  # noqa: BLE001 - the user asked for a delete: carry on with it
        LOG.exception("confirming %s before its delete failed", rec["uuid"])


def _release_without_host(api, cell_db, uuid):
    """What a server no host will clean up after (shelved-offloaded, or on a host
    that is down) still holds: its allocation, its ports, its volumes' attachments
    (and the volumes to delete with it), its shelved image. (A down host destroys
    the guest it kept when its compute service starts again.)"""
    from novella.context import get_admin_context
    ctxt = get_admin_context()
    if api.placement is not None:
        api.placement.delete_allocations(uuid)
    if api.network_api is not None:  # the user's ports kept (novella/network/ownership.py)
        keep = ownership.user_ports(servers_db.network_info(cell_db, uuid),
                                    records.system_metadata(cell_db, uuid))
        api.network_api.deallocate_for_instance(ctxt, uuid, keep)
    if api.volume_api is not None:
        for bdm in servers_db.volume_mappings(cell_db, uuid):
            if bdm.attachment_id:
                api.volume_api.attachment_delete(ctxt, bdm.attachment_id)
            if bdm.delete_on_termination and bdm.volume_id:
                api.volume_api.delete(ctxt, bdm.volume_id)
    image_id = records.system_metadata(cell_db, uuid).get("shelved_image_id")
    if image_id and api.image_api is not None:
        api.image_api.delete(ctxt, image_id)
        records.set_system_metadata(cell_db, uuid, shelved_image_id=None)
