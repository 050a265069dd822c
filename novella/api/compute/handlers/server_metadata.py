"""/servers/{id}/metadata: a server's user metadata (rows of instance_metadata in its cell).

A change needs the server in a state the reference allows (no task under way,
not building) and unlocked; the merged result must fit the project's
``metadata_items`` quota. Keys and values are at most 255 characters.
"""
import copy

from novella.api.compute import actions, errors, instances, quotas, validation
from novella.compute import states
from novella.db import cells as cells_mod, servers as servers_db

P = "os_compute_api:server-metadata:"
_CHANGEABLE = (states.ACTIVE, states.PAUSED, states.SUSPENDED, states.STOPPED,
               states.SHELVED, states.SHELVED_OFFLOADED)

_metadata_body = validation.obj({"metadata": validation.metadata}, required=["metadata"])
_one_item = copy.deepcopy(validation.metadata)
_one_item.update(minProperties=1, maxProperties=1)
_meta_body = validation.obj({"meta": _one_item}, required=["meta"])


def _server(req, server_id, rule):
    rec = instances.get(req, server_id)
    req.authorize(P + rule, {"project_id": rec["project_id"]})
    return rec


def _changeable(req, rec, action):
    actions.check_unlocked(req, rec)
    if rec["cell"] is None:
        raise errors.invalid_state(action, rec["uuid"], "vm_state", states.BUILDING)
    actions.check_state(rec, action, vm_states=_CHANGEABLE)


def _write(req, rec, metadata, replace):
    """Set ``metadata`` (replacing every item when ``replace``); the items after."""
    _changeable(req, rec, "update metadata")
    merged = dict(metadata) if replace else {**rec["metadata"], **metadata}
    quotas.check_metadata(quotas.Quota(req.api, req.context.project_id, req.context.user_id),
                          merged)
    servers_db.set_metadata(cells_mod.cell_database(rec["cell"]), rec["uuid"], merged)
    return merged


def index(req, server_id):
    return 200, {"metadata": _server(req, server_id, "index")["metadata"]}


def show(req, server_id, key):
    rec = _server(req, server_id, "show")
    if key not in rec["metadata"]:
        raise errors.NotFound("Metadata item was not found")
    return 200, {"meta": {key: rec["metadata"][key]}}


def create(req, server_id):
    body = req.body_json(_metadata_body)
    rec = _server(req, server_id, "create")
    return 200, {"metadata": _write(req, rec, body["metadata"], replace=False)}


def update_all(req, server_id):
    body = req.body_json(_metadata_body)
    rec = _server(req, server_id, "update_all")
    return 200, {"metadata": _write(req, rec, body["metadata"], replace=True)}


def update(req, server_id, key):
    body = req.body_json(_meta_body)
    rec = _server(req, server_id, "update")
    if key not in body["meta"]:
        raise errors.BadRequest("Request body and URI mismatch")
    _write(req, rec, body["meta"], replace=False)
    return 200, {"meta": body["meta"]}


def delete(req, server_id, key):
    rec = _server(req, server_id, "delete")
    if key not in rec["metadata"]:
        raise errors.NotFound("Metadata item was not found")
    _changeable(req, rec, "delete metadata")
    servers_db.delete_metadata(cells_mod.cell_database(rec["cell"]), server_id, key)
    return 204, None


ROUTES = [
    ("GET", "/servers/{server_id}/metadata", index),
    ("POST", "/servers/{server_id}/metadata", create),
    ("PUT", "/servers/{server_id}/metadata", update_all),
    ("GET", "/servers/{server_id}/metadata/{key}", show),
    ("PUT", "/servers/{server_id}/metadata/{key}", update),
    ("DELETE", "/servers/{server_id}/metadata/{key}", delete),
]
