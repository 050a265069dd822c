"""Routing and request decoding shared by every HTTP API of Novella.

One :class:`Router` maps ``method + path template`` to a target (a handler
function, or whatever the API keeps per route) and the path's variables;
when nothing fits it raises :class:`NoRoute` (404) or :class:`BadMethod`
(405, with the methods the path allows). The JSON bodies of every API are
decoded here too (:func:`loads`), with the bounds of ``docs/limits.md``:

- a body larger than ``[oslo_middleware] max_request_body_size`` is refused
  with 413 (:func:`read_body`, oslo.middleware's limiting reader);
- nesting deeper than :data:`MAX_DEPTH`, text that is not UTF-8 or holds a
  lone surrogate, and ``NaN`` / ``Infinity`` / out-of-range numbers are
  refused with 400.

Each API turns these exceptions into its own error shape; messages quote at
most a short prefix of the bad input (:func:`clip`).
"""
import json
import math
import re

import webob.exc
from oslo_middleware import sizelimit

# The deepest nesting of arrays and objects any request body may have.
# The deepest body of the APIs (a reshaper request, a server's block
# device mappings) is five levels deep.
MAX_DEPTH = 32
DEFAULT_MAX_BODY = 114688   # [oslo_middleware] max_request_body_size's default
CLIP = 64                   # how much of a bad input an error message quotes


class InputError(Exception):
    """A request the API cannot read: ``code`` is 400 or 413."""

    def __init__(self, message, code=400):
        super().__init__(message)
        self.message = message
        self.code = code
        # the error type name of APIs that report one (the network API)
        self.kind = "HTTPBadRequest" if code == 400 else "HTTPRequestEntityTooLarge"


class NoRoute(Exception):
    code = 404


class BadMethod(Exception):
    code = 405

    def __init__(self, allowed):
        super().__init__("method not allowed")
        self.allowed = sorted(allowed)


def clip(value, limit=CLIP):
    """``value`` as text, cut to ``limit`` characters."""
    text = value if isinstance(value, str) else repr(value)
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text if len(text) <= limit else text[:limit] + "..."


def clip_message(message, value, limit=4 * CLIP):
    """A library's message about ``value`` (which it may quote whole), with
    the quoted value cut short when the message is long."""
    if len(message) <= limit:
        return message
    text = repr(value)
    return message.replace(text, clip(text)) if text in message else clip(message, limit)


def compile_template(template, trailing_slash=True):
    """``/servers/{server_id}`` -> a regex with one named group per variable."""
    pattern = re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", template.rstrip("/") or "/")
    return re.compile("^" + pattern + ("/?$" if trailing_slash else "$"))


class Router:
    """Method + path template -> (target, path variables).

    ``head_as_get``: a HEAD request is answered by the GET route.
    """

    def __init__(self, head_as_get=False, trailing_slash=True):
        self.head_as_get = head_as_get
        self.trailing_slash = trailing_slash
        self._routes = []       # [(regex, {method: target})] in the order added
        self._by_template = {}

    def add(self, method, template, target):
        entry = self._by_template.get(template)
        if entry is None:
            entry = self._by_template[template] = {}
            self._routes.append((compile_template(template, self.trailing_slash), entry))
        entry.setdefault(method, target)

    def match(self, method, path):
        allowed = set()
        for regex, methods in self._routes:
            found = regex.match(path)
            if not found:
                continue
            target = methods.get(method)
            if target is None and method == "HEAD" and self.head_as_get:
                target = methods.get("GET")
            if target is not None:
                return target, found.groupdict()
            allowed.update(methods)
        if allowed:
            raise BadMethod(allowed)
        raise NoRoute()


def request_path(environ, strict=True):
    """PATH_INFO as text; 400 when it is not UTF-8 (``strict``), else the
    undecoded path (which then names nothing: 404)."""
    raw = environ.get("PATH_INFO") or "/"
    try:
        return raw.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        if not strict:
            return raw
        raise InputError("The URL is not valid UTF-8.")


# --- bodies --------------------------------------------------------------------
def max_body_size(conf):
    """``[oslo_middleware] max_request_body_size`` of ``conf`` (or its default)."""
    if conf is None:
        return DEFAULT_MAX_BODY
    try:
        conf.register_opts(sizelimit.OPTS, group="oslo_middleware")
        return conf.oslo_middleware.max_request_body_size
    except Exception:  # noqa: BLE001 - a conf object without oslo.config groups
        return DEFAULT_MAX_BODY


def too_large(limit):
    return f"Request is too large. Larger than max_request_body_size ({limit})."


class BodySizeLimit:
    """WSGI middleware in front of an API's authentication: a declared
    Content-Length beyond ``limit`` is answered 413 at once, authenticated or
    not (oslo.middleware's limiter sits before the token check in the
    reference's pipelines). ``render(message)`` -> the API's error body."""

    def __init__(self, app, limit, render):
        self.wrapped, self.limit, self.render = app, limit, render

    def __getattr__(self, name):   # otherwise transparent: attributes of the wrapped app
        if name == "wrapped":
            raise AttributeError(name)
        return getattr(self.wrapped, name)

    def __call__(self, environ, start_response):
        try:
            length = int(environ.get("CONTENT_LENGTH") or -1)
        except ValueError:
            length = -1      # the API itself answers 400
        if length <= self.limit:
            return self.wrapped(environ, start_response)
        body, content_type = _encoded(self.render(too_large(self.limit)))
        resp = webob.Response(status=413, content_type=content_type, charset="utf-8")
        resp.body = body
        return resp(environ, start_response)


def read_body(req, limit):
    """The request's body, at most ``limit`` bytes, else InputError 413.

    A declared Content-Length beyond the limit is refused before reading;
    a body of unknown length is read through oslo.middleware's limiting
    reader. The body is cached on the request (``req.body``) for the handlers.
    """
    cached = req.environ.get("novella.body_checked")
    if cached:
        return req.body
    message = too_large(limit)
    try:
        length = req.content_length
    except ValueError:
        raise InputError("The Content-Length header must be an integer.")
    if length is not None and length > limit:
        raise InputError(message, 413)
    if length is None and req.environ.get("wsgi.input") is not None and \
            req.environ.get("HTTP_TRANSFER_ENCODING", "").lower() == "chunked":
        reader = sizelimit.LimitingReader(req.environ["wsgi.input"], limit)
        try:
            data = reader.read()
        except webob.exc.HTTPRequestEntityTooLarge:
            raise InputError(message, 413)
        req.body = data
    req.environ["novella.body_checked"] = True
    return req.body


def _reject_constant(name):
    raise ValueError(f"{name} is not a valid JSON number")


def _finite(text):
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number out of range: {clip(text)}")
    return value


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def loads(body):
    """Decode a JSON document (bytes or text); InputError 400 when it is bad.

    The message names the fault and quotes at most a short prefix of the
    input; each API words its own prefix around it.
    """
    if isinstance(body, (bytes, bytearray)):
        try:
            text = bytes(body).decode("utf-8")
        except UnicodeDecodeError:
            raise InputError("The body is not valid UTF-8.")
    else:
        text = body
    brackets = text.count("[") + text.count("{")
    try:
        data = json.loads(text, parse_constant=_reject_constant, parse_float=_finite)
    except RecursionError:
        raise InputError(f"The body is nested deeper than {MAX_DEPTH} levels.")
    except ValueError as exc:
        raise InputError(clip(str(exc), 2 * CLIP))
    if brackets > MAX_DEPTH and _depth(data) > MAX_DEPTH:
        raise InputError(f"The body is nested deeper than {MAX_DEPTH} levels.")
    if _SURROGATE_ESCAPE.search(text) and _has_lone_surrogate(data):
        raise InputError("The body holds a string that is not valid Unicode.")
    return data


def _depth(data):
    """How deeply ``data`` nests (stops counting past MAX_DEPTH)."""
    deepest = 0
    stack = [(data, 1)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, dict):
            node = list(node.values())
        elif not isinstance(node, list):
            continue
        deepest = max(deepest, level)
        if deepest > MAX_DEPTH:
            return deepest
        stack.extend((child, level + 1) for child in node)
    return deepest


def _has_lone_surrogate(data):
    stack = [data]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, str):
            try:
                node.encode("utf-8")
            except UnicodeEncodeError:
                return True
    return False


def input_error(exc):
    """An InputError for the library errors bad input raises (else None).

    webob raises UnicodeDecodeError for a path or query string that is not
    UTF-8, oslo.middleware's reader HTTPRequestEntityTooLarge.
    """
    if isinstance(exc, InputError):
        return exc
    if isinstance(exc, UnicodeError):
        return InputError("The request holds text that is not valid UTF-8.")
    if isinstance(exc, RecursionError):
        return InputError(f"The request is nested deeper than {MAX_DEPTH} levels.")
    if isinstance(exc, webob.exc.HTTPRequestEntityTooLarge):
        return InputError("Request is too large.", 413)
    if isinstance(exc, OverflowError):
        return InputError("A number in the request is out of range.")
    # A value the database cannot take (a number beyond its column, a list
    # where a string goes) fails the statement before anything is written.
    from sqlalchemy import exc as sa_exc
    if isinstance(exc, sa_exc.DataError):
        return InputError("A value in the request does not fit its field.")
    if isinstance(exc, sa_exc.StatementError) and any(
            text in str(getattr(exc, "orig", "")) for text in _BINDING_ERRORS):
        return InputError("A value in the request has the wrong type.")
    return None


# How the database drivers word a value of a type they cannot store.
_BINDING_ERRORS = ("binding parameter", "can't adapt type", "not supported",
                   "Python type", "cannot be converted")


def _encoded(body):
    """(bytes, content type) of an error body: a str is plain text, else JSON."""
    if isinstance(body, str):
        return body.encode(), "text/plain"
    return json.dumps(body).encode(), "application/json"


def error_document(api, code, title, message):
    """The error body (bytes, content type) an API answers with, for errors raised
    before any application sees the request (by the HTTP server: a request
    line too long, a malformed request line)."""
    import uuid
    if api == "compute":
        from novella.api.compute import errors
        return errors.APIError(message, code).body(), "application/json"
    if api == "placement":
        body = {"errors": [{"status": code, "title": title, "detail": message,
                            "code": "placement.undefined_code",
                            "request_id": "req-" + str(uuid.uuid4())}]}
    elif api in ("image", "network", "volume"):
        import importlib
        module = importlib.import_module(f"novella.api.{api}.app")
        body = module.error_body(code, title, message, "HTTPBadRequest")
    else:
        body = {"error": {"code": code, "title": title, "message": message}}
    return _encoded(body)
