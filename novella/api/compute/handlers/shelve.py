"""Server actions shelve, shelveOffload and unshelve (docs/shelve.md).

shelve and shelveOffload cast to the server's host; unshelve casts to the
conductor, which schedules an offloaded server anew.
"""
from novella.api.compute import actions, errors, hosts, quotas, rpcclients
from novella.api.compute import validation as v
from novella.compute import states
from novella.compute.states import task_states
from novella.conductor.rpcapi import ConductorAPI
from novella.db import cells as cells_mod
from novella.db import records
from novella.db import request_specs

# Any value (null, {}) for shelve, shelveOffload and unshelve before 2.77, as the
# reference takes them.
_shelve_schema = v.obj({"shelve": {}}, ["shelve"])
_offload_schema = v.obj({"shelveOffload": {}}, ["shelveOffload"])
_unshelve_schema = [
    ((2, 1), (2, 76), v.obj({"unshelve": {}}, ["unshelve"])),
    ((2, 77), (2, 90), v.obj({"unshelve": {"oneOf": [
        {"type": "null"},
        v.obj({"availability_zone": v.string(1, 255)}, ["availability_zone"])]}},
        ["unshelve"])),
    # 2.91: a host (admins), and a null zone to unpin the server from its zone.
    ((2, 91), None, v.obj({"unshelve": {"oneOf": [
        {"type": "null"},
        v.obj({"availability_zone": {"type": ["string", "null"]},
               "host": {"type": "string"}})]}}, ["unshelve"])),
]

_SHELVABLE = (states.ACTIVE, states.STOPPED, states.PAUSED, states.SUSPENDED)


@actions.action("shelve", _shelve_schema)
def shelve(req, rec, body):
    req.authorize("os_compute_api:os-shelve:shelve", actions.target(rec))
    actions.check_unlocked(req, rec)
    actions.check_state(rec, "shelve", vm_states=_SHELVABLE)
    actions.start_task(req, rec, "shelve", task_states.SHELVING, expected_task_state=(None,))
    image_id = None
    if rec.get("image_ref") and req.api.image_api is not None:  # image-backed: keep the disk
        image_id = req.api.image_api.create_snapshot(
            req.context, rec["uuid"], f"{rec['display_name']}-shelved",
            base_image_ref=rec["image_ref"])["id"]
        # Noted before the host acts, so a host that dies shelving finishes with it.
        records.set_system_metadata(cells_mod.cell_database(rec["cell"]), rec["uuid"],
                                    shelving_image_id=image_id)
    rpcclients.cast_to_compute(req.context, rec["cell"], rec["host"], "shelve_instance",
                               instance_uuid=rec["uuid"], image_id=image_id)
    return 202, None


@actions.action("shelveOffload", _offload_schema)
def shelve_offload(req, rec, body):
    req.authorize("os_compute_api:os-shelve:shelve_offload", actions.target(rec))
    actions.check_unlocked(req, rec)
    actions.check_state(rec, "shelveOffload", vm_states=(states.SHELVED,))
    actions.start_task(req, rec, "shelveOffload", task_states.SHELVING_OFFLOADING,
                       expected_task_state=(None,))
    rpcclients.cast_to_compute(req.context, rec["cell"], rec["host"],
                               "shelve_offload_instance", instance_uuid=rec["uuid"])
    return 202, None


@actions.action("unshelve", _unshelve_schema)
def unshelve(req, rec, body):
    req.authorize("os_compute_api:os-shelve:unshelve", actions.target(rec))
    actions.check_unlocked(req, rec)
    actions.check_state(rec, "unshelve",
                        vm_states=(states.SHELVED, states.SHELVED_OFFLOADED))
    if rec["vm_state"] == states.SHELVED_OFFLOADED:  # before anything is written
        quotas.check_unshelve_offloaded(req.api, rec.get("project_id") or req.context.project_id,
                                        rec.get("user_id") or req.context.user_id,
                                        rec.get("flavor") or {})
    # Before 2.77 the value is not read: null, {} or anything else unshelves as is.
    args = body["unshelve"] if req.at_least("2.77") and body["unshelve"] else {}
    zone_given, zone, host = "availability_zone" in args, args.get("availability_zone"), \
        args.get("host")
    if zone_given or host:
        if rec["vm_state"] != states.SHELVED_OFFLOADED:
            raise errors.Conflict("The availability_zone and host parameters are only for a "
                                  "server in SHELVED_OFFLOADED state.")
        if zone and zone not in hosts.zone_names(req.api) and \
                zone != req.api.conf.default_availability_zone:
            raise errors.BadRequest("The requested availability zone is not available")
    if host:
        req.authorize("os_compute_api:os-shelve:unshelve_to_host", actions.target(rec))
        _check_host_in_zone(req, rec, host, zone if zone_given else _pinned_zone(req, rec))
    actions.start_task(req, rec, "unshelve", task_states.UNSHELVING,
                       expected_task_state=(None,), on_a_host=False)
    if zone_given:  # later schedulings keep it (None: the server is pinned to none)
        request_specs.update(req.api.api_db, rec["uuid"], availability_zone=zone)
    ConductorAPI(req.api.transport).unshelve_instance(req.context, rec["uuid"], host=host)
    return 202, None


def _pinned_zone(req, rec):
    """The zone the server's request spec keeps it in, if any."""
    spec = request_specs.find(req.api.api_db, rec["uuid"])
    return spec.get("availability_zone") if spec else None


def _check_host_in_zone(req, rec, host, zone):
    """400 for a host that is not a compute host of the server's cell; 409 for one
    outside the zone the server keeps."""
    if not any(cell.uuid == rec["cell"].uuid for cell, _node in hosts.compute_nodes(
            req.api, host=host)):
        raise errors.BadRequest(f"Compute host {host} could not be found.")
    if zone and hosts.host_zones(req.api).get(host, req.api.conf.default_availability_zone) \
            != zone:
        raise errors.Conflict(f"Host {host} is not in availability zone {zone}.")


ROUTES = []
