"""Authentication middleware, request context and policy enforcement."""
import webob
import webob.dec
import webob.exc
from oslo_context import context as oslo_context
from oslo_middleware import request_id
from oslo_policy import policy

from novella.placement import base
from novella import policies
from novella.policies import placement as rules


class NoAuth:
    """``noauth2``: the token names the user (``user[:project]``); ``admin`` is admin."""

    def __init__(self, app):
        self.app = app

    @webob.dec.wsgify
    def __call__(self, req):
        if req.environ["PATH_INFO"] in ("/", ""):
            return self.app
        if "X-Auth-Token" not in req.headers:
            return webob.exc.HTTPUnauthorized()
        user_id, _sep, project_id = req.headers["X-Auth-Token"].partition(":")
        project_id = project_id or user_id
        if "HTTP_X_ROLES" in req.environ:
            roles = req.headers["X_ROLES"].split(",")
        elif user_id == "admin":
            roles = ["admin"]
        else:
            roles = []
        req.headers["X_USER_ID"] = user_id
        if not req.headers.get("OPENSTACK_SYSTEM_SCOPE"):
            req.headers["X_TENANT_ID"] = project_id
        req.headers["X_ROLES"] = ",".join(roles)
        return self.app


def keystone(app, conf):
    """keystonemiddleware's auth_token in front of everything but the root."""
    from keystonemiddleware import auth_token
    protocol = auth_token.AuthProtocol(app, {"oslo_config_config": conf})

    def middleware(environ, start_response):
        if environ["PATH_INFO"] in ("/", ""):
            return app(environ, start_response)
        return protocol(environ, start_response)
    return middleware


class Context:
    """Build the request context (and request id) from the identity headers."""

    def __init__(self, app, enforcer):
        self.app = app
        self.enforcer = enforcer

    @webob.dec.wsgify
    def __call__(self, req):
        req_id = req.environ.get(request_id.ENV_REQUEST_ID)
        ctx = oslo_context.RequestContext.from_environ(req.environ, request_id=req_id)
        req.environ[request_id.ENV_REQUEST_ID] = ctx.request_id
        if ctx.user_id is None and req.environ["PATH_INFO"] not in ("/", ""):
            return webob.exc.HTTPUnauthorized()
        req.environ["placement.context"] = ctx
        req.environ["placement.policy"] = self.authorize
        resp = req.get_response(self.app)
        resp.headers[request_id.HTTP_RESP_HEADER_REQUEST_ID] = ctx.request_id
        return resp

    def authorize(self, ctx, action, target=None):
        if target is None:
            target = {"project_id": ctx.project_id, "user_id": ctx.user_id}
        try:
            self.enforcer.authorize(action, target, ctx, do_raise=True)
        except (policy.PolicyNotAuthorized, policy.InvalidScope):
            raise base.forbidden("Policy does not allow %s to be performed." % action)


def make_enforcer(conf):
    enforcer = policies.make_enforcer(conf, rules.list_rules())
    enforcer.suppress_default_change_warnings = True
    enforcer.suppress_deprecation_warnings = True
    enforcer.load_rules()
    return enforcer

