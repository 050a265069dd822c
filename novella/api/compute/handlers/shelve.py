"""Server actions shelve, shelveOffload and unshelve (docs/shelve.md).

shelve and shelveOffload cast to the server's host; unshelve casts to the
conductor, which schedules an offloaded server anew.
"""
from novella.api.compute import errors, rpcclients
from novella.api.compute import validation as v
from novella.api.compute.handlers import availability_zones
from novella.api.compute.handlers import server_actions as sa_mod
from novella.compute import states
from novella.compute.states import task_states
from novella.conductor.rpcapi import ConductorAPI

_shelve_schema = v.obj({"shelve": {"type": "null"}}, ["shelve"])
_offload_schema = v.obj({"shelveOffload": {"type": "null"}}, ["shelveOffload"])
_unshelve_schema = [
    ((2, 1), (2, 76), v.obj({"unshelve": {"type": "null"}}, ["unshelve"])),
    ((2, 77), None, v.obj({"unshelve": {"oneOf": [
        {"type": "null"},
        v.obj({"availability_zone": v.string(1, 255)}, ["availability_zone"])]}},
        ["unshelve"])),
]

_SHELVABLE = (states.ACTIVE, states.STOPPED, states.PAUSED, states.SUSPENDED)


@sa_mod.action("shelve", _shelve_schema)
def shelve(req, rec, body):
    req.authorize("os_compute_api:os-shelve:shelve", sa_mod.target(rec))
    sa_mod.check_unlocked(req, rec)
    sa_mod.check_state(rec, "shelve", vm_states=_SHELVABLE)
    sa_mod.start_task(req, rec, "shelve", task_states.SHELVING, expected_task_state=(None,))
    image_id = None
    if rec.get("image_ref") and req.api.image_api is not None:  # image-backed: keep the disk
        image_id = req.api.image_api.create_snapshot(
            req.context, rec["uuid"], f"{rec['display_name']}-shelved",
            base_image_ref=rec["image_ref"])["id"]
    rpcclients.cast_to_compute(req.context, rec["cell"], rec["host"], "shelve_instance",
                               instance_uuid=rec["uuid"], image_id=image_id)
    return 202, None


@sa_mod.action("shelveOffload", _offload_schema)
def shelve_offload(req, rec, body):
    req.authorize("os_compute_api:os-shelve:shelve_offload", sa_mod.target(rec))
    sa_mod.check_unlocked(req, rec)
    sa_mod.check_state(rec, "shelveOffload", vm_states=(states.SHELVED,))
    sa_mod.start_task(req, rec, "shelveOffload", task_states.SHELVING_OFFLOADING,
                      expected_task_state=(None,))
    rpcclients.cast_to_compute(req.context, rec["cell"], rec["host"],
                               "shelve_offload_instance", instance_uuid=rec["uuid"])
    return 202, None


@sa_mod.action("unshelve", _unshelve_schema)
def unshelve(req, rec, body):
    req.authorize("os_compute_api:os-shelve:unshelve", sa_mod.target(rec))
    sa_mod.check_unlocked(req, rec)
    sa_mod.check_state(rec, "unshelve",
                       vm_states=(states.SHELVED, states.SHELVED_OFFLOADED))
    zone = (body["unshelve"] or {}).get("availability_zone")
    if zone:
        if rec["vm_state"] != states.SHELVED_OFFLOADED:
            raise errors.Conflict("The availability_zone parameter is only for a server in "
                                  "SHELVED_OFFLOADED state.")
        if zone not in availability_zones.zone_names(req.api) and \
                zone != req.api.conf.default_availability_zone:
            raise errors.BadRequest("The requested availability zone is not available")
    sa_mod.start_task(req, rec, "unshelve", task_states.UNSHELVING,
                      expected_task_state=(None,), on_a_host=False)
    ConductorAPI(req.api.transport).unshelve_instance(req.context, rec["uuid"],
                                                      availability_zone=zone)
    return 202, None


ROUTES = []
