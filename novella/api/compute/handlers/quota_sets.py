"""os-quota-sets and os-quota-class-sets: the compute quotas of a project,
of one of its users, and of the ``default`` class (novella/api/compute/quotas.py).

2.36 drops the network quotas from the documents (and refuses them in
updates), 2.50 from quota classes, which show the server group quotas from
2.50; 2.57 drops the injected file quotas.
"""
from novella.api.compute import errors, quotas, validation as v
from novella.db import quotas as quotas_db

P = "os_compute_api:os-quota-sets:"
PC = "os_compute_api:os-quota-class-sets:"

# Quotas of the network service the reference reported before 2.36 (classes: 2.50).
_NETWORK = quotas.NETWORK_RESOURCES
_FILES = ["injected_files", "injected_file_content_bytes", "injected_file_path_bytes"]
_LIMIT = {"type": ["integer", "string"], "pattern": r"^-?[0-9]+$", "minimum": -1,
          "maximum": v.MAX_INT}


# What a quota class shows only from 2.50.
_GROUPS = ["server_groups", "server_group_members"]


def _names(req, classes=False):
    names = list(quotas.RESOURCES)
    if req.at_least("2.57"):
        names = [n for n in names if n not in _FILES]
    if not req.at_least("2.50" if classes else "2.36"):
        names += _NETWORK
    if classes and not req.at_least("2.50"):
        names = [n for n in names if n not in _GROUPS]
    return names


def _update_schema(version, classes=False):
    names = list(quotas.RESOURCES)
    if version >= (2, 57):
        names = [n for n in names if n not in _FILES]
    if version < (2, 36) or (classes and version < (2, 50)):
        names += _NETWORK
    inner = {n: _LIMIT for n in names}
    if not classes:
        inner["force"] = v.boolean
    wrapper = "quota_class_set" if classes else "quota_set"
    return v.obj({wrapper: v.obj(inner)}, [wrapper])


def _document(req, limits, names, used=None):
    out = {}
    for name in names:
        limit = limits.get(name, -1)
        if used is None:
            out[name] = limit
        else:
            out[name] = {"limit": limit, "in_use": used.get(name, 0), "reserved": 0}
    return out


def _target(req, project_id):
    user_id = req.GET.get("user_id")
    return {"project_id": project_id, "user_id": user_id or req.context.user_id}, user_id


def show(req, project_id):
    target, user_id = _target(req, project_id)
    req.authorize(P + "show", target)
    limits = quotas.project_limits(req.api, project_id, user_id)
    doc = _document(req, limits, _names(req))
    doc["id"] = project_id
    return 200, {"quota_set": doc}


def detail(req, project_id):
    target, user_id = _target(req, project_id)
    req.authorize(P + "detail", target)
    limits = quotas.project_limits(req.api, project_id, user_id)
    used = quotas.usage(req.api, project_id, user_id)
    doc = _document(req, limits, _names(req), used)
    doc["id"] = project_id
    return 200, {"quota_set": doc}


def defaults(req, project_id):
    req.authorize(P + "defaults", {"project_id": project_id})
    doc = _document(req, quotas.class_limits(req.api), _names(req))
    doc["id"] = project_id
    return 200, {"quota_set": doc}


def update(req, project_id):
    target, user_id = _target(req, project_id)
    req.authorize(P + "update", target)
    body = req.body_json(lambda version: _update_schema(version))["quota_set"]
    force = v.to_bool(body.pop("force", False))
    values = {k: int(val) for k, val in body.items() if k in quotas.RESOURCES + _NETWORK}
    if not force:
        used = quotas.usage(req.api, project_id, user_id)
        for name, limit in values.items():
            if limit >= 0 and used.get(name, 0) > limit:
                raise errors.BadRequest(
                    f"Quota limit {limit} for {name} must be greater than or equal to "
                    f"already used and reserved {used[name]}.")
    if user_id:
        project = quotas.project_limits(req.api, project_id)
        for name, limit in values.items():
            if project[name] >= 0 and (limit < 0 or limit > project[name]):
                raise errors.BadRequest(
                    f"Quota limit {limit} for {name} must be less than or equal to "
                    f"{project[name]}.")
        quotas_db.set_user_limits(req.api.api_db, project_id, user_id, values)
    else:
        quotas_db.set_project_limits(req.api.api_db, project_id, values)
    limits = quotas.project_limits(req.api, project_id, user_id)
    return 200, {"quota_set": _document(req, limits, _names(req))}


def delete(req, project_id):
    target, user_id = _target(req, project_id)
    req.authorize(P + "delete", target)
    quotas_db.delete_limits(req.api.api_db, project_id, user_id)
    return 202, None


def class_show(req, class_name):
    req.authorize(PC + "show", {"quota_class": class_name})
    doc = _document(req, quotas.class_limits(req.api, class_name), _names(req, classes=True))
    doc["id"] = class_name
    return 200, {"quota_class_set": doc}


def class_update(req, class_name):
    req.authorize(PC + "update", {"quota_class": class_name})
    body = req.body_json(lambda version: _update_schema(version, classes=True))
    values = {k: int(val) for k, val in body["quota_class_set"].items()
              if k in quotas.RESOURCES + _NETWORK}
    quotas_db.set_class_limits(req.api.api_db, class_name, values)
    doc = _document(req, quotas.class_limits(req.api, class_name), _names(req, classes=True))
    return 200, {"quota_class_set": doc}


ROUTES = [
    ("GET", "/os-quota-sets/{project_id}", show),
    ("PUT", "/os-quota-sets/{project_id}", update),
    ("DELETE", "/os-quota-sets/{project_id}", delete),
    ("GET", "/os-quota-sets/{project_id}/defaults", defaults),
    ("GET", "/os-quota-sets/{project_id}/detail", detail),
    ("GET", "/os-quota-class-sets/{class_name}", class_show),
    ("PUT", "/os-quota-class-sets/{class_name}", class_update),
]
