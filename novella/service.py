"""Running services: HTTP servers for WSGI apps and periodic tasks.

Both run on daemon threads and stop on ``stop()``, so the all-in-one and
the separate ``novella serve`` processes share one way of running.
"""
import logging
import socketserver
import threading
from wsgiref import simple_server

LOG = logging.getLogger(__name__)


class _QuietHandler(simple_server.WSGIRequestHandler):
    def log_message(self, fmt, *args):
        LOG.debug("%s - %s", self.address_string(), fmt % args)


class _ThreadingWSGIServer(socketserver.ThreadingMixIn, simple_server.WSGIServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128


class HTTPServer:
    """A threaded HTTP server for one WSGI application."""

    def __init__(self, app, host="127.0.0.1", port=0, name="http"):
        self.name = name
        self._server = simple_server.make_server(
            host, port, app, server_class=_ThreadingWSGIServer, handler_class=_QuietHandler)
        self.host, self.port = self._server.server_address[:2]
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        name=f"{name}-http", daemon=True)

    @property
    def url(self):
        return f"http://{self.host}:{self.port}"

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self._server.shutdown()
        self._server.server_close()


class Periodic:
    """Run ``fn()`` every ``interval`` seconds on a thread until stopped."""

    def __init__(self, fn, interval, name=None):
        self.fn = fn
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name or fn.__name__, daemon=True)

    def _run(self):
        while not self._stop.wait(self.interval):
            try:
                self.fn()
            except Exception:  # noqa: BLE001 - a periodic task must keep running
                LOG.exception("periodic task %s failed", self._thread.name)

    def start(self):
        if self.interval and self.interval > 0:
            self._thread.start()
        return self

    def stop(self):
        self._stop.set()
