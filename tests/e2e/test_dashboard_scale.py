"""The dashboard at fleet scale in a real browser: 10,000 simulated hosts in ten cells
(``NOVELLA_DASHBOARD_HOSTS`` sets another number), a few servers on one host, one
host disabled with a reason. The page draws one square per host, grouped by cell;
clicking the busy host's square shows its servers and its resource classes; the
disabled host is listed with its reason under its cell without hovering. The
screenshot is kept as ``dashboard-fleet.png`` (``$NOVELLA_ARTIFACTS`` or the
test's tmp dir; docs/img/dashboard-fleet.png is one)."""
import os
import time

import pytest

from novella.allinone import AllInOne
from tests.e2e.test_dashboard import _artifact_dir, _drill_down, browser  # noqa: F401 (a fixture)
from tests.functional.system.conftest import Cloud

HOSTS = int(os.environ.get("NOVELLA_DASHBOARD_HOSTS", "10000"))
CELLS = 10
SERVERS = 8


@pytest.fixture(scope="module")
def large(tmp_path_factory):
    from novella.service import HTTPServer
    t0 = time.monotonic()
    from novella.conf import CONF
    # The hosts' periodic work (their heartbeats) is not run, to spare the machine: they
    # count as up for an hour after start-up.
    cloud = Cloud(AllInOne(str(tmp_path_factory.mktemp("fleet") / "data"), cells=CELLS,
                           hosts_per_cell=HOSTS // CELLS, log=None,
                           config_overrides={None: {"service_down_time": 3600}}).start())
    server = HTTPServer(cloud.aio.optimize_app, "127.0.0.1", 0, "optimize").start()
    cloud.url = server.url
    print(f"{HOSTS} hosts started in {time.monotonic() - t0:.0f} s")
    yield cloud
    server.stop()
    cloud.aio.stop()
    CONF.clear_override("service_down_time")


def test_the_page_at_fleet_scale(browser, large, tmp_path):   # noqa: F811
    busy = "cell3-host7"
    status, body = large.api("POST", "/servers", {"server": {
        "name": "busy", "flavorRef": "1", "imageRef": large.aio.demo_image["id"],
        "networks": "none", "availability_zone": f"nova:{busy}",
        "min_count": SERVERS, "max_count": SERVERS}})
    assert status == 202, body
    large.aio.wait_idle(600)
    status, body = large.api("GET", "/os-services?binary=nova-compute&host=cell5-host42")
    (svc,) = body["services"]
    status, body = large.api("PUT", f"/os-services/{svc['id']}",
                             {"status": "disabled", "disabled_reason": "fan replacement"})
    assert status == 200, body

    page = browser.new_page(viewport={"width": 1600, "height": 1200})
    try:
        t0 = time.monotonic()
        page.goto(f"{large.url}/dashboard/#token=admin")
        page.wait_for_function(f"document.querySelectorAll('.heatmap .hm').length === {HOSTS}",
                               timeout=180000)
        print(f"heat-map of {HOSTS} hosts drawn {time.monotonic() - t0:.1f} s after loading")
        assert page.locator("[data-cell]").count() == CELLS
        assert page.locator("#totals span").all_inner_texts()[:3] == [
            f"{CELLS} cells", f"{HOSTS} hosts", f"{SERVERS} servers"]
        # the busy host is the most used: its square is coloured by its use
        use = float(page.get_attribute(f"[data-cell=cell3] .hm[data-host='{busy}']", "data-use"))
        assert use > 0
        assert page.locator(".heatmap .hm[data-use='0']").count() == HOSTS - 1

        # the disabled host with its reason, visible under its cell without hovering
        apart = page.locator("[data-cell=cell5] [data-apart='cell5-host42']")
        assert apart.is_visible() and "fan replacement" in apart.inner_text()
        assert page.locator("[data-apart]").count() == 1   # every other host up and enabled

        # drill-down: the busy host's servers and only the classes it has
        provider = page.get_attribute(f".hm[data-host='{busy}']", "data-provider")
        shown = _drill_down(page, provider)
        assert shown["host"] == busy and len(shown["servers"]) == SERVERS
        assert set(shown["used"]) == {"VCPU", "MEMORY_MB", "DISK_GB"}
        assert shown["used"]["MEMORY_MB"] == 512 * SERVERS

        shot = _artifact_dir(tmp_path) / "dashboard-fleet.png"
        page.screenshot(path=str(shot), full_page=False)
        print(f"dashboard screenshot at {HOSTS} hosts: {shot}")
    finally:
        page.close()
