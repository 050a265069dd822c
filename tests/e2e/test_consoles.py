"""Consoles through `novella up`: the openstack CLI's console URLs, a websocket
client on the serial proxy, and Chromium on the noVNC page the novncproxy serves."""
import os

import pytest

from tests.e2e import test_dashboard
from tests.e2e.test_dashboard import browser  # noqa: F401 - fixture
from tests.e2e.test_openstack_cli import cloud  # noqa: F401 - fixture
from tests.functional.consoles.test_serial_proxy import _open, _read_until

NOVNC_OFFSET, SERIAL_OFFSET = 7, 8


@pytest.fixture(scope="module")
def server(cloud):  # noqa: F811
    made = cloud.osc("server", "create", "--flavor", "m1.tiny", "--image", "cirros",
                     "--network", "private", "--wait", "console-vm", cloud="novella-demo")
    assert made["status"] == "ACTIVE", made
    return made["id"]


def test_serial_console_url_opens_the_guest(cloud, server):  # noqa: F811
    shown = cloud.osc("console", "url", "show", "--serial", server, cloud="novella-demo")
    assert shown["type"] == "serial" and shown["protocol"] == "serial", shown
    url = shown["url"]
    assert url.startswith(f"ws://127.0.0.1:{cloud.port_base + SERIAL_OFFSET}/?token="), url
    ws = _open(url)
    try:
        assert b"login:" in _read_until(ws, b"login:")
    finally:
        ws.close()
    with pytest.raises(Exception, match="403"):
        _open(url)  # used once


def test_novnc_url_of_a_guest_without_a_display(cloud, server):  # noqa: F811
    res = cloud.run("console", "url", "show", "--novnc", server, cloud="novella-demo")
    assert res.returncode != 0 and "Unavailable console type vnc." in res.stderr, res.stderr


def test_novnc_page_loads_and_tries_its_websocket(browser, cloud, tmp_path):  # noqa: F811
    base = f"http://127.0.0.1:{cloud.port_base + NOVNC_OFFSET}"
    page = browser.new_page()
    sockets = []
    page.on("websocket", lambda ws: sockets.append(ws))
    try:
        page.goto(f"{base}/vnc_lite.html?path=%3Ftoken%3Dno-such-token",
                  timeout=test_dashboard.WAIT_MS)
        # noVNC's page, from Debian's package, tries the proxy's websocket and is refused.
        page.wait_for_function("/Disconnected|Something went wrong/"
                               ".test(document.getElementById('status').textContent)",
                               timeout=test_dashboard.WAIT_MS)
        assert [ws.url for ws in sockets] == [
            f"ws://127.0.0.1:{cloud.port_base + NOVNC_OFFSET}/?token=no-such-token"]
        page.screenshot(path=os.path.join(tmp_path, "novnc.png"))
    finally:
        page.close()
