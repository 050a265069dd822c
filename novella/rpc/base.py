"""The transport interface shared by the in-process and RabbitMQ transports."""
import json
import logging
import traceback

from novella.context import RequestContext

LOG = logging.getLogger(__name__)


class RemoteError(Exception):
    """An endpoint raised; carries the remote class name, message and traceback."""

    def __init__(self, exc_type, message, tb=None):
        super().__init__(f"{exc_type}: {message}")
        self.exc_type = exc_type
        self.message = message
        self.remote_traceback = tb


class Timeout(Exception):
    pass


def encode(obj):
    return json.dumps(obj, separators=(",", ":"), default=str)


def decode(data):
    return json.loads(data)


class Transport:
    """Base class: subclasses deliver messages; this class dispatches them."""

    def __init__(self, url):
        self.url = url
        self.notification_listeners = []

    # --- sending -----------------------------------------------------------
    def call(self, ctxt, topic, server, method, timeout=None, **kwargs):
        raise NotImplementedError

    def cast(self, ctxt, topic, server, method, **kwargs):
        raise NotImplementedError

    def notify(self, ctxt, publisher_id, event_type, payload, priority="INFO"):
        raise NotImplementedError

    # --- receiving ---------------------------------------------------------
    def serve(self, topic, server, endpoint):
        """Deliver messages for (topic, server) and (topic, any) to endpoint."""
        raise NotImplementedError

    def unserve(self, topic, server):
        raise NotImplementedError

    def listen_notifications(self, callback):
        """callback(message_dict) for every notification on this transport."""
        self.notification_listeners.append(callback)

    def stop(self):
        pass

    # --- shared dispatch -----------------------------------------------------
    @staticmethod
    def message(ctxt, method, kwargs):
        return encode({"context": ctxt.to_dict() if ctxt is not None else {},
                       "method": method, "args": kwargs})

    @staticmethod
    def dispatch(endpoint, data):
        """Run one message against an endpoint; return the encoded reply."""
        msg = decode(data)
        ctxt = RequestContext.from_dict(msg["context"])
        try:
            fn = getattr(endpoint, msg["method"])
            if msg["method"].startswith("_"):
                raise AttributeError(msg["method"])
            result = fn(ctxt, **msg["args"])
            return encode({"result": result})
        except Exception as exc:  # noqa: BLE001 - returned to the caller
            LOG.debug("RPC %s failed", msg["method"], exc_info=True)
            return encode({"error": {"type": type(exc).__name__, "message": str(exc),
                                     "traceback": traceback.format_exc()}})

    @staticmethod
    def reply_result(data):
        reply = decode(data)
        if "error" in reply:
            e = reply["error"]
            raise RemoteError(e["type"], e["message"], e.get("traceback"))
        return reply["result"]

    @staticmethod
    def notification(ctxt, publisher_id, event_type, payload, priority):
        import datetime
        import uuid
        return {"message_id": str(uuid.uuid4()), "publisher_id": publisher_id,
                "event_type": event_type, "priority": priority, "payload": payload,
                "timestamp": datetime.datetime.utcnow().isoformat(),
                "context": ctxt.to_dict() if ctxt is not None else {}}
