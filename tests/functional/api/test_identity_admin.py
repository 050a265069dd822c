"""The embedded identity's admin API (projects, users, roles, grants, domains) and
token revocation, as Tempest's dynamic credentials and the `openstack` command use them."""
import json

import pytest
import sqlalchemy as sa
import webob

from novella.api.identity.app import IdentityApp
from novella.api.identity.store import Assignment, IdentityStore, Project, User


class Identity:
    def __init__(self, tmp_path):
        self.store = IdentityStore(f"sqlite:///{tmp_path}/identity.db")
        self.store.ensure([{"name": "admin", "password": "secret", "project": "admin",
                            "roles": ["admin"]},
                           {"name": "alice", "password": "pw", "project": "demo",
                            "roles": ["member"]}])
        self.app = IdentityApp(self.store, {"compute": ("nova", "http://compute")})
        self.admin = self.token("admin", "secret", "admin")
        self.alice = self.token("alice", "pw", "demo")

    def call(self, method, path, body=None, token=None, headers=None):
        req = webob.Request.blank(path, method=method)
        if token:
            req.headers["X-Auth-Token"] = token
        for k, v in (headers or {}).items():
            req.headers[k] = v
        if body is not None:
            req.body = json.dumps(body).encode()
            req.content_type = "application/json"
        resp = req.get_response(self.app)
        resp.data = json.loads(resp.body) if resp.body else None
        return resp

    def token(self, user, password, project):
        resp = self.call("POST", "/v3/auth/tokens", {"auth": {
            "identity": {"methods": ["password"], "password": {"user": {
                "name": user, "password": password, "domain": {"id": "default"}}}},
            "scope": {"project": {"name": project, "domain": {"id": "default"}}}}})
        assert resp.status_int == 201, resp.body
        return resp.headers["X-Subject-Token"]

    def rows(self, model):
        with self.store.db.session() as s:
            return s.scalars(sa.select(model)).all()


@pytest.fixture
def ident(tmp_path):
    return Identity(tmp_path)


def test_dynamic_credentials_flow(ident):
    """What Tempest does per test class: project, user, grant, token, then clean up."""
    domain = ident.call("GET", "/v3/domains?name=Default", token=ident.admin).data["domains"]
    assert [d["id"] for d in domain] == ["default"]
    project = ident.call("POST", "/v3/projects", {"project": {
        "name": "tempest-p1", "description": "d", "domain_id": "default"}}, ident.admin)
    assert project.status_int == 201
    pid = project.data["project"]["id"]
    user = ident.call("POST", "/v3/users", {"user": {
        "name": "tempest-u1", "password": "pw1", "domain_id": "default",
        "email": "u1@example.org"}}, ident.admin)
    assert user.status_int == 201 and user.data["user"]["email"] == "u1@example.org"
    uid = user.data["user"]["id"]
    roles = {r["name"]: r["id"] for r in
             ident.call("GET", "/v3/roles", token=ident.admin).data["roles"]}
    assert {"admin", "manager", "member", "reader", "service"} <= set(roles)
    grant = f"/v3/projects/{pid}/users/{uid}/roles/{roles['member']}"
    assert ident.call("PUT", grant, token=ident.admin).status_int == 204
    assert ident.call("GET", grant, token=ident.admin).status_int == 204
    assert [(a.user_id, a.project_id, a.role_id) for a in ident.rows(Assignment)
            if a.user_id == uid] == [(uid, pid, roles["member"])]
    listed = ident.call("GET", f"/v3/role_assignments?user.id={uid}&include_names=1",
                        token=ident.admin).data["role_assignments"]
    assert [(a["role"]["name"], a["scope"]["project"]["name"]) for a in listed] == \
        [("member", "tempest-p1")]
    token = ident.token("tempest-u1", "pw1", "tempest-p1")
    shown = ident.call("GET", "/v3/auth/tokens", token=ident.admin,
                       headers={"X-Subject-Token": token}).data["token"]
    assert {r["name"] for r in shown["roles"]} == {"member", "reader"}
    # Clean up: the revoked grant, user and project are gone, and so is the token.
    assert ident.call("DELETE", grant, token=ident.admin).status_int == 204
    assert ident.call("DELETE", f"/v3/users/{uid}", token=ident.admin).status_int == 204
    assert ident.call("DELETE", f"/v3/projects/{pid}", token=ident.admin).status_int == 204
    assert [u.name for u in ident.rows(User)] == ["admin", "alice"]
    assert "tempest-p1" not in [p.name for p in ident.rows(Project)]
    assert ident.call("GET", "/v3/auth/tokens", token=ident.admin,
                      headers={"X-Subject-Token": token}).status_int == 404


def test_revoked_token_fails_validation(ident):
    token = ident.token("alice", "pw", "demo")
    assert ident.call("GET", "/v3/auth/catalog", token=token).status_int == 200
    assert ident.call("DELETE", "/v3/auth/tokens", token=token,
                      headers={"X-Subject-Token": token}).status_int == 204
    assert ident.call("GET", "/v3/auth/catalog", token=token).status_int == 401
    assert ident.call("GET", "/v3/auth/tokens", token=ident.admin,
                      headers={"X-Subject-Token": token}).status_int == 404
    with pytest.raises(Exception):
        ident.store.validate(token)
    # Another token of the same user still works.
    assert ident.call("GET", "/v3/auth/catalog", token=ident.alice).status_int == 200


def test_refusals_change_nothing(ident):
    before = {m.__tablename__: len(ident.rows(m)) for m in (Project, User, Assignment)}
    demo = ident.store.project_id("demo")
    for method, path, body, token, code in [
            ("POST", "/v3/projects", {"project": {"name": "x"}}, ident.alice, 403),
            ("POST", "/v3/projects", {"project": {"name": "x"}}, None, 401),
            ("POST", "/v3/projects", {"project": {"name": "demo"}}, ident.admin, 409),
            ("POST", "/v3/projects", {"project": {"name": ""}}, ident.admin, 400),
            ("POST", "/v3/projects", {"project": {"name": "x", "domain_id": "d2"}},
             ident.admin, 404),
            ("POST", "/v3/users", {"user": {"name": "alice", "password": "p"}}, ident.admin,
             409),
            ("POST", "/v3/users", {"user": {"name": "bob", "enabled": "yes"}}, ident.admin,
             400),
            ("POST", "/v3/users", {"name": "bob"}, ident.admin, 400),
            ("PUT", f"/v3/projects/{demo}/users/nope/roles/nope", None, ident.admin, 404),
            ("DELETE", "/v3/users/nope", None, ident.admin, 404),
            ("GET", "/v3/users", None, ident.alice, 403),
            ("GET", "/v3/domains/other", None, ident.admin, 404)]:
        resp = ident.call(method, path, body, token)
        assert resp.status_int == code, (method, path, resp.body)
        assert resp.data["error"]["code"] == code and resp.data["error"]["title"]
    assert {m.__tablename__: len(ident.rows(m)) for m in (Project, User, Assignment)} == before
