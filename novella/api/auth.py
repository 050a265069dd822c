"""Authentication shared by Novella's HTTP APIs.

``[api] auth_strategy`` chooses how a request proves who it is:

- ``noauth2``: the ``X-Auth-Token`` header is trusted as ``user:project``
  (``user`` alone means the project of the same name); the user ``admin`` is
  an administrator. ``X-Roles`` overrides the roles. For tests and the
  all-in-one only.
- ``keystone``: keystonemiddleware's ``auth_token`` filter validates the token
  and sets the identity headers, read from ``[keystone_authtoken]``.

Either way the wrapped application finds a ``novella.context.RequestContext``
in ``environ["novella.context"]``. Paths listed as public (the versions
documents) pass without a token.
"""
import json

from novella.context import RequestContext

ENV_CONTEXT = "novella.context"


def _unauthorized(start_response):
    body = json.dumps({"error": {"code": 401, "title": "Unauthorized",
                                 "message": "The request you have made requires authentication."}}).encode()
    start_response("401 Unauthorized", [("Content-Type", "application/json"),
                                        ("Content-Length", str(len(body))),
                                        ("WWW-Authenticate", "Keystone uri='local'")])
    return [body]


def _split(value):
    return [v.strip() for v in (value or "").split(",") if v.strip()]


def context_from_headers(environ):
    """A RequestContext from the identity headers keystonemiddleware sets."""
    get = environ.get
    if get("HTTP_X_IDENTITY_STATUS", "Confirmed") != "Confirmed":
        return None
    user_id = get("HTTP_X_USER_ID") or get("HTTP_X_USER")
    if not user_id:
        return None
    roles = _split(get("HTTP_X_ROLES") or get("HTTP_X_ROLE"))
    return RequestContext(
        user_id=user_id,
        project_id=get("HTTP_X_PROJECT_ID") or get("HTTP_X_TENANT_ID") or get("HTTP_X_TENANT"),
        roles=roles, is_admin="admin" in roles,
        auth_token=get("HTTP_X_AUTH_TOKEN"),
        system_scope=get("HTTP_OPENSTACK_SYSTEM_SCOPE"),
        user_domain_id=get("HTTP_X_USER_DOMAIN_ID"),
        project_domain_id=get("HTTP_X_PROJECT_DOMAIN_ID"),
        global_request_id=get("HTTP_X_OPENSTACK_REQUEST_ID"))


def context_from_noauth_token(environ):
    token = environ.get("HTTP_X_AUTH_TOKEN")
    if not token:
        return None
    user_id, _sep, project_id = token.partition(":")
    project_id = project_id or user_id
    is_admin = user_id == "admin"
    if environ.get("HTTP_X_ROLES"):
        roles = _split(environ["HTTP_X_ROLES"])
    else:
        # Every authenticated user reads and writes its own project, as
        # the reference's default roles (reader < member < admin) imply.
        roles = ["admin", "member", "reader"] if is_admin else ["member", "reader"]
    return RequestContext(user_id=user_id, project_id=project_id, roles=roles,
                          is_admin="admin" in roles, auth_token=token,
                          global_request_id=environ.get("HTTP_X_OPENSTACK_REQUEST_ID"))


class AuthMiddleware:
    """Build the request context for ``app``; answer 401 without one."""

    def __init__(self, app, conf, public_paths=("/", "")):
        self.app = app
        self.public_paths = set(public_paths)
        self.strategy = conf.api.auth_strategy
        self.protected = self._context_app
        if self.strategy == "keystone":
            from keystonemiddleware import auth_token
            self.protected = auth_token.AuthProtocol(self._context_app,
                                                     {"oslo_config_config": conf})

    def _is_public(self, environ):
        path = environ.get("PATH_INFO", "")
        return path in self.public_paths or path.rstrip("/") in self.public_paths

    def _context_app(self, environ, start_response):
        if self.strategy == "noauth2":
            ctx = context_from_noauth_token(environ)
        else:
            ctx = context_from_headers(environ)
        if ctx is None:
            return _unauthorized(start_response)
        environ[ENV_CONTEXT] = ctx
        return self.app(environ, start_response)

    def __call__(self, environ, start_response):
        if self._is_public(environ):
            environ.setdefault(ENV_CONTEXT, None)
            return self.app(environ, start_response)
        return self.protected(environ, start_response)
