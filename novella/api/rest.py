"""A small WSGI frame for the image, network and volume APIs.

Each of those APIs is a list of routes ``(method, template, function)``; a
function receives the request and the path variables and returns
``(status, body[, headers])`` where body is JSON-able, bytes or None. Errors
raised by the embedded services carry an HTTP ``code`` and become that
status; each API chooses the shape of its error bodies (JSON-able, or a str
sent as plain text).

    app = rest.make_app(conf, routes, error_body, public_paths=("/",))
"""
import json
import logging

import webob

from novella.api import auth, router as router_mod

LOG = logging.getLogger(__name__)

PLAIN = "text/plain; charset=UTF-8"
TITLES = {400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
          405: "Method Not Allowed", 409: "Conflict", 413: "Request Entity Too Large",
          415: "Unsupported Media Type", 500: "Internal Server Error"}


class HTTPError(Exception):
    def __init__(self, code, message, kind=None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.kind = kind   # the error type name some APIs report (e.g. NetworkNotFound)


def not_found(message, kind=None):
    return HTTPError(404, message, kind)


def bad_request(message, kind=None):
    return HTTPError(400, message, kind)


class Request(webob.Request):
    @property
    def context(self):
        return self.environ.get(auth.ENV_CONTEXT)

    def is_admin(self):
        ctxt = self.context
        return ctxt is not None and ctxt.is_admin

    def json(self, required=True):
        if not self.body:
            if required:
                raise bad_request("The request body is missing.")
            return {}
        try:
            return router_mod.loads(self.body)
        except router_mod.InputError as exc:
            raise bad_request(f"Malformed request body: {exc.message}")

    def field(self, key, required=True):
        """``body[key]`` as a dict (the resource wrapper of a POST/PUT body)."""
        body = self.json()
        if not isinstance(body, dict) or not isinstance(body.get(key), dict):
            if required:
                raise bad_request(f"Request body must contain a '{key}' object.")
            return {}
        return body[key]

    def filters(self, allowed=None):
        """Query parameters as {name: value or [values]} (repeated names give lists)."""
        out = {}
        for key in self.GET:
            if allowed is not None and key not in allowed:
                continue
            values = self.GET.getall(key)
            out[key] = values if len(values) > 1 else values[0]
        return out


class App:
    """Routes + error shape; every request gets a request id header."""

    def __init__(self, routes, error_body, state=None, max_body=router_mod.DEFAULT_MAX_BODY):
        self.router = router_mod.Router(head_as_get=True)
        self.error_body = error_body
        self.state = state or {}
        self.max_body = max_body
        for method, template, fn in routes:
            self.router.add(method, template, fn)

    def match(self, method, path):
        try:
            return self.router.match(method, path)
        except router_mod.BadMethod:
            raise HTTPError(405, "The method is not allowed for this resource.")
        except router_mod.NoRoute:
            raise not_found("The resource could not be found.")

    def __call__(self, environ, start_response):
        req = Request(environ)
        req.state = self.state
        ctxt = req.context
        request_id = getattr(ctxt, "request_id", None) or "req-unauthenticated"
        headers = {"X-Openstack-Request-Id": request_id}
        try:
            fn, kwargs = self.match(req.method, router_mod.request_path(environ))
            router_mod.read_body(req, self.max_body)
            result = fn(req, **kwargs)
            status, body = result[0], result[1]
            headers.update(result[2] if len(result) > 2 else {})
        except Exception as exc:  # noqa: BLE001 - every failure has an HTTP shape
            exc = router_mod.input_error(exc) or exc
            code = getattr(exc, "code", None)
            if not isinstance(code, int) or not 400 <= code < 600:
                LOG.exception("Unexpected error in %s %s", req.method, environ.get("PATH_INFO"))
                code = 500
                exc = HTTPError(500, "An unexpected error occurred.")
            status = code
            body = self.error_body(code, TITLES.get(code, "Error"),
                                   getattr(exc, "message", None) or str(exc),
                                   getattr(exc, "kind", None) or type(exc).__name__)
        resp = webob.Response(status=status, headerlist=[])
        if isinstance(body, (bytes, bytearray)):
            resp.body = bytes(body)
            headers.setdefault("Content-Type", "application/octet-stream")
        elif isinstance(body, str):
            resp.body = body.encode()
            headers.setdefault("Content-Type", PLAIN)
        elif body is not None:
            resp.body = json.dumps(body).encode()
            headers.setdefault("Content-Type", "application/json")
        for k, v in headers.items():
            resp.headers[k] = str(v)
        if req.method == "HEAD":
            resp.app_iter = []
        return resp(environ, start_response)


def make_app(conf, routes, error_body, public_paths=("/", ""), state=None):
    """The API as a WSGI application behind Novella's authentication."""
    app = App(routes, error_body, state, max_body=router_mod.max_body_size(conf))
    return router_mod.BodySizeLimit(
        auth.AuthMiddleware(app, conf, public_paths=public_paths), app.max_body,
        lambda message: error_body(413, TITLES[413], message, "HTTPRequestEntityTooLarge"))
