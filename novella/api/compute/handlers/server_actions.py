"""POST /servers/{id}/action: the power actions (os-stop, os-start, reboot), and
the route that dispatches every action by its name (``novella.api.compute.actions``)."""
from novella.api.compute import actions, common, rpcclients
from novella.api.compute.schemas import servers as schemas
from novella.compute import states


# --- power actions -------------------------------------------------------------------------
@actions.action("os-stop", schemas.stop)
def stop(req, rec, body):
    req.authorize("os_compute_api:servers:stop", actions.target(rec))
    actions.check_unlocked(req, rec)
    actions.check_state(rec, "stop", vm_states=(states.ACTIVE, states.ERROR))
    actions.start_task(req, rec, "stop", states.task_states.POWERING_OFF)
    rpcclients.cast_to_compute(req.context, rec["cell"], rec["host"], "stop_instance",
                               instance_uuid=rec["uuid"])
    return 202, None


@actions.action("os-start", schemas.start)
def start(req, rec, body):
    req.authorize("os_compute_api:servers:start", actions.target(rec))
    actions.check_unlocked(req, rec)
    actions.check_state(rec, "start", vm_states=(states.STOPPED,))
    actions.start_task(req, rec, "start", states.task_states.POWERING_ON)
    rpcclients.cast_to_compute(req.context, rec["cell"], rec["host"], "start_instance",
                               instance_uuid=rec["uuid"])
    return 202, None


_SOFT_OK = (None,)
_HARD_OK = (None, states.task_states.REBOOTING, "reboot_pending", "reboot_started",
            states.task_states.REBOOTING_HARD, "reboot_pending_hard", "reboot_started_hard")


@actions.action("reboot", schemas.reboot)
def reboot(req, rec, body):
    req.authorize("os_compute_api:servers:reboot", actions.target(rec))
    actions.check_unlocked(req, rec)
    reboot_type = body["reboot"]["type"].upper()
    if reboot_type == "SOFT":
        actions.check_state(rec, "reboot", vm_states=(states.ACTIVE,), task_states=_SOFT_OK)
        task, expected = states.task_states.REBOOTING, _SOFT_OK
    else:
        actions.check_state(rec, "reboot", vm_states=(states.ACTIVE, states.STOPPED,
                                                      states.PAUSED, states.SUSPENDED,
                                                      states.ERROR),
                            task_states=_HARD_OK)
        task, expected = states.task_states.REBOOTING_HARD, _HARD_OK
    actions.start_task(req, rec, "reboot", task, expected_task_state=expected)
    rpcclients.cast_to_compute(req.context, rec["cell"], rec["host"], "reboot_instance",
                               instance_uuid=rec["uuid"], reboot_type=reboot_type)
    return 202, None


ROUTES = [("POST", "/servers/{server_id}/action", actions.dispatch),
          ("POST", "/os-volumes_boot/{server_id}/action",
           common.volumes_boot(actions.dispatch_volumes_boot))]
