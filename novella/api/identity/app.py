"""A minimal Keystone v3 for the all-in-one.

Enough for keystoneauth clients (the `openstack` command, openstacksdk), for
keystonemiddleware in front of Novella's own APIs and for Tempest's dynamic
credentials: version discovery, password authentication with a project
scope, token validation and revocation, the service catalog, and the admin
API of projects, users, roles and role assignments (``admin.py``).
"""
import json
import uuid

import webob
import webob.dec

from novella.api import router as router_mod
import sqlalchemy as sa

from novella.api.identity import admin
from novella.api.identity.store import AuthError, IdentityError, Project

V3 = {"id": "v3.14", "status": "stable", "updated": "2020-04-07T00:00:00Z",
      "media-types": [{"base": "application/json",
                       "type": "application/vnd.openstack.identity-v3+json"}]}


def _json(status, body, headers=None):
    resp = webob.Response(status=status, content_type="application/json", charset="utf-8")
    resp.body = json.dumps(body).encode()
    for k, v in (headers or {}).items():
        resp.headers[k] = v
    return resp


def _error(status, title, message):
    return _json(status, {"error": {"code": status, "title": title, "message": message}})


class IdentityApp:
    """``catalog``: {service type: (service name, public URL)}; ``conf``
    (optional) gives ``[oslo_middleware] max_request_body_size``."""

    def __init__(self, store, catalog, region="RegionOne", conf=None):
        self.store = store
        self.region = region
        self.max_body = router_mod.max_body_size(conf)
        self.router = router_mod.Router(head_as_get=True)
        for method, template, fn in (
                ("GET", "/", self._versions), ("GET", "/v3", self._version),
                ("POST", "/v3/auth/tokens", self._issue), ("GET", "/v3/auth/tokens", self._check),
                ("DELETE", "/v3/auth/tokens", self._revoke),
                ("GET", "/v3/auth/catalog", self._catalog),
                ("GET", "/v3/projects", self._projects),
                ("GET", "/v3/projects/{project_id}", self._project)):
            self.router.add(method, template, fn)
        for method, template, fn in admin.AdminAPI(self).routes():
            self.router.add(method, template, fn)
        self.catalog = [
            {"type": stype, "name": name, "id": uuid.uuid5(uuid.NAMESPACE_URL, stype).hex,
             "endpoints": [{"id": uuid.uuid5(uuid.NAMESPACE_URL, f"{stype}/{iface}").hex,
                            "interface": iface, "region": region, "region_id": region,
                            "url": url} for iface in ("public", "internal", "admin")]}
            for stype, (name, url) in catalog.items()]

    def _base(self, req):
        return req.host_url + req.script_name

    def _v3(self, req):
        return dict(V3, links=[{"rel": "self", "href": self._base(req) + "/v3/"}])

    @webob.dec.wsgify
    def __call__(self, req):
        try:
            fn, args = self.router.match(req.method, router_mod.request_path(req.environ))
            router_mod.read_body(req, self.max_body)
            return fn(req, **args)
        except router_mod.NoRoute:
            return _error(404, "Not Found",
                          f"The resource {router_mod.clip(req.environ.get('PATH_INFO'))} "
                          "could not be found.")
        except IdentityError as exc:
            return _error(exc.code, exc.title, str(exc))
        except router_mod.BadMethod:
            return _error(405, "Method Not Allowed",
                          "The method specified is not allowed for this resource.")
        except Exception as exc:  # noqa: BLE001 - bad input has the API's error shape
            bad = router_mod.input_error(exc)
            if bad is None:
                raise
            title = "Request Entity Too Large" if bad.code == 413 else "Bad Request"
            return _error(bad.code, title, bad.message)

    json = staticmethod(_json)

    @staticmethod
    def empty(status):
        return webob.Response(status=status)

    def _versions(self, req):
        return _json(300, {"versions": {"values": [self._v3(req)]}})

    def _version(self, req):
        return _json(200, {"version": self._v3(req)})

    # -- projects (what clients look a project up by: id, or ?name=) ------------------
    def _project_doc(self, req, project):
        return {"id": project.id, "name": project.name, "description": project.description or "",
                "enabled": project.enabled, "domain_id": "default", "parent_id": "default",
                "is_domain": False, "tags": [], "options": {},
                "links": {"self": self._base(req) + "/v3/projects/" + project.id}}

    def _project(self, req, project_id):
        if self._caller(req) is None:
            return _error(401, "Unauthorized", "The request you have made requires authentication.")
        with self.store.db.session() as s:
            project = s.get(Project, project_id)
            if project is None:
                return _error(404, "Not Found",
                              f"Could not find project: {router_mod.clip(project_id)}.")
            return _json(200, {"project": self._project_doc(req, project)})

    def _projects(self, req):
        if self._caller(req) is None:
            return _error(401, "Unauthorized", "The request you have made requires authentication.")
        q = sa.select(Project)
        if "name" in req.GET:
            q = q.where(Project.name == req.GET["name"])
        with self.store.db.session() as s:
            docs = [self._project_doc(req, p) for p in s.scalars(q)]
        return _json(200, {"projects": docs, "links": {"self": req.url, "next": None,
                                                       "previous": None}})

    def _catalog(self, req):
        if self._caller(req) is None:
            return _error(401, "Unauthorized", "The request you have made requires authentication.")
        return _json(200, {"catalog": self.catalog, "links": {"self": req.url}})

    def _caller(self, req):
        try:
            return self.store.validate(req.headers.get("X-Auth-Token", ""))
        except AuthError:
            return None

    def _issue(self, req):
        try:
            auth = router_mod.loads(req.body)["auth"]
            identity = auth["identity"]
            if "password" not in identity.get("methods", []):
                return _error(401, "Unauthorized", "Only password authentication is supported.")
            user = identity["password"]["user"]
            scope = (auth.get("scope") or {}).get("project") or {}
            for value in (user.get("name"), user.get("id"), user.get("password"),
                          scope.get("name"), scope.get("id")):
                if value is not None and not isinstance(value, str):
                    raise TypeError(value)
        except (router_mod.InputError, KeyError, TypeError, AttributeError):
            return _error(400, "Bad Request", "Malformed authentication request.")
        try:
            token, doc = self.store.authenticate(
                user_name=user.get("name"), user_id=user.get("id"), password=user.get("password"),
                project_name=scope.get("name"), project_id=scope.get("id"))
        except AuthError as exc:
            return _error(401, "Unauthorized", str(exc))
        if "project" in doc and "nocatalog" not in req.GET:
            doc["catalog"] = self.catalog
        return _json(201, {"token": doc}, {"X-Subject-Token": token})

    def _revoke(self, req):
        """DELETE /v3/auth/tokens: the subject token fails validation from now on."""
        if self._caller(req) is None:
            return _error(401, "Unauthorized", "The request you have made requires authentication.")
        try:
            self.store.revoke(req.headers.get("X-Subject-Token", ""))
        except AuthError as exc:
            return _error(404, "Not Found", str(exc))
        return webob.Response(status=204)

    def _check(self, req):
        if self._caller(req) is None:
            return _error(401, "Unauthorized", "The request you have made requires authentication.")
        subject = req.headers.get("X-Subject-Token", "")
        try:
            doc = self.store.validate(subject)
        except AuthError as exc:
            return _error(404, "Not Found", str(exc))
        if "project" in doc and "nocatalog" not in req.GET:
            doc["catalog"] = self.catalog
        if req.method == "HEAD":
            return webob.Response(status=200, headers={"X-Subject-Token": subject})
        return _json(200, {"token": doc}, {"X-Subject-Token": subject})
