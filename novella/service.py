"""Running services: HTTP servers for WSGI apps and periodic tasks.

``HTTPServer`` is the in-process HTTP/1.1 server of the all-in-one and of
the tests: a thread per connection, connections kept alive between requests,
run on a daemon thread. ``novella serve <api>`` runs the same applications
under gunicorn instead (``serve_wsgi``: worker processes, each with threads,
keep-alive). Every periodic task of a process shares one timer thread and a
few workers (``PeriodicScheduler``), however many simulated hosts the process
runs. All of them stop on ``stop()``.
"""
import concurrent.futures
import email.utils
import gc
import heapq
import http.server
import itertools
import logging
import socket
import socketserver
import sys
import tempfile
import threading
import time
import urllib.parse
import zlib

LOG = logging.getLogger(__name__)

# A request body left unread by the application is read and dropped up to
# this many bytes so the connection can carry the next request; a longer
# one closes the connection instead.
_DRAIN_LIMIT = 1 << 20


# Idle seconds before a kept-alive connection is closed. Longer than the pauses of
# clients that poll (the openstack CLI's --wait asks every 5 s): a server closing
# just as the next request is sent resets it, and clients do not retry that.
KEEPALIVE_SECONDS = 75


class _BoundedInput:
    """``wsgi.input``: the request body, never read past its Content-Length."""

    def __init__(self, stream, length):
        self._stream = stream
        self.remaining = length

    def read(self, size=-1):
        if size is None or size < 0 or size > self.remaining:
            size = self.remaining
        data = self._stream.read(size) if size else b""
        self.remaining -= len(data)
        if size and not data:
            self.remaining = 0  # the client went away
        return data

    def readline(self, size=-1):
        if size is None or size < 0 or size > self.remaining:
            size = self.remaining
        line = self._stream.readline(size) if size else b""
        self.remaining -= len(line)
        if size and not line:
            self.remaining = 0
        return line

    def readlines(self, hint=-1):
        return list(iter(self.readline, b""))

    def __iter__(self):
        return iter(self.readline, b"")


def _read_chunked(stream):
    """A chunked request body, decoded (in memory, on disk past 1 MiB)."""
    body = tempfile.SpooledTemporaryFile(max_size=_DRAIN_LIMIT)
    while True:
        size_line = stream.readline(1026)
        try:
            size = int(size_line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise ValueError("bad chunk size line") from None
        if size == 0:
            while stream.readline(65537) not in (b"\r\n", b"\n", b""):
                pass  # trailers
            break
        while size:
            data = stream.read(min(size, 65536))
            if not data:
                raise ValueError("truncated chunked body")
            body.write(data)
            size -= len(data)
        stream.readline(3)
    length = body.tell()
    body.seek(0)
    return _BoundedInput(body, length), length


class _Handler(http.server.BaseHTTPRequestHandler):
    """One connection: requests read in turn and handed to the WSGI app.

    HTTP/1.1 with keep-alive: a response carries its Content-Length (given by
    the application, or counted when the body is a list) or is sent chunked,
    so the connection stays open for the next request until the client
    closes it, asks to, or stays idle for ``timeout`` seconds. The environ
    holds only the headers the client sent: no Content-Type is made up for a
    request that has none.
    """

    protocol_version = "HTTP/1.1"
    server_version = "novella"
    sys_version = ""
    disable_nagle_algorithm = True
    timeout = KEEPALIVE_SECONDS
    api_name = "http"
    app = None

    def setup(self):
        super().setup()
        self.server.track(self.connection, True)

    def finish(self):
        try:
            super().finish()
        finally:
            self.server.track(self.connection, False)

    def log_message(self, fmt, *args):
        LOG.debug("%s - %s", self.address_string(), fmt % args)

    def send_error(self, code, message=None, explain=None):
        """Errors the server answers itself (a request line too long: 414)
        carry the API's error shape, not an HTML page."""
        from novella.api import router
        title = self.responses.get(code, ("Error",))[0]
        body, content_type = router.error_document(self.api_name, code, title, message or title)
        self.close_connection = True
        self.send_response(code, title)
        self.send_header("Content-Type", content_type)
        self.send_header("Connection", "close")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD" and code >= 200 and code not in (204, 304):
            self.wfile.write(body)

    def handle_one_request(self):
        try:
            super().handle_one_request()
        except (ConnectionError, OSError):
            self.close_connection = True

    def __getattr__(self, name):
        # BaseHTTPRequestHandler dispatches to do_<METHOD>: every method
        # goes to the application.
        if name.startswith("do_"):
            return self._run_wsgi
        raise AttributeError(name)

    # -- one request ------------------------------------------------------------
    def _environ(self, body):
        path, _, query = self.path.partition("?")
        if "://" in path:  # an absolute request target
            path = urllib.parse.urlsplit(path).path or "/"
        env = {
            "REQUEST_METHOD": self.command,
            "SCRIPT_NAME": "",
            "PATH_INFO": urllib.parse.unquote(path, "iso-8859-1"),
            "QUERY_STRING": query,
            "SERVER_NAME": self.server.server_name,
            "SERVER_PORT": str(self.server.server_port),
            "SERVER_PROTOCOL": self.request_version,
            "REMOTE_ADDR": self.client_address[0],
            "REMOTE_PORT": str(self.client_address[1]),
            "wsgi.version": (1, 0),
            "wsgi.url_scheme": "http",
            "wsgi.input": body,
            "wsgi.errors": sys.stderr,
            "wsgi.multithread": True,
            "wsgi.multiprocess": False,
            "wsgi.run_once": False,
        }
        for name, value in self.headers.items():
            if "_" in name:
                continue  # would be indistinguishable from its dashed twin
            key = name.upper().replace("-", "_")
            if key not in ("CONTENT_TYPE", "CONTENT_LENGTH"):
                key = "HTTP_" + key
            value = value.strip()
            env[key] = f"{env[key]},{value}" if key in env else value
        return env

    def _body(self):
        """(wsgi.input, length or None when the body's end is unknown)."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            return _read_chunked(self.rfile)
        raw = self.headers.get("Content-Length")
        if raw is None:
            return _BoundedInput(self.rfile, 0), 0
        try:
            length = int(raw)
            if length < 0:
                raise ValueError(raw)
        except ValueError:
            # Where this body ends, and the next request begins, is unknown:
            # the application sees the header as sent and the connection
            # closes after the response.
            self.close_connection = True
            return _BoundedInput(self.rfile, 0), None
        return _BoundedInput(self.rfile, length), length

    def _run_wsgi(self):
        try:
            body, length = self._body()
        except ValueError as exc:
            self.send_error(400, str(exc))
            return
        env = self._environ(body)
        if "chunked" in env.get("HTTP_TRANSFER_ENCODING", "").lower():
            env["CONTENT_LENGTH"] = str(length)  # the decoded body's
        response = _Response(self)
        try:
            result = self.app(env, response.start_response)
            try:
                response.send(result)
            finally:
                close = getattr(result, "close", None)
                if close is not None:
                    close()
        except (ConnectionError, TimeoutError):
            self.close_connection = True
            return
        except Exception:  # noqa: BLE001 - the server must answer
            LOG.exception("%s: request %s %s failed", self.api_name, self.command, self.path)
            self.close_connection = True
            if not response.headers_sent:
                self.send_error(500)
            return
        if body.remaining:
            if body.remaining > _DRAIN_LIMIT:
                self.close_connection = True
            else:
                while body.read(65536):
                    pass


class _Response:
    """The response side of one WSGI call: status, headers and framing."""

    def __init__(self, handler):
        self.handler = handler
        self.status = None
        self.headers = None
        self.headers_sent = False
        self.chunked = False
        self.body_allowed = True

    def start_response(self, status, headers, exc_info=None):
        if exc_info:
            try:
                if self.headers_sent:
                    raise exc_info[1].with_traceback(exc_info[2])
            finally:
                exc_info = None
        elif self.status is not None:
            raise AssertionError("start_response called twice")
        self.status, self.headers = status, list(headers)
        return self.write

    def send(self, result):
        if isinstance(result, (list, tuple)):
            # The whole body is known: send it with its length, in one write.
            if self.status is None:
                raise AssertionError("the application did not call start_response")
            data = b"".join(result)
            if not self._has("content-length"):
                self.headers.append(("Content-Length", str(len(data))))
            self.write(data)
        else:
            for data in result:
                if data:
                    self.write(data)
        if not self.headers_sent:
            self.write(b"")
        if self.chunked:
            self.handler.wfile.write(b"0\r\n\r\n")

    def _has(self, name):
        return any(key.lower() == name for key, _ in self.headers)

    def _head(self):
        handler = self.handler
        code = int(self.status.split(None, 1)[0])
        self.body_allowed = (handler.command != "HEAD" and code >= 200
                             and code not in (204, 304))
        if not self._has("content-length") and self.body_allowed:
            if handler.request_version == "HTTP/1.1":
                self.chunked = True
                self.headers.append(("Transfer-Encoding", "chunked"))
            else:
                handler.close_connection = True
        if handler.request_version != "HTTP/1.1" and not handler.close_connection:
            self.headers.append(("Connection", "keep-alive"))
        elif handler.close_connection:
            self.headers.append(("Connection", "close"))
        lines = [f"HTTP/1.1 {self.status}"]
        if not self._has("date"):
            lines.append("Date: " + email.utils.formatdate(usegmt=True))
        if not self._has("server"):
            lines.append("Server: " + handler.server_version)
        lines += [f"{key}: {value}" for key, value in self.headers]
        handler.log_request(code)
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    def write(self, data):
        if self.status is None:
            raise AssertionError("write() before start_response")
        out = b""
        if not self.headers_sent:
            out = self._head()
            self.headers_sent = True
        if data and self.body_allowed:
            out += b"%x\r\n%s\r\n" % (len(data), data) if self.chunked else data
        if out:
            self.handler.wfile.write(out)


class _ThreadingServer(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def server_bind(self):
        super().server_bind()
        host, port = self.server_address[:2]
        self.server_name, self.server_port = host, port
        self._conns = set()
        self._conns_lock = threading.Lock()

    def track(self, conn, alive):
        with self._conns_lock:
            (self._conns.add if alive else self._conns.discard)(conn)

    def close_connections(self):
        with self._conns_lock:
            conns = list(self._conns)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class PortInUse(Exception):
    """An API's port is taken: said before anything is started or written."""


def check_port_free(host, port, name):
    """Raise PortInUse naming ``name``'s ``host:port`` if it cannot be listened on
    (as the server will bind it: address reuse on, so a closing socket is no
    obstacle)."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise PortInUse(f"the {name} API cannot listen on {host}:{port}: "
                            f"{exc.strerror or exc}. Another process has that port: stop "
                            "it, or choose other ports.") from None


class HTTPServer:
    """A threaded HTTP/1.1 server for one WSGI application (keep-alive)."""

    def __init__(self, app, host="127.0.0.1", port=0, name="http"):
        self.name = name
        self.app = app
        handler = type("Handler", (_Handler,), {"api_name": name, "app": staticmethod(app)})
        self._server = _ThreadingServer((host, port), handler)
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
        self._server.close_connections()  # kept-alive connections end too


def serve_wsgi(build, host, port, name, workers=2, threads=4, keepalive=None, timeout=120,
               ready=None):
    """Serve the WSGI application ``build()`` makes under gunicorn until SIGTERM/SIGINT.

    ``workers`` processes, each building its own application after the fork
    and answering with ``threads`` threads (gunicorn's gthread worker, which
    keeps connections alive ``keepalive`` seconds between requests). A worker
    silent for ``timeout`` seconds is replaced. ``ready(url)`` is called once
    the socket listens (port 0: the port the system chose). Runs in the main
    thread (gunicorn's arbiter handles the signals) and returns when stopped.
    """
    from gunicorn.app.base import BaseApplication

    def when_ready(arbiter):
        if ready is not None:
            bound_host, bound_port = arbiter.LISTENERS[0].sock.getsockname()[:2]
            ready(f"http://{bound_host}:{bound_port}")

    options = {
        "bind": f"{host}:{port}", "workers": workers, "threads": max(1, threads),
        "worker_class": "gthread", "keepalive": keepalive or KEEPALIVE_SECONDS,
        "timeout": timeout,
        "graceful_timeout": 10, "backlog": 128, "proc_name": f"novella-{name}",
        # Long query strings (many UUIDs in a filter): gunicorn's largest bounded limit.
        "limit_request_line": 8190,
        "errorlog": "-", "accesslog": None, "loglevel": "info", "when_ready": when_ready,
    }

    class _Application(BaseApplication):
        def load_config(self):
            for key, value in options.items():
                self.cfg.set(key, value)
            if "control_socket_disable" in self.cfg.settings:
                # No runtime control socket (one path per user: two servers collide).
                self.cfg.set("control_socket_disable", True)

        def load(self):
            app = build()
            settle_collector()
            return app

    _Application().run()


def settle_collector():
    """Keep the garbage collector's passes off what a long-running process has
    made by now and off each request's short-lived objects. Called once the
    process has built what it serves.

    What exists now (a fleet's hosts, their providers, the applications) lives
    as long as the process: it is frozen, out of every pass. The youngest
    generation is collected every 100,000 new objects instead of 700: a request
    that decodes 1,000 allocation candidates makes about 30,000, which at 700
    were moved to the oldest generation while still in use, so every sixth
    boot at 10,000 hosts paid a full pass over the cached host states (24 ms;
    9% of a boot's instructions there, measured with callgrind); at 10,000 each
    pass still went over the answer being decoded (3% of such a boot); at
    100,000 a pass mostly finds the requests' objects already freed.
    """
    gc.set_threshold(100_000, 10, 10)
    gc.freeze()


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
        self._tasks = set()  # every task added and not yet seen cancelled (or running)
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
            self._tasks.add(task)
            self._push(task, time.monotonic() + offset)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                self._thread.start()
            self._cond.notify()
        return task

    def __len__(self):
        """The tasks added and not cancelled, whether waiting or running."""
        with self._cond:
            return sum(1 for t in self._tasks if not t.cancelled)

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
                            self._tasks.discard(task)
                            continue
                        break
                    self._cond.wait(self._heap[0][0] - now if self._heap else None)
            task.started = time.monotonic()
            try:
                self._pool.submit(task.run)
            except RuntimeError:  # the pool is shut down: the process is ending
                return

    def _done(self, task):
        with self._cond:
            if task.cancelled:
                self._tasks.discard(task)
                return
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


# The period of a task whose interval option says "the default" (oslo.service's).
DEFAULT_INTERVAL = 60


def spacing(interval):
    """A task's period from an interval option read as the reference reads its
    periodic tasks' spacing: 0 the default period, negative never (0 here)."""
    if interval is None or interval < 0:
        return 0
    return interval or DEFAULT_INTERVAL


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
