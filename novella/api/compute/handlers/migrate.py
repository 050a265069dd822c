"""Server actions that move a server inside its cell: resize, migrate,
confirmResize, revertResize, os-migrateLive, evacuate.

Each validates, checks policy and state, writes the migration row and the
instance action, sets the task state and casts to the conductor, which owns
the rest (novella/conductor/manager.py, docs/moves.md).
"""
import logging

from novella.api.compute import actions, common, errors, hosts, instances, quotas
from novella.api.compute import validation as v
from novella.compute import states
from novella.compute.states import migration_status as ms, task_states
from novella.conductor.rpcapi import ConductorAPI
from novella.db import cells as cells_mod
from novella.db import migration_records
from novella.db import records
from novella.db import request_specs
from novella.rpc import notifications

LOG = logging.getLogger(__name__)

_resize_schema = v.obj({"resize": v.obj({
    "flavorRef": {"type": ["string", "integer"], "minLength": 1},
    "OS-DCF:diskConfig": {"type": "string", "enum": ["AUTO", "MANUAL"]}}, ["flavorRef"])},
    ["resize"])
_migrate_schema = [
    # Before 2.56 the value is not read (null and {} are both usual).
    ((2, 1), (2, 55), v.obj({"migrate": {}}, ["migrate"])),
    ((2, 56), None, v.obj({"migrate": {"oneOf": [
        {"type": "null"},
        v.obj({"host": {"oneOf": [{"type": "null"}, v.string(1, 255)]}})]}}, ["migrate"])),
]
_live_host = {"oneOf": [{"type": "null"}, v.string(1, 255)]}
_live_schema = [
    ((2, 1), (2, 24), v.obj({"os-migrateLive": v.obj(
        {"host": _live_host, "block_migration": v.boolean, "disk_over_commit": v.boolean},
        ["host", "block_migration", "disk_over_commit"])}, ["os-migrateLive"])),
    ((2, 25), (2, 29), v.obj({"os-migrateLive": v.obj(
        {"host": _live_host, "block_migration": {"oneOf": [v.boolean, {"enum": ["auto"]}]}},
        ["host", "block_migration"])}, ["os-migrateLive"])),
    ((2, 30), (2, 67), v.obj({"os-migrateLive": v.obj(
        {"host": _live_host, "block_migration": {"oneOf": [v.boolean, {"enum": ["auto"]}]},
         "force": v.boolean}, ["host", "block_migration"])}, ["os-migrateLive"])),
    ((2, 68), None, v.obj({"os-migrateLive": v.obj(
        {"host": _live_host, "block_migration": {"oneOf": [v.boolean, {"enum": ["auto"]}]}},
        ["host", "block_migration"])}, ["os-migrateLive"])),
]
_evacuate_host = v.string(1, 255)
_evacuate_schema = [
    ((2, 1), (2, 13), v.obj({"evacuate": v.obj(
        {"host": _evacuate_host, "onSharedStorage": v.boolean, "adminPass": v.string(0, 255)},
        ["onSharedStorage"])}, ["evacuate"])),
    ((2, 14), (2, 28), v.obj({"evacuate": v.obj(
        {"host": _evacuate_host, "adminPass": v.string(0, 255)})}, ["evacuate"])),
    ((2, 29), (2, 67), v.obj({"evacuate": v.obj(
        {"host": _evacuate_host, "adminPass": v.string(0, 255), "force": v.boolean})},
        ["evacuate"])),
    ((2, 68), None, v.obj({"evacuate": v.obj(
        {"host": _evacuate_host, "adminPass": v.string(0, 255)})}, ["evacuate"])),
]
_confirm_schema = v.obj({"confirmResize": {}}, ["confirmResize"])
_revert_schema = v.obj({"revertResize": {}}, ["revertResize"])

_MOVABLE = (states.ACTIVE, states.STOPPED)


def _conductor(req):
    return ConductorAPI(req.api.transport)


def _start_move(req, rec, action_name, migration_type, old_flavor, new_flavor, host=None,
                auto_disk_config=False):
    """The migration row, the task state (guarded) and the action; then the cast.
    The disk configuration is the one asked for, else MANUAL (as the reference)."""
    cell_db = actions.start_task(req, rec, action_name, task_states.RESIZE_PREP,
                                 expected_task_state=(None,), auto_disk_config=auto_disk_config)
    migration = migration_records.create(cell_db, rec, migration_type, old_flavor, new_flavor)
    _conductor(req).migrate_server(req.context, rec["uuid"], migration["uuid"],
                                   flavor=new_flavor, host=host,
                                   allow_cross_cell=_cross_cell_allowed(req, rec))
    return 202, None


def _cross_cell_allowed(req, rec):
    """The move may leave the server's cell (the conductor also checks service versions)."""
    return req.can("compute:servers:resize:cross_cell", actions.target(rec))


@actions.action("resize", _resize_schema, view=False)
def resize(req, rec, body):
    req.authorize("os_compute_api:servers:resize", actions.target(rec))
    actions.check_unlocked(req, rec)
    actions.check_state(rec, "resize", vm_states=_MOVABLE)
    old = rec["flavor"]
    new = common.flavor(req, body["resize"]["flavorRef"])
    if new["flavorid"] == old.get("flavorid"):
        raise errors.BadRequest("When resizing, instances must change flavor!")
    # The server was loaded without its volumes (view=False): read them only here.
    volume_backed = not rec.get("image_ref") and any(
        (instances.load(req.api.api_db, rec["uuid"]) or {}).get("volumes") or [])
    if not volume_backed and new["root_gb"] < (old.get("root_gb") or 0):
        raise errors.BadRequest("Resizing to a smaller disk flavor is not allowed.")
    requested_disk_config = body["resize"].get("OS-DCF:diskConfig")
    # Not inherited: the image's properties matter only to refuse an AUTO asked for.
    auto_disk_config = common.disk_config(
        requested_disk_config, rec.get("image_ref"),
        _image_properties(req, rec) if requested_disk_config == "AUTO" else None,
        inherit=False)
    quotas.check_resize(req.api, req.context, rec.get("project_id") or req.context.project_id,
                        rec.get("user_id") or None, old, new)
    return _start_move(req, rec, "resize", "resize", old, new,
                       auto_disk_config=auto_disk_config)


def _image_properties(req, rec):
    """The properties of the server's image, as its request spec keeps them."""
    spec = request_specs.find(req.api.api_db, rec["uuid"])
    if spec is None:
        return {}
    return (spec.get("image") or {}).get("properties")


@actions.action("migrate", _migrate_schema, view=False)
def migrate(req, rec, body):
    req.authorize("os_compute_api:os-migrate-server:migrate", actions.target(rec))
    host = (body["migrate"] or {}).get("host") if req.at_least("2.56") else None
    if host:
        req.authorize("os_compute_api:os-migrate-server:migrate:host", actions.target(rec))
    actions.check_unlocked(req, rec)
    actions.check_state(rec, "migrate", vm_states=_MOVABLE)
    if host:
        _check_target_host(req, rec, host)
    return _start_move(req, rec, "migrate", "migration", rec["flavor"], rec["flavor"],
                       host=host)


@actions.action("os-migrateLive", _live_schema, view=False)
def live_migrate(req, rec, body):
    """Move a running server to another host of its cell without stopping it.

    ``block_migration`` and ``disk_over_commit`` are accepted and make no
    difference (the simulated hosts copy local disks either way); ``force``
    (2.30-2.67) still runs the scheduler's checks on the host asked for.
    """
    host = body["os-migrateLive"].get("host")
    req.authorize("os_compute_api:os-migrate-server:migrate_live" + (":host" if host else ""),
                  actions.target(rec))
    actions.check_unlocked(req, rec)
    actions.check_state(rec, "os-migrateLive", vm_states=(states.ACTIVE, states.PAUSED))
    if host:
        _check_target_host(req, rec, host, other_cells=False)
    migration = _accept(req, rec, "live-migration", task_states.MIGRATING, "live-migration")
    _conductor(req).live_migrate_instance(req.context, rec["uuid"], migration["uuid"],
                                          host=host)
    return 202, None


@actions.action("evacuate", _evacuate_schema, view=False)
def evacuate(req, rec, body):
    """Rebuild on another host of its cell a server whose host is down.

    ``onSharedStorage`` and ``force`` are accepted and change nothing: the
    guest is rebuilt from its image (or volume), and a named host is still
    checked by the scheduler.
    """
    req.authorize("os_compute_api:os-evacuate", actions.target(rec))
    host = body["evacuate"].get("host")
    actions.check_state(rec, "evacuate", vm_states=(states.ACTIVE, states.STOPPED, states.ERROR))
    if not rec.get("host") or rec["cell"] is None:
        raise errors.invalid_state("evacuate", rec["uuid"], "vm_state", rec["vm_state"])
    if _source_service_up(req, rec):
        raise errors.BadRequest(f"Compute service of {rec['host']} is still in use.")
    if host:
        _check_target_host(req, rec, host, other_cells=False)
    migration = _accept(req, rec, "evacuate", task_states.REBUILDING, "evacuation")
    common.notify(req, rec, notifications.EVACUATE)
    _conductor(req).evacuate_instance(req.context, rec["uuid"], migration["uuid"], host=host)
    if not req.at_least("2.14") and req.api.conf.api.enable_instance_password:
        return 200, {"adminPass": body["evacuate"].get("adminPass") or common.generate_password()}
    return 200, None


def _accept(req, rec, action_name, task_state, migration_type):
    """The task state (guarded), the instance action, an 'accepted' migration row."""
    cell_db = actions.start_task(req, rec, action_name, task_state, expected_task_state=(None,))
    return migration_records.create(cell_db, rec, migration_type, rec["flavor"], rec["flavor"],
                                    status=ms.ACCEPTED)


def _source_service_up(req, rec):
    service = hosts.compute_service(rec["cell"], rec["host"])
    return service is not None and hosts.is_up(req.api.conf, service)


def _check_target_host(req, rec, host, other_cells=True):
    """400 for an unknown host or the source, 409 for a disabled one.

    ``other_cells``: a host of another cell may be asked for (when the
    cross-cell policy passes); live migration never leaves the cell.
    """
    if host == rec["host"]:
        raise errors.BadRequest("The target host can't be the same one.")
    cell = cells_mod.host_cell(req.api.api_db, host)
    service = None
    other_cell_ok = other_cells and cell is not None and _cross_cell_allowed(req, rec)
    if cell is not None and rec["cell"] is not None and (cell.uuid == rec["cell"].uuid
                                                         or other_cell_ok):
        service = hosts.compute_service(cell, host)
    if service is None:
        raise errors.BadRequest(f"Compute host {host} could not be found.")
    if service.disabled:
        raise errors.Conflict(f"Compute service of {host} is unavailable at this time.")


def _finished_migration(rec, action_name):
    actions.check_state(rec, action_name, vm_states=(states.RESIZED,))
    cell_db = cells_mod.cell_database(rec["cell"])
    migration = migration_records.unconfirmed(cell_db, rec["uuid"])
    if migration is None:
        raise _no_finished_migration(rec)
    return cell_db, migration


def _no_finished_migration(rec):
    return errors.BadRequest(f"Migration for instance {rec['uuid']} with status "
                             f"{ms.FINISHED} could not be found.")


@actions.action("confirmResize", _confirm_schema, view=False)
def confirm_resize(req, rec, body):
    req.authorize("os_compute_api:servers:confirm_resize", actions.target(rec))
    actions.check_unlocked(req, rec)
    actions.check_state(rec, "confirmResize", vm_states=(states.RESIZED,))
    cell_db = cells_mod.cell_database(rec["cell"])
    migration = migration_records.take_unconfirmed(cell_db, rec["uuid"], ms.CONFIRMING)
    if migration is None:
        raise _no_finished_migration(rec)
    records.start_action(cell_db, req.context, rec["uuid"], "confirmResize")
    _conductor(req).confirm_resize(req.context, rec["uuid"], migration["uuid"])
    return 204, None


@actions.action("revertResize", _revert_schema, view=False)
def revert_resize(req, rec, body):
    req.authorize("os_compute_api:servers:revert_resize", actions.target(rec))
    actions.check_unlocked(req, rec)
    cell_db, migration = _finished_migration(rec, "revertResize")
    actions.start_task(req, rec, "revertResize", task_states.RESIZE_REVERTING,
                       expected_task_state=(None,))
    if migration_records.update(cell_db, migration["uuid"], expected_status=ms.FINISHED,
                                status=ms.REVERTING) is None:
        records.update_instance(cell_db, rec["uuid"], task_state=None)
        raise errors.invalid_state("revertResize", rec["uuid"], "task_state",
                                   task_states.RESIZE_REVERTING)
    _conductor(req).revert_resize(req.context, rec["uuid"], migration["uuid"])
    return 202, None


ROUTES = []
