"""Request plumbing shared by the handlers: versions, errors, JSON, routing."""
import json
import uuid as uuidlib

import jsonschema
try:
    import orjson
except ImportError:  # pragma: no cover - the standard library is enough
    orjson = None
import webob
import webob.dec
import webob.exc

from novella.api import router as router_mod

SERVICE_TYPE = "placement"
VERSIONS = ["1.%d" % i for i in range(40)]
MIN_VERSION, MAX_VERSION = VERSIONS[0], VERSIONS[-1]
ENV_VERSION = "placement.microversion"
ENV_ERROR_CODE = "placement.error_code"
ENV_REQUEST_ID = "openstack.request_id"

# Error codes (the ``code`` member of error bodies from 1.23).
DEFAULT = "placement.undefined_code"
INVENTORY_INUSE = "placement.inventory.inuse"
CONCURRENT_UPDATE = "placement.concurrent_update"
DUPLICATE_NAME = "placement.duplicate_name"
PROVIDER_IN_USE = "placement.resource_provider.inuse"
PROVIDER_CANNOT_DELETE_PARENT = "placement.resource_provider.cannot_delete_parent"
PROVIDER_NOT_FOUND = "placement.resource_provider.not_found"
QUERY_DUPLICATE_KEY = "placement.query.duplicate_key"
QUERY_BAD_VALUE = "placement.query.bad_value"
QUERY_MISSING_VALUE = "placement.query.missing_value"


def dumps(data):
    """Serialise a response body to JSON bytes (orjson when available)."""
    if orjson is not None:
        return orjson.dumps(data)
    return json.dumps(data, separators=(",", ":")).encode()


def json_error_formatter(body, status, title, environ):
    body = webob.exc.strip_tags(body)
    code = int(status.split(None, 1)[0])
    error = {"status": code, "title": title, "detail": body}
    version = environ.get(ENV_VERSION)
    if version is None or version.matches((1, 23)):
        # Without a version (the one asked for could not be read) the
        # body has every member of the latest error shape.
        error["code"] = environ.get(ENV_ERROR_CODE, DEFAULT)
    if ENV_REQUEST_ID in environ:
        error["request_id"] = environ[ENV_REQUEST_ID]
    if code == 406 and version is None:
        error["max_version"] = MAX_VERSION
        error["min_version"] = MIN_VERSION
    return {"errors": [error]}


def _error(cls, detail=None, code=None, **kw):
    return cls(detail, comment=code, json_formatter=json_error_formatter, **kw)


def bad_request(detail, code=None):
    return _error(webob.exc.HTTPBadRequest, detail, code)


def not_found(detail=None, code=None):
    return _error(webob.exc.HTTPNotFound, detail, code)


def conflict(detail, code=None):
    return _error(webob.exc.HTTPConflict, detail, code)


def forbidden(detail):
    return _error(webob.exc.HTTPForbidden, detail)


_FORMAT = jsonschema.FormatChecker()


@_FORMAT.checks("uuid")
def _is_uuid(value):
    return is_uuid(value)


def is_uuid(value):
    try:
        uuidlib.UUID(str(value))
        return True
    except (TypeError, ValueError, AttributeError):
        return False


_VALIDATORS = {}


def _validator(schema):
    v = _VALIDATORS.get(id(schema))
    if v is None:
        v = _VALIDATORS[id(schema)] = (
            schema, jsonschema.validators.validator_for(schema)(schema, format_checker=_FORMAT))
    return v[1]


def validate(data, schema):
    errors = list(_validator(schema).iter_errors(data))
    if errors:
        best = jsonschema.exceptions.best_match(errors)
        raise best


def extract_json(req, schema, quick=None):
    """Parse and validate a JSON body.

    ``quick(data)`` may vouch for a body cheaply; only bodies it does not
    vouch for go through the (slower) schema validator.
    """
    try:
        data = router_mod.loads(req.body)
    except router_mod.InputError as exc:
        raise bad_request("Malformed JSON: %s" % exc.message)
    if quick is not None and isinstance(data, dict) and quick(data):
        return data
    try:
        validate(data, schema)
    except jsonschema.ValidationError as exc:
        raise bad_request("JSON does not validate: %s" % describe(exc))
    return data


def describe(exc):
    """A schema failure, quoting at most a short prefix of the bad value."""
    message = router_mod.clip_message(exc.message, exc.instance)
    where = "".join("[%r]" % p for p in list(exc.relative_schema_path)[:-1])
    return "%s\n\nFailed validating %r in schema%s" % (message, exc.validator, where)


def validate_query(req, schema):
    try:
        validate(dict(req.GET), schema)
    except jsonschema.ValidationError as exc:
        raise bad_request("Invalid query string parameters: %s" % describe(exc))


def require_json(req):
    if req.content_type != "application/json":
        raise _error(webob.exc.HTTPUnsupportedMediaType,
                     "The media type %s is not supported, use application/json"
                     % (req.content_type or "None"))


def check_accept(req):
    if req.accept and not req.accept.acceptable_offers(["application/json"]):
        raise _error(webob.exc.HTTPNotAcceptable, "Only application/json is provided")


def respond(req, data=None, status=200, last_modified=None, location=None):
    """A JSON (or empty) response with the cache headers of 1.15+."""
    resp = req.response
    resp.status = status
    if data is None:
        resp.content_type = None
    else:
        resp.body = dumps(data)
        resp.content_type = "application/json"
        resp.charset = None
    if location:
        resp.location = location
    if last_modified is not None and req.version.matches((1, 15)):
        resp.last_modified = last_modified
        resp.cache_control = "no-cache"
    return resp


def no_content(req):
    resp = req.response
    resp.status = 204
    resp.content_type = None
    return resp


class Request(webob.Request):
    @property
    def version(self):
        return self.environ[ENV_VERSION]

    @property
    def context(self):
        return self.environ["placement.context"]

    @property
    def ledger(self):
        return self.environ["placement.ledger"]

    def can(self, action, target=None):
        self.environ["placement.policy"](self.context, action, target)

    def path_arg(self, name):
        return self.environ["placement.path_args"][name]


class Router:
    """Dispatch ``(path pattern, method)`` to handler functions.

    A route is ``(template, {METHOD: handler or (handler, min_version)})``;
    ``{name}`` in the template matches one path segment. Below a handler's
    minimum version the route answers 404 (or 405 when ``(h, v, 405)``).
    """

    def __init__(self, routes, conf):
        self.conf = conf
        self.max_body = router_mod.max_body_size(conf)
        self.router = router_mod.Router(trailing_slash=False)
        for template, methods in routes:
            for method, entry in methods.items():
                self.router.add(method, template, entry)

    def _dispatch(self, req):
        try:
            entry, args = self.router.match(
                req.method, router_mod.request_path(req.environ, strict=False))
        except router_mod.NoRoute:
            raise not_found()
        except router_mod.BadMethod as exc:
            raise _error(webob.exc.HTTPMethodNotAllowed,
                         "The method specified is not allowed for this resource.",
                         headers={"allow": ", ".join(exc.allowed)})
        if isinstance(entry, tuple):
            func, min_version = entry[0], entry[1]
            status = entry[2] if len(entry) > 2 else 404
            if not req.version.matches(tuple(int(x) for x in min_version.split("."))):
                raise _error(webob.exc.status_map[status])
        else:
            func = entry
        req.environ["placement.path_args"] = args
        router_mod.read_body(req, self.max_body)
        return func(req)

    @webob.dec.wsgify(RequestClass=Request)
    def __call__(self, req):
        clen = req.environ.get("CONTENT_LENGTH")
        try:
            if clen and int(clen) > 0 and not req.environ.get("CONTENT_TYPE"):
                raise bad_request("content-type header required when content-length > 0")
        except ValueError:
            raise bad_request("content-length header must be an integer")
        try:
            try:
                return self._dispatch(req)
            except Exception as exc:
                bad = router_mod.input_error(exc)
                if bad is None or isinstance(exc, webob.exc.HTTPException):
                    raise
                cls = webob.exc.status_map[bad.code]
                raise _error(cls, bad.message) from None
        except webob.exc.HTTPException as exc:
            exc.json_formatter = json_error_formatter
            if exc.comment:
                req.environ[ENV_ERROR_CODE] = exc.comment
                exc.comment = None
            raise
