"""/os-assisted-volume-snapshots: the volume service asks the hypervisor to snapshot
a volume attached to a server, or to delete such a snapshot (the service role).

The server is found by the volume's block device mapping in any cell; it must
be on a host and doing nothing else. The host's driver takes the snapshot
(novella/compute/volume_ops.py, a cast as in the reference); the answer
echoes ``create_info``'s ``id``.
"""
import json

from novella.api.compute import errors
from novella.api.compute import validation as v
from novella.compute import rpcapi as compute_rpcapi
from novella.db import cells as cells_mod
from novella.db import servers as servers_db

_RULE = "os_compute_api:os-assisted-volume-snapshots:"

_create_schema = v.obj({"snapshot": v.obj({
    "volume_id": {"type": "string", "minLength": 1},
    "create_info": v.obj({
        "snapshot_id": {"type": "string", "minLength": 1},
        "type": {"type": "string", "enum": ["qcow2"]},
        "new_file": {"type": "string", "minLength": 1},
        "id": {"type": "string", "minLength": 1}}, ["snapshot_id", "type", "new_file"]),
}, ["volume_id", "create_info"])}, ["snapshot"])


def _server_of(req, volume_id):
    """The cell and server the volume is mapped to; 400 if none, as the reference."""
    for cell in cells_mod.list_cells(req.api.api_db, include_cell0=False):
        inst = servers_db.holding_volume(cells_mod.cell_database(cell), volume_id)
        if inst is not None:
            return cell, {"uuid": inst.uuid, "host": inst.host,
                          "vm_state": inst.vm_state, "task_state": inst.task_state}
    raise errors.BadRequest(f"No volume Block Device Mapping with id {volume_id}.")


def _ready(cell, inst, action):
    """On a host and with no task (any vm_state); the reference answers 400 here."""
    if not inst["host"]:
        raise errors.BadRequest(f"Instance {inst['uuid']} is not ready")
    if inst["task_state"] is not None:
        raise errors.BadRequest(f"Instance {inst['uuid']} in task_state "
                                f"{inst['task_state']}. Cannot {action} while the instance "
                                f"is in this state.")
    return compute_rpcapi.ComputeAPI(cell.transport_url)


def create(req):
    req.authorize(_RULE + "create", {})
    body = req.body_json(_create_schema)["snapshot"]
    volume_id, create_info = body["volume_id"], body["create_info"]
    cell, inst = _server_of(req, volume_id)
    _ready(cell, inst, "volume_snapshot_create").volume_snapshot_create(
        req.context, inst["host"], inst["uuid"], volume_id, create_info)
    return 200, {"snapshot": {"id": create_info.get("id"), "volumeId": volume_id}}


def delete(req, snapshot_id):
    req.authorize(_RULE + "delete", {})
    if req.at_least("2.75"):  # no other query parameter from 2.75
        for key in req.GET:
            if key != "delete_info":
                raise errors.BadRequest(f"Additional properties are not allowed ('{key}' "
                                        "was unexpected)")
    try:
        delete_info = json.loads(req.GET["delete_info"])
        volume_id = delete_info["volume_id"]
    except (KeyError, ValueError, TypeError) as exc:
        raise errors.BadRequest(str(exc))
    cell, inst = _server_of(req, volume_id)
    if delete_info.get("merge_target_file") is not None and inst["vm_state"] != "active":
        raise errors.BadRequest(f"Instance {inst['uuid']} in vm_state {inst['vm_state']}. "
                                "Cannot volume_snapshot_delete while the instance is in "
                                "this state.")
    _ready(cell, inst, "volume_snapshot_delete").volume_snapshot_delete(
        req.context, inst["host"], inst["uuid"], volume_id, snapshot_id, delete_info)
    return 204, None


ROUTES = [
    ("POST", "/os-assisted-volume-snapshots", create),
    ("DELETE", "/os-assisted-volume-snapshots/{snapshot_id}", delete),
]
