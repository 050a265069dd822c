"""Through the serial proxy: a websocket client opens a simulated guest's serial
console with the token of the URL the Compute API answered, reads its console
log and gets its input echoed; the same token a second time, an expired one and
one of another proxy's console type are refused."""
import os
import time
import urllib.parse
import urllib.request

import pytest
from websockify.websocket import WebSocket

from novella.conf import CONF
from novella.console import proxy
from tests.functional.moves.conftest import make_cloud  # noqa: F401 - fixture

MEMBER = "demo:demo"


@pytest.fixture
def cloud(make_cloud):  # noqa: F811
    cloud = make_cloud(hosts=1, serial_console={"enabled": True})
    serial = proxy.ConsoleProxy(cloud.aio.api_db, proxy.SERIAL, "127.0.0.1", 0).start()
    novnc = proxy.ConsoleProxy(cloud.aio.api_db, proxy.NOVNC, "127.0.0.1", 0,
                               web=CONF.web).start()
    CONF.set_override("base_url", serial.url + "/", group="serial_console")
    CONF.set_override("novncproxy_base_url", novnc.url + "/vnc_lite.html", group="vnc")
    cloud.serial, cloud.novnc = serial, novnc
    yield cloud
    serial.stop()
    novnc.stop()
    CONF.clear_override("base_url", group="serial_console")
    CONF.clear_override("novncproxy_base_url", group="vnc")


def _serial_url(cloud, server):
    status, body = cloud.api("POST", f"/servers/{server}/remote-consoles",
                             {"remote_console": {"protocol": "serial", "type": "serial"}},
                             token=MEMBER, version="2.6")
    assert status == 200, body
    return body["remote_console"]["url"]


class _Client(WebSocket):
    """websockify's websocket client, sending the URL's query too (it sends the
    path alone)."""

    def __init__(self, url):
        super().__init__()
        parts = urllib.parse.urlsplit(url)
        self._target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")

    def send_request(self, method, path):
        super().send_request(method, self._target)


def _open(url):
    ws = _Client(url)
    ws.connect(url, protocols=["binary"])
    return ws


def _read_until(ws, marker, timeout=10):
    ws.socket.settimeout(timeout)
    data = b""
    deadline = time.monotonic() + timeout
    while marker not in data and time.monotonic() < deadline:
        msg = ws.recvmsg()
        if msg is None:
            break
        data += msg
    return data


def test_serial_console_through_the_proxy(cloud):
    server = cloud.boot(token=MEMBER)
    url = _serial_url(cloud, server)
    assert url.startswith(cloud.serial.url + "/?token=")
    ws = _open(url)
    try:
        assert b"login:" in _read_until(ws, b"login:")
        ws.sendmsg(b"root\r")
        assert b"root\r" in _read_until(ws, b"root\r")
    finally:
        ws.close()
    # The token was used: the same URL is refused before any websocket opens.
    with pytest.raises(Exception, match="403"):
        _open(url)
    # A new URL opens it again.
    ws = _open(_serial_url(cloud, server))
    assert b"login:" in _read_until(ws, b"login:")
    ws.close()


def test_console_past_descriptor_1023(cloud):
    """A process holding over a thousand descriptors (the all-in-one after a
    while) still relays a console: the proxy's sockets are numbered past 1023,
    where select() refuses them."""
    server = cloud.boot(token=MEMBER)
    url = _serial_url(cloud, server)
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        ws = _open(url)
        try:
            assert ws.socket.fileno() > 1023
            assert b"login:" in _read_until(ws, b"login:")
            ws.sendmsg(b"root\r")
            assert b"root\r" in _read_until(ws, b"root\r")
        finally:
            ws.close()
    finally:
        for fd in held:
            os.close(fd)


def test_tokens_refused(cloud):
    server = cloud.boot(token=MEMBER)
    CONF.set_override("token_ttl", 1, group="consoleauth")
    try:
        expired = _serial_url(cloud, server)
    finally:
        CONF.clear_override("token_ttl", group="consoleauth")
    time.sleep(1.1)
    with pytest.raises(Exception, match="403"):
        _open(expired)
    with pytest.raises(Exception, match="403"):
        _open(cloud.serial.url + "/?token=not-a-token")
    with pytest.raises(Exception, match="403"):
        _open(cloud.serial.url + "/")
    # A serial console's token is no good at the noVNC proxy (and is spent there).
    url = _serial_url(cloud, server)
    with pytest.raises(Exception, match="403"):
        _open(cloud.novnc.url.replace("http", "ws") + "/?" + url.split("?", 1)[1])


def test_novnc_page_is_served(cloud):
    with urllib.request.urlopen(cloud.novnc.url + "/vnc_lite.html") as resp:
        assert resp.status == 200 and b"noVNC" in resp.read()
    with pytest.raises(urllib.error.HTTPError, match="404"):
        urllib.request.urlopen(cloud.novnc.url + "/")  # no directory listing
    with pytest.raises(urllib.error.HTTPError, match="405"):
        urllib.request.urlopen(cloud.serial.url.replace("ws", "http") + "/vnc_lite.html")


def test_token_in_the_path_parameter():
    assert proxy.token_of("/?token=abc") == "abc"
    assert proxy.token_of("/vnc_lite.html?path=%3Ftoken%3Dxyz") == "xyz"
    assert proxy.token_of("/websockify", "token=c00k1e") == "c00k1e"
    assert proxy.token_of("/") is None
