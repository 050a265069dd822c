"""Server actions on the guest: pause, unpause, suspend, resume, rescue, unrescue,
trigger_crash_dump, changePassword, os-getConsoleOutput; lock and unlock; soft
delete (``[DEFAULT] reclaim_instance_interval``) with restore and forceDelete.

Each checks policy, the lock, the server's states as the reference does,
sets the task state and records the instance action before it casts to the
server's host (novella/compute/guest_actions.py); changePassword and
os-getConsoleOutput wait for the host's answer. lock and unlock change only
the server's row.
"""
import logging

from novella import rpc
from novella.api.compute import actions, common, errors, hosts
from novella.api.compute import validation as v
from novella.compute import guest_actions
from novella.compute import states
from novella.compute.states import task_states
from novella.db import build_requests as build_requests_db
from novella.db import cells as cells_mod
from novella.db import records
from novella.db import request_specs
from novella.rpc import notifications

LOG = logging.getLogger(__name__)

_ANY = {}   # the value of an argument-less action: null, {} or anything, as the reference


def _schema(name, value=_ANY):
    return v.obj({name: value}, [name])


def _on_host(req, rec, name, rule, vm_states, task, method, check_lock=True, **kwargs):
    """The usual shape: policy, lock, states, task state and action, cast."""
    req.authorize(rule, actions.target(rec))
    if check_lock:
        actions.check_unlocked(req, rec)
    actions.check_state(rec, name, vm_states=vm_states)
    actions.start_task(req, rec, name, task, expected_task_state=(None,))
    getattr(actions.compute_client(rec), method)(req.context, rec["host"], rec["uuid"], **kwargs)
    return 202, None


# --- pause, suspend ----------------------------------------------------------------------
@actions.action("pause", _schema("pause"))
def pause(req, rec, body):
    return _on_host(req, rec, "pause", "os_compute_api:os-pause-server:pause",
                    (states.ACTIVE,), task_states.PAUSING, "pause_instance")


@actions.action("unpause", _schema("unpause"))
def unpause(req, rec, body):
    return _on_host(req, rec, "unpause", "os_compute_api:os-pause-server:unpause",
                    (states.PAUSED,), task_states.UNPAUSING, "unpause_instance")


@actions.action("suspend", _schema("suspend"))
def suspend(req, rec, body):
    return _on_host(req, rec, "suspend", "os_compute_api:os-suspend-server:suspend",
                    (states.ACTIVE,), task_states.SUSPENDING, "suspend_instance")


@actions.action("resume", _schema("resume"))
def resume(req, rec, body):
    return _on_host(req, rec, "resume", "os_compute_api:os-suspend-server:resume",
                    (states.SUSPENDED,), task_states.RESUMING, "resume_instance")


# --- rescue ----------------------------------------------------------------------------
_rescue_schema = _schema("rescue", {"type": ["object", "null"], "properties": {
    "adminPass": {"type": "string"}, "rescue_image_ref": v.uuid},
    "additionalProperties": False})


@actions.action("rescue", _rescue_schema)
def rescue(req, rec, body):
    args = body["rescue"] or {}
    password = args.get("adminPass") or common.generate_password()
    req.authorize("os_compute_api:os-rescue", actions.target(rec))
    actions.check_unlocked(req, rec)
    actions.check_state(rec, "rescue", vm_states=(states.ACTIVE, states.STOPPED, states.ERROR))
    image_ref = args.get("rescue_image_ref")
    props = _rescue_image_properties(req, rec, image_ref)
    stable = {k: props[k] for k in guest_actions.STABLE_RESCUE if props.get(k)}
    if any(value not in guest_actions.RESCUE_VALUES[key] for key, value in stable.items()):
        raise errors.BadRequest(f"Requested rescue image '{image_ref or rec.get('image_ref')}' "
                                "is not supported")
    if not rec.get("image_ref"):  # volume-backed: stable device rescue only, from 2.87
        if not (req.at_least("2.87") and len(stable) == len(guest_actions.STABLE_RESCUE)):
            raise errors.BadRequest(f"Instance {rec['uuid']} cannot be rescued: Cannot "
                                    "rescue a volume-backed instance")
        if RESCUE_BFV_TRAIT not in _host_traits(req, rec):
            raise errors.BadRequest(f"Instance {rec['uuid']} cannot be rescued: Host unable "
                                    "to rescue a volume-backed instance")
    cell_db = cells_mod.cell_database(rec["cell"]) if rec["cell"] is not None else None
    if cell_db is not None:  # noted first: a host that dies rescuing finishes with it
        records.set_system_metadata(cell_db, rec["uuid"], **{
            guest_actions.RESCUE_IMAGE: image_ref, guest_actions.OLD_VM_STATE: rec["vm_state"],
            **{key: stable.get(key) for key in guest_actions.STABLE_RESCUE}})
    actions.start_task(req, rec, "rescue", task_states.RESCUING, expected_task_state=(None,))
    actions.compute_client(rec).rescue_instance(req.context, rec["host"], rec["uuid"],
                                   rescue_password=password)
    if req.api.conf.api.enable_instance_password:
        return 200, {"adminPass": password}
    return 200, None


RESCUE_BFV_TRAIT = "COMPUTE_RESCUE_BFV"


def _rescue_image_properties(req, rec, image_ref):
    """The rescue image's properties (the server's own image's without one); 400 for an
    image the caller cannot see or a volume snapshot image."""
    if not image_ref:
        try:
            spec = request_specs.get(req.api.api_db, rec["uuid"])
        except Exception:  # noqa: BLE001 - a server without a request spec
            return {}
        return (spec.get("image") or {}).get("properties") or {}
    try:
        if req.api.image_api is None:
            raise LookupError("no image service")
        image = req.api.image_api.get(req.context, image_ref)
    except Exception:  # noqa: BLE001 - not found, or not visible to the caller
        raise errors.BadRequest(f"Requested rescue image '{image_ref}' is not supported")
    props = image.get("properties") or {}
    if props.get("img_block_device_mapping") or image.get("img_block_device_mapping"):
        raise errors.BadRequest(f"Requested rescue image '{image_ref}' is not supported")
    return {k: image[k] for k in guest_actions.STABLE_RESCUE if image.get(k)} | props


def _host_traits(req, rec):
    """The traits of the compute node the server is on (none known without placement)."""
    if req.api.placement is None or not rec.get("host"):
        return set()
    where = {"host": rec["host"]}
    if rec.get("node"):
        where["hypervisor_hostname"] = rec["node"]
    nodes = hosts.compute_nodes(req.api, **where)
    if not nodes:
        return set()
    _cell, node = nodes[0]
    return set(req.api.placement.get_traits(node.uuid)[1])


@actions.action("unrescue", _schema("unrescue"))
def unrescue(req, rec, body):
    return _on_host(req, rec, "unrescue", "os_compute_api:os-unrescue", (states.RESCUED,),
                    task_states.UNRESCUING, "unrescue_instance")


# --- crash dump, password, console ---------------------------------------------------------
@actions.action("trigger_crash_dump", _schema("trigger_crash_dump", {"type": "null"}),
                min_version="2.17")
def trigger_crash_dump(req, rec, body):
    req.authorize("os_compute_api:servers:trigger_crash_dump", actions.target(rec))
    actions.check_unlocked(req, rec)
    if rec["cell"] is None or not rec.get("host"):
        raise errors.Conflict(f"Instance {rec['uuid']} is not ready")
    actions.check_state(rec, "trigger_crash_dump", vm_states=(
        states.ACTIVE, states.PAUSED, states.RESCUED, states.RESIZED, states.ERROR))
    records.start_action(cells_mod.cell_database(rec["cell"]), req.context, rec["uuid"],
                         "trigger_crash_dump")
    actions.compute_client(rec).trigger_crash_dump(req.context, rec["host"], rec["uuid"])
    return 202, None


_password_schema = _schema("changePassword", v.obj({"adminPass": {"type": "string"}},
                                                   ["adminPass"]))


@actions.action("changePassword", _password_schema)
def change_password(req, rec, body):
    req.authorize("os_compute_api:os-admin-password", actions.target(rec))
    actions.check_unlocked(req, rec)
    actions.check_state(rec, "changePassword", vm_states=(states.ACTIVE,))
    actions.start_task(req, rec, "changePassword", task_states.UPDATING_PASSWORD,
                       expected_task_state=(None,))
    try:
        actions.compute_client(rec).set_admin_password(req.context, rec["host"], rec["uuid"],
                                          body["changePassword"]["adminPass"])
    except rpc.RemoteError as exc:
        if exc.exc_type == "NotImplementedError":
            raise errors.APIError("Unable to set password on instance", code=501)
        raise errors.Conflict(f"Failed to set admin password on {rec['uuid']} because "
                              "error setting admin password")
    except rpc.Timeout:
        raise errors.Conflict(f"Failed to set admin password on {rec['uuid']} because "
                              "its host did not answer")
    return 202, None


_console_schema = _schema("os-getConsoleOutput", v.obj({"length": {
    "type": ["integer", "string", "null"], "pattern": "^-?[0-9]+$", "minimum": -1}}))


@actions.action("os-getConsoleOutput", _console_schema)
def console_output(req, rec, body):
    req.authorize("os_compute_api:os-console-output", actions.target(rec))
    length = body["os-getConsoleOutput"].get("length")
    length = None if length is None or int(length) == -1 else int(length)
    if rec["cell"] is None or not rec.get("host"):
        raise errors.Conflict(f"Instance {rec['uuid']} is not ready")
    if rec.get("task_state") in (task_states.DELETING, task_states.MIGRATING):
        raise errors.invalid_state("get_console_output", rec["uuid"], "task_state",
                                   rec["task_state"])
    try:
        output = actions.compute_client(rec).get_console_output(req.context, rec["host"], rec["uuid"],
                                                   tail_length=length)
    except rpc.RemoteError as exc:
        if exc.exc_type == "NotImplementedError":
            raise errors.APIError("Unable to get console log, functionality not implemented",
                                  code=501)
        raise errors.NotFound("Guest does not have a console available.")
    return 200, {"output": output}


# --- lock ----------------------------------------------------------------------------------
_lock_schema = [((2, 1), (2, 72), _schema("lock")),
                ((2, 73), None, _schema("lock", {"type": ["object", "null"], "properties": {
                    "locked_reason": v.string(1, 255)}, "additionalProperties": False}))]


def _locked_by(req, rec):
    return "owner" if rec["project_id"] == req.context.project_id else "admin"


def _set_lock(req, rec, action, locked, reason=None):
    """The lock columns, the reason in system metadata, an action with its api_ event."""
    if rec["cell"] is None:
        raise errors.invalid_state(action, rec["uuid"], "vm_state", states.BUILDING)
    cell_db = cells_mod.cell_database(rec["cell"])
    records.start_action(cell_db, req.context, rec["uuid"], action)
    with records.action_event(cell_db, req.context, rec["uuid"], f"api_{action}",
                              finish_action=True):
        try:
            records.update_instance(cell_db, rec["uuid"], locked=locked, reload=False,
                                    locked_by=_locked_by(req, rec) if locked else None)
        except records.InstanceNotFound:
            raise errors.instance_not_found(rec["uuid"])
        if reason or not locked:
            records.set_system_metadata(cell_db, rec["uuid"], locked_reason=reason)
    common.notify(req, rec, notifications.LOCK if locked else notifications.UNLOCK)


@actions.action("lock", _lock_schema)
def lock(req, rec, body):
    req.authorize("os_compute_api:os-lock-server:lock", actions.target(rec))
    reason = (body["lock"] or {}).get("locked_reason") if req.at_least("2.73") else None
    if rec.get("locked") and _locked_by(req, rec) == "owner":
        return 202, None  # the owner's lock stays as it is
    _set_lock(req, rec, "lock", True, reason)
    return 202, None


@actions.action("unlock", _schema("unlock"))
def unlock(req, rec, body):
    req.authorize("os_compute_api:os-lock-server:unlock", actions.target(rec))
    if rec.get("locked_by") and rec["locked_by"] != _locked_by(req, rec):
        req.authorize("os_compute_api:os-lock-server:unlock:unlock_override",
                      actions.target(rec))
    _set_lock(req, rec, "unlock", False)
    return 202, None


# --- soft delete -----------------------------------------------------------------------------
@actions.action("restore", _schema("restore"))
def restore(req, rec, body):
    req.authorize("os_compute_api:os-deferred-delete:restore", actions.target(rec))
    actions.check_unlocked(req, rec)
    actions.check_state(rec, "restore", vm_states=(states.SOFT_DELETED,))
    cell_db = cells_mod.cell_database(rec["cell"])
    values = ({"task_state": task_states.RESTORING} if rec.get("host") else
              {"vm_state": states.ACTIVE, "task_state": None})
    try:
        records.update_instance(cell_db, rec["uuid"], expected_task_state=(None,),
                                deleted_at=None, reload=False, **values)
    except records.UnexpectedTaskStateError:
        raise errors.invalid_state("restore", rec["uuid"], "task_state", "restoring")
    records.start_action(cell_db, req.context, rec["uuid"], "restore")
    build_requests_db.queue_for_delete(req.api.api_db, rec["uuid"], queued=False)
    if rec.get("host"):
        actions.compute_client(rec).restore_instance(req.context, rec["host"], rec["uuid"])
    return 202, None


@actions.action("forceDelete", _schema("forceDelete"))
def force_delete(req, rec, body):
    req.authorize("os_compute_api:os-deferred-delete:force", actions.target(rec))
    actions.check_unlocked(req, rec)
    if rec["cell"] is None:
        raise errors.invalid_state("forceDelete", rec["uuid"], "vm_state", states.BUILDING)
    actions.delete_instance(req.api, req.context, rec)
    return 202, None


ROUTES = []
