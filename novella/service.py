"""Running services: HTTP servers for WSGI apps and periodic tasks.

HTTP servers run on daemon threads; every periodic task of a process shares
one timer thread and a few workers (``PeriodicScheduler``), however many
simulated hosts the process runs. Both stop on ``stop()``, so the all-in-one
and the separate ``novella serve`` processes share one way of running.
"""
import concurrent.futures
import heapq
import itertools
import logging
import socketserver
import threading
import time
import zlib
from wsgiref import simple_server

LOG = logging.getLogger(__name__)


class _QuietHandler(simple_server.WSGIRequestHandler):
    api_name = "http"

    def log_message(self, fmt, *args):
        LOG.debug("%s - %s", self.address_string(), fmt % args)

    def send_error(self, code, message=None, explain=None):
        """Errors the server answers itself (a request line too long: 414)
        carry the API's JSON error shape, not an HTML page."""
        from novella.api import router
        title = self.responses.get(code, ("Error",))[0]
        body = router.error_document(self.api_name, code, title, message or title)
        self.send_response(code, title)
        self.send_header("Content-Type", "application/json")
        self.send_header("Connection", "close")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD" and code >= 200 and code not in (204, 304):
            self.wfile.write(body)


class _ThreadingWSGIServer(socketserver.ThreadingMixIn, simple_server.WSGIServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128


class HTTPServer:
    """A threaded HTTP server for one WSGI application."""

    def __init__(self, app, host="127.0.0.1", port=0, name="http"):
        self.name = name
        self._server = simple_server.make_server(
            host, port, app, server_class=_ThreadingWSGIServer,
            handler_class=type("Handler", (_QuietHandler,), {"api_name": name}))
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


class PeriodicScheduler:
    """All the periodic work of a process, on one timer thread.

    Each task runs every ``interval`` seconds; its first run comes at an
    offset within its first interval drawn from its name, so the tasks of
    thousands of simulated hosts are spread over their intervals instead of
    firing together. Due tasks run on a small pool of worker threads; a task
    is never run twice at once (a run that outlasts its interval delays the
    next one, it does not pile up).
    """

    def __init__(self, workers=4, name="periodic"):
        self.name = name
        self._heap = []  # (due time, sequence, task)
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._thread = None
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=workers, thread_name_prefix=f"{name}-worker")

    def add(self, fn, interval, name=None):
        """Run ``fn()`` every ``interval`` seconds; returns the task (``cancel()``
        stops it). A non-positive interval adds nothing and returns None."""
        if not interval or interval <= 0:
            return None
        task = _Task(self, fn, float(interval), name or getattr(fn, "__name__", "task"))
        offset = (zlib.crc32(task.name.encode()) % 10007) / 10007.0 * task.interval
        with self._cond:
            self._push(task, time.monotonic() + offset)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                self._thread.start()
            self._cond.notify()
        return task

    def __len__(self):
        return sum(1 for _d, _s, t in self._heap if not t.cancelled)

    def _push(self, task, due):
        heapq.heappush(self._heap, (due, next(self._seq), task))

    def _run(self):
        while True:
            with self._cond:
                while True:
                    now = time.monotonic()
                    if self._heap and self._heap[0][0] <= now:
                        _due, _seq, task = heapq.heappop(self._heap)
                        if task.cancelled:
                            continue
                        break
                    self._cond.wait(self._heap[0][0] - now if self._heap else None)
            task.started = time.monotonic()
            try:
                self._pool.submit(task.run)
            except RuntimeError:  # the pool is shut down: the process is ending
                return

    def _done(self, task):
        if task.cancelled:
            return
        with self._cond:
            # Next run one interval after this one started, or at once if overdue.
            self._push(task, max(task.started + task.interval, time.monotonic()))
            self._cond.notify()


class _Task:
    __slots__ = ("scheduler", "fn", "interval", "name", "cancelled", "started")

    def __init__(self, scheduler, fn, interval, name):
        self.scheduler, self.fn, self.interval, self.name = scheduler, fn, interval, name
        self.cancelled = False
        self.started = None

    def run(self):
        try:
            if not self.cancelled:
                self.fn()
        except Exception:  # noqa: BLE001 - a periodic task must keep running
            LOG.exception("periodic task %s failed", self.name)
        finally:
            self.scheduler._done(self)

    def cancel(self):
        self.cancelled = True


_DEFAULT = None
_DEFAULT_LOCK = threading.Lock()


def default_scheduler():
    """The process's scheduler of periodic work (created on first use)."""
    global _DEFAULT
    with _DEFAULT_LOCK:
        if _DEFAULT is None:
            _DEFAULT = PeriodicScheduler()
        return _DEFAULT


class Periodic:
    """Run ``fn()`` every ``interval`` seconds until stopped, on the process's
    scheduler of periodic work (no thread of its own)."""

    def __init__(self, fn, interval, name=None, scheduler=None):
        self.fn = fn
        self.interval = interval
        self.name = name or fn.__name__
        self._scheduler = scheduler
        self._task = None

    def start(self):
        if self.interval and self.interval > 0 and self._task is None:
            self._task = (self._scheduler or default_scheduler()).add(
                self.fn, self.interval, self.name)
        return self

    def stop(self):
        if self._task is not None:
            self._task.cancel()
