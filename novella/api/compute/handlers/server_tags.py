"""/servers/{id}/tags (2.26)."""
from novella.api.compute import errors, instances, validation
from novella.api.compute.schemas import servers as schemas
from novella.compute import states
from novella.db import cells as cells_mod, servers as servers_db

P = "os_compute_api:os-server-tags:"
MAX_TAGS = 50
_TAGGABLE = (states.ACTIVE, states.PAUSED, states.SUSPENDED, states.STOPPED, states.SHELVED,
             states.SHELVED_OFFLOADED, states.ERROR, states.RESIZED, states.RESCUED)


def _server(req, server_id, rule, write=False):
    if not req.at_least("2.26"):
        raise errors.NotFound("The resource could not be found.")
    rec = instances.get(req, server_id)
    req.authorize(P + rule, {"project_id": rec["project_id"], "user_id": rec["user_id"]})
    if write and (rec["cell"] is None or rec["vm_state"] not in _TAGGABLE):
        raise errors.invalid_state("update tag", server_id, "vm_state", rec["vm_state"])
    return rec


def _db(rec):
    return cells_mod.cell_database(rec["cell"])


def _check_tag(tag):
    validation.validate(schemas.tag, tag)


def index(req, server_id):
    rec = _server(req, server_id, "index")
    return 200, {"tags": rec["tags"]}


def show(req, server_id, tag):
    rec = _server(req, server_id, "show")
    if tag not in rec["tags"]:
        raise errors.NotFound(f"Tag {tag} could not be found.")
    return 204, None


def update_all(req, server_id):
    rec = _server(req, server_id, "update_all", write=True)
    tags = req.body_json(schemas.tags_update_all)["tags"]
    tags = sorted(set(tags))
    if len(tags) > MAX_TAGS:
        raise errors.BadRequest(f"The number of tags exceeded the per-server limit {MAX_TAGS}")
    servers_db.set_tags(_db(rec), server_id, tags)
    return 200, {"tags": tags}


def update(req, server_id, tag):
    rec = _server(req, server_id, "update", write=True)
    _check_tag(tag)
    if tag in rec["tags"]:
        return 204, None
    if len(rec["tags"]) >= MAX_TAGS:
        raise errors.BadRequest(f"The number of tags exceeded the per-server limit {MAX_TAGS}")
    servers_db.add_tag(_db(rec), server_id, tag)
    location = req.self_link("servers", server_id, "tags", tag)
    return 201, None, {"Location": location}


def delete(req, server_id, tag):
    rec = _server(req, server_id, "delete", write=True)
    if tag not in rec["tags"]:
        raise errors.NotFound(f"Tag {tag} could not be found.")
    servers_db.delete_tags(_db(rec), server_id, tag)
    return 204, None


def delete_all(req, server_id):
    rec = _server(req, server_id, "delete_all", write=True)
    servers_db.delete_tags(_db(rec), server_id)
    return 204, None


ROUTES = [
    ("GET", "/servers/{server_id}/tags", index),
    ("PUT", "/servers/{server_id}/tags", update_all),
    ("DELETE", "/servers/{server_id}/tags", delete_all),
    ("GET", "/servers/{server_id}/tags/{tag}", show),
    ("PUT", "/servers/{server_id}/tags/{tag}", update),
    ("DELETE", "/servers/{server_id}/tags/{tag}", delete),
]
