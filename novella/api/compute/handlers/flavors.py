"""/flavors with extra specs (os-extra_specs) and access lists (os-flavor-access)."""
import re
import uuid as uuid_mod

from novella.api.compute import common, errors, validation
from novella.api.router import clip
from novella.api.compute.schemas import flavors as schemas
from novella.db import flavors as flavors_db

P = "os_compute_api:os-flavor-"
SORT_KEYS = ("created_at", "description", "disabled", "ephemeral_gb", "flavorid", "id",
             "is_public", "memory_mb", "name", "root_gb", "rxtx_factor", "swap",
             "updated_at", "vcpu_weight", "vcpus")


def view(req, fl, detail=True):
    out = {"id": fl.flavorid, "name": fl.name, "links": req.links("flavors", fl.flavorid)}
    if req.at_least("2.55"):
        out["description"] = fl.description
    if not detail:
        return out
    out.update({"ram": fl.memory_mb, "disk": fl.root_gb, "vcpus": fl.vcpus,
                "OS-FLV-EXT-DATA:ephemeral": fl.ephemeral_gb,
                "OS-FLV-DISABLED:disabled": fl.disabled,
                "swap": fl.swap if (fl.swap or req.at_least("2.75")) else "",
                "rxtx_factor": fl.rxtx_factor,
                "os-flavor-access:is_public": fl.is_public})
    if req.at_least("2.102"):  # both deprecated fields are gone
        del out["OS-FLV-DISABLED:disabled"], out["rxtx_factor"]
    if req.at_least("2.61") and req.can(P + "extra-specs:index"):
        out["extra_specs"] = {e.key: e.value for e in fl.extra_specs}
    return out


def _visible(req, fl):
    return fl.is_public or req.is_admin() or \
        req.context.project_id in {p.project_id for p in fl.projects}


def _found(req, flavor_id, fl, check_access=True):
    """The flavor read, else 404 (also, ``check_access``, for one the caller may not use)."""
    if fl is None or (check_access and not _visible(req, fl)):
        raise errors.NotFound(f"Flavor {flavor_id} could not be found.")
    return fl


def _get(req, flavor_id):
    return _found(req, flavor_id, flavors_db.get(req.api.api_db, flavor_id))


def _exists(req, flavor_id):
    """A ``check`` for ``flavors_db``'s changes: 404 when there is no such flavor."""
    return lambda fl: _found(req, flavor_id, fl, check_access=False)


_LIST_QUERY = ("limit", "marker", "is_public", "minRam", "minDisk", "sort_key", "sort_dir")


def _list(req, detail):
    # 2.75 refuses unknown parameters; 2.102 adds the name filter.
    common.check_query(req, _LIST_QUERY + (("name",) if req.at_least("2.102") else ()),
                       since="2.75")
    limit, marker = common.limit_and_marker(req)
    sort_key = req.GET.get("sort_key", "flavorid")
    sort_dir = req.GET.get("sort_dir", "asc")
    if sort_key not in SORT_KEYS or sort_dir not in ("asc", "desc") or (
            sort_key == "rxtx_factor" and req.at_least("2.102")):
        raise errors.BadRequest("Invalid sort_key or sort_dir")
    query = {"sort_key": sort_key, "sort_dir": sort_dir}
    is_public = req.GET.get("is_public")
    if not req.is_admin():
        query["project_id"] = req.context.project_id
    elif is_public is None:
        query["public"] = True
    elif is_public.lower() != "none":
        query["public"] = validation.to_bool(is_public)
    for param, key in (("minRam", "min_ram"), ("minDisk", "min_disk")):
        if req.GET.get(param):
            try:
                query[key] = common.db_int(req.GET[param])
            except ValueError:
                raise errors.BadRequest(f"Invalid {param} filter [{clip(req.GET[param])}]")
    if "name" in req.GET:  # a regular expression, as a server list's name
        try:
            re.compile(req.GET["name"])
        except re.error:
            raise errors.BadRequest("Invalid input for query parameters name.")
        query["name"] = req.GET["name"]
    found = flavors_db.page(req.api.api_db, limit, marker, **query)
    if found is None:
        raise errors.BadRequest(f"marker [{marker}] not found")
    items = [view(req, fl, detail) for fl in found]
    body = {"flavors": items}
    links = common.next_link(req, ["flavors"] + (["detail"] if detail else []), items, limit)
    if links:
        body["flavors_links"] = links
    return 200, body


def index(req):
    return _list(req, False)


def detail(req):
    return _list(req, True)


def show(req, flavor_id):
    return 200, {"flavor": view(req, _get(req, flavor_id))}


def create(req):
    req.authorize(P + "manage:create")
    body = req.body_json(schemas.create)["flavor"]
    flavorid = body.get("id")
    flavorid = str(uuid_mod.uuid4()) if flavorid in (None, "", "auto") else str(flavorid).strip()
    name = body["name"].strip()
    is_public = validation.to_bool(body.get("os-flavor-access:is_public", True))
    try:
        fl = flavors_db.add(
            req.api.api_db, flavorid=flavorid, name=name, memory_mb=int(body["ram"]),
            vcpus=int(body["vcpus"]), root_gb=int(body["disk"]),
            ephemeral_gb=int(body.get("OS-FLV-EXT-DATA:ephemeral", 0) or 0),
            swap=int(body.get("swap") or 0),
            rxtx_factor=float(body.get("rxtx_factor", 1.0)),  # gone at 2.102
            is_public=is_public, description=body.get("description"))
    except flavors_db.Duplicate as exc:
        raise errors.Conflict(f"Flavor with {exc.what} {name if exc.what == 'name' else flavorid} "
                              "already exists.")
    return 200, {"flavor": view(req, fl)}


def update(req, flavor_id):
    if not req.at_least("2.55"):
        raise errors.MethodNotAllowed("The method specified is not allowed for this resource.")
    req.authorize(P + "manage:update")
    body = req.body_json(schemas.update)
    fl = flavors_db.set_description(req.api.api_db, flavor_id, body["flavor"]["description"],
                                    _exists(req, flavor_id))
    return 200, {"flavor": view(req, fl)}


def delete(req, flavor_id):
    req.authorize(P + "manage:delete")
    flavors_db.delete(req.api.api_db, flavor_id, _exists(req, flavor_id))
    return 202, None


# --- extra specs --------------------------------------------------------------------------
def specs_index(req, flavor_id):
    req.authorize(P + "extra-specs:index")
    fl = _get(req, flavor_id)
    return 200, {"extra_specs": {e.key: e.value for e in fl.extra_specs}}


def _spec_text(value):
    return str(value).lower() if isinstance(value, bool) else str(value)


def specs_create(req, flavor_id):
    req.authorize(P + "extra-specs:create")
    body = req.body_json(schemas.extra_specs_create)
    flavors_db.set_specs(req.api.api_db, flavor_id,
                         {k: _spec_text(v) for k, v in body["extra_specs"].items()},
                         _exists(req, flavor_id))
    return 200, {"extra_specs": {k: _spec_text(v) for k, v in body["extra_specs"].items()}}


def specs_show(req, flavor_id, key):
    req.authorize(P + "extra-specs:show")
    for e in _get(req, flavor_id).extra_specs:
        if e.key == key:
            return 200, {key: e.value}
    raise errors.NotFound(f"Flavor {flavor_id} has no extra specs with key {key}.")


def specs_update(req, flavor_id, key):
    req.authorize(P + "extra-specs:update")
    body = req.body_json(schemas.extra_spec_update)
    if key not in body:
        raise errors.BadRequest("Request body and URI mismatch")
    flavors_db.set_specs(req.api.api_db, flavor_id, {k: _spec_text(v) for k, v in body.items()},
                         _exists(req, flavor_id))
    return 200, {key: _spec_text(body[key])}


def specs_delete(req, flavor_id, key):
    req.authorize(P + "extra-specs:delete")
    if not flavors_db.delete_spec(req.api.api_db, flavor_id, key, _exists(req, flavor_id)):
        raise errors.NotFound(f"Flavor {flavor_id} has no extra specs with key {key}.")
    return 200, None


# --- access ---------------------------------------------------------------------------------
def _access(fl):
    return {"flavor_access": [{"flavor_id": fl.flavorid, "tenant_id": p.project_id}
                              for p in sorted(fl.projects, key=lambda p: p.id)]}


def access_index(req, flavor_id):
    req.authorize(P + "access")
    fl = _found(req, flavor_id, flavors_db.get(req.api.api_db, flavor_id), check_access=False)
    if fl.is_public:
        raise errors.NotFound("Access list not available for public flavors.")
    return 200, _access(fl)


def action(req, flavor_id):
    body = req.body_json()
    if isinstance(body, dict) and "addTenantAccess" in body:
        req.authorize(P + "access:add_tenant_access")
        req.body_json(schemas.add_tenant)
        tenant = body["addTenantAccess"]["tenant"]
        def check(fl):
            _found(req, flavor_id, fl, check_access=False)
            if fl.is_public:
                raise errors.Conflict("Can not add access to a public flavor.")
            if tenant in {p.project_id for p in fl.projects}:
                raise errors.Conflict(f"Flavor access already exists for flavor {flavor_id} "
                                      f"and project {tenant} combination.")
        return 200, _access(flavors_db.share(req.api.api_db, flavor_id, tenant, check))
    if isinstance(body, dict) and "removeTenantAccess" in body:
        req.authorize(P + "access:remove_tenant_access")
        req.body_json(schemas.remove_tenant)
        tenant = body["removeTenantAccess"]["tenant"]
        fl = flavors_db.unshare(req.api.api_db, flavor_id, tenant, _exists(req, flavor_id))
        if fl is None:
            raise errors.NotFound(f"Flavor access not found for {flavor_id} / {tenant} combination.")
        return 200, _access(fl)
    name = next(iter(body), None) if isinstance(body, dict) else None
    raise errors.BadRequest(f"There is no such action: {name}")


ROUTES = [
    ("GET", "/flavors", index),
    ("POST", "/flavors", create),
    ("GET", "/flavors/detail", detail),
    ("GET", "/flavors/{flavor_id}", show),
    ("PUT", "/flavors/{flavor_id}", update),
    ("DELETE", "/flavors/{flavor_id}", delete),
    ("POST", "/flavors/{flavor_id}/action", action),
    ("GET", "/flavors/{flavor_id}/os-flavor-access", access_index),
    ("GET", "/flavors/{flavor_id}/os-extra_specs", specs_index),
    ("POST", "/flavors/{flavor_id}/os-extra_specs", specs_create),
    ("GET", "/flavors/{flavor_id}/os-extra_specs/{key}", specs_show),
    ("PUT", "/flavors/{flavor_id}/os-extra_specs/{key}", specs_update),
    ("DELETE", "/flavors/{flavor_id}/os-extra_specs/{key}", specs_delete),
]
