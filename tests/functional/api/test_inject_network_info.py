"""injectNetworkInfo (admin): the host writes the server's network configuration
(its info cache) into the simulated guest again, which records it."""
import pytest

from novella.virt import simulated
from tests.functional.moves.conftest import make_cloud  # noqa: F401 - fixture


@pytest.fixture
def cloud(make_cloud):  # noqa: F811
    return make_cloud(hosts=1)


def _domain(cloud, sid):
    return cloud.aio.computes[cloud.host_of(sid)].driver._load(sid)


def test_inject_network_info_reaches_the_guest(cloud):
    sid = cloud.api("POST", "/servers", {"server": {
        "name": "n", "flavorRef": "1", "imageRef": cloud.aio.demo_image["id"],
        "networks": "auto"}})[1]["server"]["id"]
    cloud.aio.wait_idle()
    assert "network_info_injections" not in _domain(cloud, sid)
    status, body = cloud.action(sid, {"injectNetworkInfo": None})
    assert status == 202 and body is None
    cloud.aio.wait_idle()
    domain = _domain(cloud, sid)
    assert domain["network_info_injections"] == 1
    mac = [a["OS-EXT-IPS-MAC:mac_addr"] for ips in cloud.server(sid)["addresses"].values()
           for a in ips]
    assert [vif["address"] for vif in domain["injected_network_info"]] == mac[:1]
    assert cloud.server(sid)["status"] == "ACTIVE"


def test_inject_network_info_is_admin_only_and_checks_its_input(cloud):
    status, body = cloud.api("POST", "/servers", {"server": {
        "name": "n", "flavorRef": "1", "imageRef": cloud.aio.demo_image["id"],
        "networks": "none"}}, token="alice:demo")
    sid = body["server"]["id"]
    cloud.aio.wait_idle()
    status, body = cloud.action(sid, {"injectNetworkInfo": None}, token="alice:demo")
    assert status == 403
    status, body = cloud.action(sid, {"injectNetworkInfo": None, "other": 1})
    assert status == 400
    cloud.aio.wait_idle()
    assert "network_info_injections" not in _domain(cloud, sid)
    # A guest whose host cannot write it: a fault, the server untouched.
    simulated.inject_fault(None, "inject_network_info", exc=RuntimeError("no agent"))
    try:
        assert cloud.action(sid, {"injectNetworkInfo": None})[0] == 202
        cloud.aio.wait_idle()
    finally:
        simulated.clear_faults()
    assert "no agent" in cloud.fault(sid)
    assert cloud.server(sid)["status"] == "ACTIVE"
