"""A minimal Keystone v3 for the all-in-one.

Enough for keystoneauth clients (the `openstack` command, openstacksdk) and
for keystonemiddleware in front of Novella's own APIs: version discovery,
password authentication with a project scope, token validation and the
service catalog.
"""
import json
import uuid

import webob
import webob.dec

from novella.api.identity.store import AuthError

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
    """``catalog``: {service type: (service name, public URL)}."""

    def __init__(self, store, catalog, region="RegionOne"):
        self.store = store
        self.region = region
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
        path = req.path_info.rstrip("/")
        if path == "" and req.method == "GET":
            return _json(300, {"versions": {"values": [self._v3(req)]}})
        if path == "/v3" and req.method == "GET":
            return _json(200, {"version": self._v3(req)})
        if path == "/v3/auth/tokens":
            if req.method == "POST":
                return self._issue(req)
            if req.method in ("GET", "HEAD"):
                return self._check(req)
            if req.method == "DELETE":
                return webob.Response(status=204)
        if path == "/v3/auth/catalog" and req.method == "GET":
            if self._caller(req) is None:
                return _error(401, "Unauthorized", "The request you have made requires authentication.")
            return _json(200, {"catalog": self.catalog, "links": {"self": req.url}})
        return _error(404, "Not Found", f"The resource {req.path} could not be found.")

    def _caller(self, req):
        try:
            return self.store.validate(req.headers.get("X-Auth-Token", ""))
        except AuthError:
            return None

    def _issue(self, req):
        try:
            auth = req.json_body["auth"]
            identity = auth["identity"]
            if "password" not in identity.get("methods", []):
                return _error(401, "Unauthorized", "Only password authentication is supported.")
            user = identity["password"]["user"]
            scope = (auth.get("scope") or {}).get("project") or {}
        except (ValueError, KeyError, TypeError):
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
