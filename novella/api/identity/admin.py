"""The identity admin API of the embedded identity service (Keystone v3's shapes):

    /v3/projects[/{id}]                 POST, PATCH, DELETE (GET: app.py)
    /v3/users[/{id}]                    GET, POST, PATCH, DELETE; /v3/users/{id}/projects
    /v3/roles[/{id}]                    GET, POST, DELETE
    /v3/projects/{p}/users/{u}/roles[/{r}]   list; PUT grant, HEAD/GET check, DELETE revoke
    /v3/role_assignments                ?user.id= &scope.project.id= &role.id= &include_names
    /v3/domains[/{id}]                  the one domain, ``default`` (read only)

Changes need the admin role; a user may read itself, its projects and the roles
(what the ``openstack`` command looks names up with). Errors are Keystone's:
``{"error": {"code", "title", "message"}}``.
"""
from novella.api import router as router_mod
from novella.api.identity.store import IdentityError

DOMAIN = {"id": "default", "name": "Default", "description": "The default domain",
          "enabled": True, "tags": [], "options": {}}


class Refused(IdentityError):
    def __init__(self, code, title, message):
        super().__init__(message)
        self.code, self.title = code, title


def _body(req, key):
    try:
        body = router_mod.loads(req.body) if req.body else None
    except router_mod.InputError as exc:
        raise Refused(400, "Bad Request", exc.message)
    if not isinstance(body, dict) or not isinstance(body.get(key), dict):
        raise Refused(400, "Bad Request", f"Invalid input for field '{key}': a {key} object "
                                          "is required.")
    return body[key]


def _string(doc, key, required=False):
    value = doc.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > 255:
        raise Refused(400, "Bad Request", f"Invalid input for field '{key}': a non-empty "
                                          "string of at most 255 characters is required.")
    return value


def _enabled(doc):
    value = doc.get("enabled", True)
    if not isinstance(value, bool):
        raise Refused(400, "Bad Request", f"Invalid input for field 'enabled': {value!r} is "
                                          "not of type 'boolean'.")
    return value


def _domain(doc):
    if doc.get("domain_id", "default") != "default":
        raise Refused(404, "Not Found", f"Could not find domain: {doc['domain_id']}.")


class AdminAPI:
    """Handlers over ``app`` (an IdentityApp: its store, caller check and links)."""

    def __init__(self, app):
        self.app = app
        self.store = app.store

    def routes(self):
        return [
            ("POST", "/v3/projects", self.create_project),
            ("PATCH", "/v3/projects/{project_id}", self.update_project),
            ("DELETE", "/v3/projects/{project_id}", self.delete_project),
            ("GET", "/v3/users", self.list_users),
            ("POST", "/v3/users", self.create_user),
            ("GET", "/v3/users/{user_id}", self.show_user),
            ("PATCH", "/v3/users/{user_id}", self.update_user),
            ("DELETE", "/v3/users/{user_id}", self.delete_user),
            ("GET", "/v3/users/{user_id}/projects", self.user_projects),
            ("GET", "/v3/roles", self.list_roles),
            ("POST", "/v3/roles", self.create_role),
            ("GET", "/v3/roles/{role_id}", self.show_role),
            ("DELETE", "/v3/roles/{role_id}", self.delete_role),
            ("GET", "/v3/projects/{project_id}/users/{user_id}/roles", self.grants),
            ("PUT", "/v3/projects/{project_id}/users/{user_id}/roles/{role_id}", self.grant),
            ("GET", "/v3/projects/{project_id}/users/{user_id}/roles/{role_id}", self.check),
            ("DELETE", "/v3/projects/{project_id}/users/{user_id}/roles/{role_id}",
             self.revoke),
            ("GET", "/v3/role_assignments", self.role_assignments),
            ("GET", "/v3/domains", self.list_domains),
            ("GET", "/v3/domains/{domain_id}", self.show_domain),
        ]

    # --- who may -----------------------------------------------------------------------
    def _caller(self, req):
        caller = self.app._caller(req)
        if caller is None:
            raise Refused(401, "Unauthorized",
                          "The request you have made requires authentication.")
        return caller

    def _admin(self, req, action):
        caller = self._caller(req)
        if "admin" not in {r["name"] for r in caller["roles"]}:
            raise Refused(403, "Forbidden",
                          f"You are not authorized to perform the requested action: {action}.")
        return caller

    def _admin_or_self(self, req, action, user_id):
        caller = self._caller(req)
        if caller["user"]["id"] != user_id:
            self._admin(req, action)

    # --- documents ---------------------------------------------------------------------------
    def _link(self, req, *parts):
        return {"self": "/".join([self.app._base(req) + "/v3"] + list(parts))}

    def _project(self, req, p):
        return {**p, "domain_id": "default", "parent_id": "default", "is_domain": False,
                "tags": [], "options": {}, "links": self._link(req, "projects", p["id"])}

    def _user(self, req, u):
        doc = {**u, "domain_id": "default", "password_expires_at": None, "options": {},
               "links": self._link(req, "users", u["id"])}
        if doc["default_project_id"] is None:
            del doc["default_project_id"]
        return doc

    def _role(self, req, r):
        return {**r, "domain_id": None, "description": None, "options": {},
                "links": self._link(req, "roles", r["id"])}

    def _list(self, req, key, items):
        return self.app.json(200, {key: items, "links": {"self": req.url, "next": None,
                                                        "previous": None}})

    # --- projects ----------------------------------------------------------------------------
    def create_project(self, req):
        self._admin(req, "identity:create_project")
        doc = _body(req, "project")
        _domain(doc)
        project = self.store.create_project(_string(doc, "name", required=True),
                                            doc.get("description") or "", _enabled(doc))
        return self.app.json(201, {"project": self._project(req, project)})

    def update_project(self, req, project_id):
        self._admin(req, "identity:update_project")
        doc = _body(req, "project")
        changes = {k: doc[k] for k in ("name", "description", "enabled") if k in doc}
        if "name" in changes:
            _string(changes, "name", required=True)
        if "enabled" in changes:
            _enabled(changes)
        project = self.store.update_project(project_id, changes)
        return self.app.json(200, {"project": self._project(req, project)})

    def delete_project(self, req, project_id):
        self._admin(req, "identity:delete_project")
        self.store.delete_project(project_id)
        return self.app.empty(204)

    # --- users ---------------------------------------------------------------------------------
    def list_users(self, req):
        self._admin(req, "identity:list_users")
        users = self.store.list_users(name=req.GET.get("name"))
        return self._list(req, "users", [self._user(req, u) for u in users])

    def create_user(self, req):
        self._admin(req, "identity:create_user")
        doc = _body(req, "user")
        _domain(doc)
        password = doc.get("password")
        if password is not None and not isinstance(password, str):
            raise Refused(400, "Bad Request", "Invalid input for field 'password'.")
        extra = {k: v for k, v in doc.items()
                 if k not in ("name", "password", "enabled", "default_project_id",
                              "domain_id", "id")}
        user = self.store.create_user(_string(doc, "name", required=True), password,
                                      doc.get("default_project_id"), _enabled(doc), extra)
        return self.app.json(201, {"user": self._user(req, user)})

    def show_user(self, req, user_id):
        self._admin_or_self(req, "identity:get_user", user_id)
        return self.app.json(200, {"user": self._user(req, self.store.get_user(user_id))})

    def update_user(self, req, user_id):
        self._admin(req, "identity:update_user")
        doc = _body(req, "user")
        if "name" in doc:
            _string(doc, "name", required=True)
        if "enabled" in doc:
            _enabled(doc)
        doc.pop("id", None)
        doc.pop("domain_id", None)
        user = self.store.update_user(user_id, doc)
        return self.app.json(200, {"user": self._user(req, user)})

    def delete_user(self, req, user_id):
        self._admin(req, "identity:delete_user")
        self.store.delete_user(user_id)
        return self.app.empty(204)

    def user_projects(self, req, user_id):
        self._admin_or_self(req, "identity:list_user_projects", user_id)
        self.store.get_user(user_id)
        projects = self.store.list_projects(user_id=user_id)
        return self._list(req, "projects", [self._project(req, p) for p in projects])

    # --- roles ---------------------------------------------------------------------------------
    def list_roles(self, req):
        self._caller(req)
        roles = self.store.list_roles(name=req.GET.get("name"))
        return self._list(req, "roles", [self._role(req, r) for r in roles])

    def create_role(self, req):
        self._admin(req, "identity:create_role")
        doc = _body(req, "role")
        role = self.store.create_role(_string(doc, "name", required=True))
        return self.app.json(201, {"role": self._role(req, role)})

    def show_role(self, req, role_id):
        self._caller(req)
        return self.app.json(200, {"role": self._role(req, self.store.get_role(role_id))})

    def delete_role(self, req, role_id):
        self._admin(req, "identity:delete_role")
        self.store.delete_role(role_id)
        return self.app.empty(204)

    # --- role assignments -------------------------------------------------------------------------
    def grants(self, req, project_id, user_id):
        self._admin_or_self(req, "identity:list_grants", user_id)
        self.store.get_project(project_id)
        self.store.get_user(user_id)
        roles = [{"id": rid, "name": name} for _u, _p, (rid, name) in
                 self.store.assignments(user_id=user_id, project_id=project_id)]
        return self._list(req, "roles", [self._role(req, r) for r in roles])

    def grant(self, req, project_id, user_id, role_id):
        self._admin(req, "identity:create_grant")
        self.store.grant(project_id, user_id, role_id)
        return self.app.empty(204)

    def check(self, req, project_id, user_id, role_id):
        self._admin_or_self(req, "identity:check_grant", user_id)
        if not self.store.has_grant(project_id, user_id, role_id):
            raise Refused(404, "Not Found", f"Could not find role assignment with role: "
                                            f"{role_id}, user or group: {user_id}, project, "
                                            f"domain, or system: {project_id}.")
        return self.app.empty(204)

    def revoke(self, req, project_id, user_id, role_id):
        self._admin(req, "identity:revoke_grant")
        self.store.revoke_grant(project_id, user_id, role_id)
        return self.app.empty(204)

    def role_assignments(self, req):
        caller = self._caller(req)
        user_id = req.GET.get("user.id")
        if user_id != caller["user"]["id"]:
            self._admin(req, "identity:list_role_assignments")
        names = "include_names" in req.GET and req.GET["include_names"].lower() not in (
            "0", "false", "no")
        out = []
        for (uid, uname), (pid, pname), (rid, rname) in self.store.assignments(
                user_id=user_id, project_id=req.GET.get("scope.project.id"),
                role_id=req.GET.get("role.id")):
            user, project, role = {"id": uid}, {"id": pid}, {"id": rid}
            if names:
                user.update(name=uname, domain={"id": "default", "name": "Default"})
                project.update(name=pname, domain={"id": "default", "name": "Default"})
                role["name"] = rname
            out.append({"user": user, "scope": {"project": project}, "role": role,
                        "links": {"assignment": self._link(
                            req, "projects", pid, "users", uid, "roles", rid)["self"]}})
        return self.app.json(200, {"role_assignments": out,
                                   "links": {"self": req.url, "next": None, "previous": None}})

    # --- domains -------------------------------------------------------------------------------
    def _domain_doc(self, req):
        return {**DOMAIN, "links": self._link(req, "domains", "default")}

    def list_domains(self, req):
        self._caller(req)
        wanted = req.GET.get("name")
        domains = [] if wanted not in (None, "Default") else [self._domain_doc(req)]
        return self._list(req, "domains", domains)

    def show_domain(self, req, domain_id):
        self._caller(req)
        if domain_id != "default":
            raise Refused(404, "Not Found", f"Could not find domain: {domain_id}.")
        return self.app.json(200, {"domain": self._domain_doc(req)})
