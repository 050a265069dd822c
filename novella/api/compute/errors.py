"""API errors with the reference's body shape: ``{"<name>": {"code", "message"}}``."""
import json

# Fault names by status code, as clients of the reference expect them.
FAULT_NAMES = {400: "badRequest", 401: "unauthorized", 403: "forbidden",
               404: "itemNotFound", 405: "badMethod", 409: "conflictingRequest",
               413: "overLimit", 415: "badMediaType", 429: "overLimit",
               501: "notImplemented", 503: "serviceUnavailable"}


class APIError(Exception):
    code = 500

    def __init__(self, message, code=None, headers=None):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.headers = headers or {}

    def body(self):
        name = FAULT_NAMES.get(self.code, "computeFault")
        return json.dumps({name: {"code": self.code, "message": self.message}}).encode()


class BadRequest(APIError):
    code = 400


class Forbidden(APIError):
    code = 403


class NotFound(APIError):
    code = 404


class MethodNotAllowed(APIError):
    code = 405


class NotAcceptable(APIError):
    code = 406


class Conflict(APIError):
    code = 409


class UnsupportedMediaType(APIError):
    code = 415


class Gone(APIError):
    code = 410


def gone(req, **_kwargs):
    """The route of an API the reference has removed but still routes (``handlers/removed.py``)."""
    raise Gone("This resource is no longer available.  No forwarding address is given.")


def instance_not_found(uuid):
    return NotFound(f"Instance {uuid} could not be found.")


def invalid_state(action, uuid, attr, state):
    """409 for an action not allowed in the server's current state."""
    return Conflict(f"Cannot '{action}' instance {uuid} while it is in {attr} {state}")
