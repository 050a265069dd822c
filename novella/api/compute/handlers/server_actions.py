"""POST /servers/{id}/action: one handler per action name.

An action is registered with ``@action("name", schema)``; a module adding
actions (resize, migrate, confirmResize, revertResize, ...) only needs to be
imported by the application (``wsgi.HANDLER_MODULES``)::

    @server_actions.action("resize", schemas.resize)
    def resize(req, rec, body): ...   # rec: the server record, body: validated
        return 202, None
"""
from novella import rpc
from novella.api.compute import errors, instances, rpcclients, validation
from novella.api.compute.schemas import servers as schemas
from novella.compute import rpcapi, states
from novella.db import cells as cells_mod, records

ACTIONS = {}


def action(name, schema=None, min_version=None, view=True):
    """``view=False``: the handler reads none of the server's metadata, tags, fault
    and volumes, which are then not loaded (``instances.load``)."""
    def register(fn):
        ACTIONS[name] = (fn, schema, min_version, view)
        return fn
    return register


def dispatch(req, server_id):
    body = req.body_json()
    if not isinstance(body, dict) or len(body) != 1:
        raise errors.BadRequest("Malformed request body")
    name = next(iter(body))
    entry = ACTIONS.get(name)
    if entry is None or (entry[2] and not req.at_least(entry[2])):
        raise errors.BadRequest(f"There is no such action: {name}")
    fn, schema, _min, view = entry
    if schema is not None:
        validation.validate(schema, body, req.version)
    rec = instances.get(req, server_id, view=view)
    return fn(req, rec, body)


# --- helpers for actions ------------------------------------------------------------------
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


# --- power actions -------------------------------------------------------------------------
@action("os-stop", schemas.stop)
def stop(req, rec, body):
    req.authorize("os_compute_api:servers:stop", target(rec))
    check_unlocked(req, rec)
    check_state(rec, "stop", vm_states=(states.ACTIVE, states.ERROR))
    start_task(req, rec, "stop", states.task_states.POWERING_OFF)
    rpcclients.cast_to_compute(req.context, rec["cell"], rec["host"], "stop_instance",
                               instance_uuid=rec["uuid"])
    return 202, None


@action("os-start", schemas.start)
def start(req, rec, body):
    req.authorize("os_compute_api:servers:start", target(rec))
    check_unlocked(req, rec)
    check_state(rec, "start", vm_states=(states.STOPPED,))
    start_task(req, rec, "start", states.task_states.POWERING_ON)
    rpcclients.cast_to_compute(req.context, rec["cell"], rec["host"], "start_instance",
                               instance_uuid=rec["uuid"])
    return 202, None


_SOFT_OK = (None,)
_HARD_OK = (None, states.task_states.REBOOTING, "reboot_pending", "reboot_started",
            states.task_states.REBOOTING_HARD, "reboot_pending_hard", "reboot_started_hard")


@action("reboot", schemas.reboot)
def reboot(req, rec, body):
    req.authorize("os_compute_api:servers:reboot", target(rec))
    check_unlocked(req, rec)
    reboot_type = body["reboot"]["type"].upper()
    if reboot_type == "SOFT":
        check_state(rec, "reboot", vm_states=(states.ACTIVE,), task_states=_SOFT_OK)
        task, expected = states.task_states.REBOOTING, _SOFT_OK
    else:
        check_state(rec, "reboot", vm_states=(states.ACTIVE, states.STOPPED, states.PAUSED,
                                              states.SUSPENDED, states.ERROR),
                    task_states=_HARD_OK)
        task, expected = states.task_states.REBOOTING_HARD, _HARD_OK
    start_task(req, rec, "reboot", task, expected_task_state=expected)
    rpcclients.cast_to_compute(req.context, rec["cell"], rec["host"], "reboot_instance",
                               instance_uuid=rec["uuid"], reboot_type=reboot_type)
    return 202, None


ROUTES = [("POST", "/servers/{server_id}/action", dispatch)]
