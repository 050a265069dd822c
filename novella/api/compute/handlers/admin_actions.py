"""Admin server actions.

os-resetState: force a server's vm_state to active or error and clear its
task state, for an operator recovering a stuck server. Nothing is cast to a
host: only the server's row changes, and a finished instance action
``resetState`` records who did it.

injectNetworkInfo: the server's host writes the guest's network
configuration (its info cache) into it again; a cast, as in the reference,
with no task state and no instance action.
"""
from novella.api.compute import actions, errors
from novella.api.compute import validation as v
from novella.compute import states
from novella.db import cells as cells_mod
from novella.db import servers as servers_db

_reset_state_schema = v.obj({"os-resetState": v.obj(
    {"state": {"type": "string", "enum": ["active", "error"]}}, ["state"])}, ["os-resetState"])

_STATES = {"active": states.ACTIVE, "error": states.ERROR}


@actions.action("os-resetState", _reset_state_schema)
def reset_state(req, rec, body):
    req.authorize("os_compute_api:os-admin-actions:reset_state", actions.target(rec))
    if rec["cell"] is None:
        raise errors.invalid_state("os-resetState", rec["uuid"], "vm_state", states.BUILDING)
    if not servers_db.reset_state(cells_mod.cell_database(rec["cell"]), req.context, rec["uuid"],
                                  _STATES[body["os-resetState"]["state"]]):
        raise errors.instance_not_found(rec["uuid"])
    return 202, None


@actions.action("injectNetworkInfo", v.obj({"injectNetworkInfo": {}}, ["injectNetworkInfo"]))
def inject_network_info(req, rec, body):
    req.authorize("os_compute_api:os-admin-actions:inject_network_info", actions.target(rec))
    actions.check_unlocked(req, rec)
    if rec["cell"] is None or not rec.get("host"):
        raise errors.Conflict(f"Instance {rec['uuid']} is not ready")
    actions.compute_client(rec).inject_network_info(req.context, rec["host"], rec["uuid"])
    return 202, None


ROUTES = []
