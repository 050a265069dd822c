"""A console proxy: websockets in, a guest's VNC display or serial port out.

Built on websockify's request handler (its websocket framing and relay
loop), in a threaded HTTP server of its own so that it runs as well inside
the all-in-one's process as on its own. A client connects with the token
the Compute API's URL carries, as ``?token=`` or, as noVNC's page sends it,
inside the page's ``path`` parameter (``?path=%3Ftoken%3D...``). The token
is used up by that connect (novella/db/console_auth_tokens.py); a token
unknown, expired, already used or of another proxy's console type is
refused with 403 before the websocket opens. The guest's console is
reached as its host recorded it: a TCP host and port, or a unix socket.

The proxy also serves the files of ``[DEFAULT] web`` (noVNC's pages from
Debian's ``novnc`` package), so the URL the API answers opens in a browser.
"""
import http.cookies
import http.server
import logging
import select
import socket
import socketserver
import threading
import urllib.parse

from websockify import websocketproxy

from novella.db import console_auth_tokens

LOG = logging.getLogger(__name__)

# The console types each proxy relays.
NOVNC = ("novnc",)
SERIAL = ("serial",)
CONNECT_TIMEOUT = 10


def token_of(path, cookie_header=None):
    """The token a websocket request carries: ``?token=``, the ``path`` parameter's
    own ``?token=`` (noVNC), or a ``token`` cookie; None if none."""
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(path).query)
    if query.get("token"):
        return query["token"][0]
    if query.get("path"):
        inner = urllib.parse.parse_qs(urllib.parse.urlsplit(query["path"][0]).query)
        if inner.get("token"):
            return inner["token"][0]
    if cookie_header:
        cookie = http.cookies.SimpleCookie()
        try:
            cookie.load(cookie_header)
        except http.cookies.CookieError:
            return None
        if "token" in cookie:
            return cookie["token"].value
    return None


class _Handler(websocketproxy.ProxyRequestHandler):
    console = None

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        LOG.info("%s %s", self.client_address[0], format % args)

    def translate_path(self, path):
        # The server's web directory, not the process's working directory.
        self.directory = self.server.web
        return super().translate_path(path)

    def handle_upgrade(self):
        token = token_of(self.path, self.headers.get("Cookie"))
        console = token and console_auth_tokens.find(self.server.api_db, token, use=True)
        if not console or console["console_type"] not in self.server.console_types:
            LOG.info("refused a console connection from %s: invalid token",
                     self.client_address[0])
            self.send_error(403, "The token is invalid, expired or already used.")
            return
        self.console = console
        super().handle_upgrade()

    def new_websocket_client(self):
        try:
            target = _connect(self.console)
        except OSError as exc:
            LOG.warning("console of %s unreachable: %s", self.console["instance_uuid"], exc)
            raise self.CClose(1011, "Failed to connect to the console") from None
        LOG.info("console of %s opened", self.console["instance_uuid"])
        try:
            self.do_proxy(target)
        finally:
            target.close()

    def do_proxy(self, target):
        """Relay frames between the websocket and ``target`` until either closes.

        websockify's own loop waits in select(), which refuses a descriptor
        numbered past 1023; a long-running process (the all-in-one, a worker
        that ran many tests) has such descriptors, so this loop polls."""
        client, to_client, to_target, client_blocked = self.request, [], [], False
        poller = select.poll()
        while True:
            poller.register(client, select.POLLIN | (
                select.POLLOUT if to_client or client_blocked else 0))
            poller.register(target, select.POLLIN | (select.POLLOUT if to_target else 0))
            ready = dict(poller.poll(1000))
            if ready.get(client.fileno(), 0) & select.POLLOUT:
                client_blocked = self.send_frames(to_client)
                to_client = []
            if ready.get(client.fileno(), 0) & (select.POLLIN | select.POLLHUP | select.POLLERR):
                frames, closed = self.recv_frames()
                to_target.extend(frames)
                if closed:
                    target.sendall(b"".join(to_target))
                    raise self.CClose(closed["code"], closed["reason"])
            if to_target and ready.get(target.fileno(), 0) & select.POLLOUT:
                data = to_target.pop(0)
                sent = target.send(data)
                if sent < len(data):
                    to_target.insert(0, data[sent:])
            if ready.get(target.fileno(), 0) & (select.POLLIN | select.POLLHUP | select.POLLERR):
                data = target.recv(self.buffer_size)
                if not data:
                    blocked = self.send_frames(to_client)
                    while blocked:
                        blocked = self.send_frames()
                    raise self.CClose(1000, "Target closed")
                to_client.append(data)


def _connect(console):
    """A socket to the guest's console, past its internal access path if it has one."""
    if console["unix_socket"]:
        target = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        target.settimeout(CONNECT_TIMEOUT)
        target.connect(console["unix_socket"])
    else:
        target = socket.create_connection((console["host"], console["port"]), CONNECT_TIMEOUT)
        target.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if console["internal_access_path"]:
        target.sendall(f"CONNECT {console['internal_access_path']} HTTP/1.1\r\n\r\n".encode())
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = target.recv(4096)
            if not chunk:
                break
            answer += chunk
        if answer.split(b" ", 2)[1:2] != [b"200"]:
            target.close()
            raise OSError(f"the console's access path answered {answer[:40]!r}")
    target.settimeout(None)
    return target


class ConsoleProxy(socketserver.ThreadingMixIn, http.server.HTTPServer):
    """One proxy listening on ``host:port`` for the ``console_types`` it relays,
    finding tokens in the cells the API database ``api_db`` maps."""

    daemon_threads = True
    # What websockify's handler reads from its server: no token or auth plugin
    # (the token is checked above), no heartbeat, no recording, no directory listing.
    token_plugin = auth_plugin = heartbeat = None
    target_host = target_port = None
    file_only = True

    def __init__(self, api_db, console_types, host, port, web=None, name="consoleproxy"):
        self.api_db, self.console_types, self.web, self.name = api_db, console_types, web, name
        self.only_upgrade = not web
        super().__init__((host, port), _Handler)
        self.host, self.port = self.server_address[:2]
        self._thread = threading.Thread(target=self.serve_forever, name=name, daemon=True)

    @property
    def url(self):
        return f"{'http' if self.web else 'ws'}://{self.host}:{self.port}"

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self.shutdown()
        self.server_close()
