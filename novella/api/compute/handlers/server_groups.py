"""/os-server-groups: affinity, anti-affinity and their soft variants."""
import json
import uuid as uuid_mod

import sqlalchemy as sa

from novella.api.compute import common, errors, quotas, validation as v
from novella.db import api_models as am

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
    with req.api.api_db.read_session() as s:
        return set(s.scalars(sa.select(am.InstanceMapping.instance_uuid).where(
            am.InstanceMapping.instance_uuid.in_(uuids),
            am.InstanceMapping.queued_for_delete.is_(False))))


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
    with req.api.api_db.session() as s:
        q = sa.select(am.InstanceGroup).order_by(am.InstanceGroup.id)
        if not all_projects:
            q = q.where(am.InstanceGroup.project_id == req.context.project_id)
        rows = list(s.scalars(q.offset(offset).limit(min(limit, req.api.conf.api.max_limit))))
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
    quotas.check_count(req.api, ctxt, "server_groups", quotas.count_rows(
        req.api, am.InstanceGroup, am.InstanceGroup.project_id == ctxt.project_id),
        message="Quota exceeded, too many server groups.")
    with req.api.api_db.session(write=True) as s:
        g = am.InstanceGroup(uuid=str(uuid_mod.uuid4()), name=body["name"],
                             project_id=ctxt.project_id, user_id=ctxt.user_id,
                             policy=policy, rules=json.dumps(rules))
        s.add(g)
        s.flush()
        return 200, {"server_group": view(req, g)}


def _get(req, s, group_id):
    g = s.scalars(sa.select(am.InstanceGroup).where(am.InstanceGroup.uuid == group_id)).first()
    if g is None or (g.project_id != req.context.project_id and not req.is_admin()):
        raise errors.NotFound(f"Instance group {group_id} could not be found.")
    return g


def show(req, group_id):
    with req.api.api_db.session() as s:
        g = _get(req, s, group_id)
        req.authorize(P + "show", {"project_id": g.project_id, "user_id": g.user_id})
        return 200, {"server_group": view(req, g)}


def delete(req, group_id):
    with req.api.api_db.session(write=True) as s:
        g = _get(req, s, group_id)
        req.authorize(P + "delete", {"project_id": g.project_id, "user_id": g.user_id})
        s.delete(g)
    return 204, None


ROUTES = [
    ("GET", "/os-server-groups", index),
    ("POST", "/os-server-groups", create),
    ("GET", "/os-server-groups/{group_id}", show),
    ("DELETE", "/os-server-groups/{group_id}", delete),
]
