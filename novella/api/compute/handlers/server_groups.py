"""/os-server-groups: affinity, anti-affinity and their soft variants."""
import json
import uuid as uuid_mod

from novella.api.compute import common, errors, quotas, validation as v
from novella.db import server_groups as server_groups_db

P = "os_compute_api:os-server-groups:"
_POLICIES = ["affinity", "anti-affinity"]
_SOFT = ["soft-affinity", "soft-anti-affinity"]


def _create_schema(version):
    if version < (2, 64):
        allowed = _POLICIES + (_SOFT if version >= (2, 15) else [])
        group = v.obj({"name": v.name, "policies": {
            "type": "array", "items": [{"type": "string", "enum": allowed}],
            "uniqueItems": True, "minItems": 1, "maxItems": 1, "additionalItems": False}},
            ["name", "policies"])
    else:
        group = v.obj({"name": v.name,
                       "policy": {"type": "string", "enum": _POLICIES + _SOFT},
                       "rules": {"type": "object", "properties": {
                           "max_server_per_host": v.positive_int},
                           "additionalProperties": False}},
                      ["name", "policy"])
    return v.obj({"server_group": group}, ["server_group"])


def _not_deleted(req, groups):
    """The members of ``groups`` that are not deleted (their mapping is not queued
    for delete): a deleted server is no longer shown as a member."""
    uuids = {m.instance_uuid for g in groups for m in g.members}
    if not uuids:
        return set()
    return server_groups_db.not_deleted(req.api.api_db, uuids)


def view(req, g, not_deleted=None):
    if not_deleted is None:
        not_deleted = _not_deleted(req, [g])
    out = {"id": g.uuid, "name": g.name,
           "members": [m.instance_uuid for m in g.members if m.instance_uuid in not_deleted]}
    rules = json.loads(g.rules or "{}")
    if req.at_least("2.64"):
        out["policy"] = g.policy
        out["rules"] = rules
    else:
        out["policies"] = [g.policy]
        out["metadata"] = {}
    if req.at_least("2.13"):
        out["project_id"] = g.project_id
        out["user_id"] = g.user_id
    return out


def index(req):
    req.authorize(P + "index")
    all_projects = "all_projects" in req.GET and v.to_bool(req.GET.get("all_projects") or "true")
    if all_projects:
        all_projects = req.can(P + "index:all_projects")
    try:
        limit = int(req.GET.get("limit", req.api.conf.api.max_limit))
        offset = common.db_int(req.GET.get("offset", 0))
    except ValueError:
        raise errors.BadRequest("limit and offset must be integers")
    if limit < 0 or offset < 0:
        raise errors.BadRequest("limit and offset must be positive")
    rows = server_groups_db.page(req.api.api_db, offset, min(limit, req.api.conf.api.max_limit),
                                 None if all_projects else req.context.project_id)
    not_deleted = _not_deleted(req, rows)
    return 200, {"server_groups": [view(req, g, not_deleted) for g in rows]}


def create(req):
    req.authorize(P + "create")
    body = req.body_json(_create_schema)["server_group"]
    policy = body["policy"] if req.at_least("2.64") else body["policies"][0]
    rules = dict(body.get("rules") or {})
    if rules:
        if policy != "anti-affinity":
            raise errors.BadRequest("Only anti-affinity policy supports rules.")
        rules["max_server_per_host"] = int(rules["max_server_per_host"])
    ctxt = req.context
    quotas.check_count(req.api, ctxt, "server_groups",
                       server_groups_db.count(req.api.api_db, ctxt.project_id),
        message="Quota exceeded, too many server groups.")
    g = server_groups_db.add(req.api.api_db, uuid=str(uuid_mod.uuid4()), name=body["name"],
                             project_id=ctxt.project_id, user_id=ctxt.user_id,
                             policy=policy, rules=json.dumps(rules))
    return 200, {"server_group": view(req, g)}


def _check(req, group_id, g, rule):
    """404 for a group the caller may not see, then ``rule``'s policy."""
    if g is None or (g.project_id != req.context.project_id and not req.is_admin()):
        raise errors.NotFound(f"Instance group {group_id} could not be found.")
    req.authorize(rule, {"project_id": g.project_id, "user_id": g.user_id})


def show(req, group_id):
    g = server_groups_db.get(req.api.api_db, group_id)
    _check(req, group_id, g, P + "show")
    return 200, {"server_group": view(req, g)}


def delete(req, group_id):
    server_groups_db.delete(req.api.api_db, group_id, lambda g: _check(req, group_id, g, P + "delete"))
    return 204, None


ROUTES = [
    ("GET", "/os-server-groups", index),
    ("POST", "/os-server-groups", create),
    ("GET", "/os-server-groups/{group_id}", show),
    ("DELETE", "/os-server-groups/{group_id}", delete),
]
