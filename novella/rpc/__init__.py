"""Calls and casts between services, and versioned notifications.

Every message is a JSON document, even in one process, so the in-process
transport and RabbitMQ carry exactly the same payloads.

    transport = rpc.get_transport("inproc://default")   # or rabbit://...
    transport.serve("compute", "host1", manager)          # methods of manager are endpoints
    transport.call(ctxt, "compute", "host1", "stop_instance", instance_uuid=...)
    transport.cast(ctxt, "conductor", None, "build_instances", ...)
    transport.notify(ctxt, "compute.host1", "instance.resize.start", payload)

A call returns the endpoint's (JSON) result or raises ``RemoteError`` carrying
the remote exception's class name and message; an endpoint method receives
``(ctxt, **kwargs)`` with ``ctxt`` a ``novella.context.RequestContext``.
"""
from novella.rpc.base import RemoteError, Transport, Timeout  # noqa: F401

_transports = {}


def get_transport(url):
    """The process-wide transport for a URL (one object per URL)."""
    t = _transports.get(url)
    if t is None:
        from novella.conf import CONF
        if url.startswith("inproc://") or url.startswith("fake://"):
            from novella.rpc.inproc import InProcessTransport
            t = InProcessTransport(url, max_workers=CONF.inprocess_cast_threads)
        elif url.startswith("rabbit://") or url.startswith("amqp://"):
            from novella.rpc.rabbit import RabbitTransport
            t = RabbitTransport(url, max_workers=CONF.executor_thread_pool_size)
        else:
            raise ValueError(f"unsupported transport URL {url!r}")
        _transports[url] = t
    return t


def cleanup():
    """Stop every transport (tests, service shutdown)."""
    for t in list(_transports.values()):
        t.stop()
    _transports.clear()
