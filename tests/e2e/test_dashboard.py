"""The fleet dashboard in a real browser: Debian's headless Chromium driven by Playwright.

An in-process all-in-one (two cells of two simulated hosts, noauth2) has its
optimize endpoint served on a real port of 127.0.0.1; the browser loads
``/dashboard/#token=admin`` and the test reads what the page shows against
the books: each host's usage per resource class against Placement's usages
of its provider, the servers of each host against the rows of its cell's
database, the moves in flight against the cell's migration records. A
screenshot is kept (``$NOVELLA_ARTIFACTS`` or the test's tmp dir; the path
is printed). Playwright never downloads a browser here: it drives
/usr/bin/chromium (README.md, Install), and with CI=true a missing browser
fails the test.
"""
import os
import pathlib
import time

import pytest
import requests
import sqlalchemy as sa

from novella.allinone import AllInOne
from novella.db import cell_models as cm, cells as cells_mod
from tests.e2e import processes
from tests.functional.system.conftest import Cloud

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
WAIT_MS = 30000   # any one wait for the page


def _unavailable(message):
    if os.environ.get("CI") == "true":
        pytest.fail(message + "; CI=true requires it (README.md, Install)", pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="module")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright is not installed (the test extra)")
    if not os.access(CHROMIUM, os.X_OK):
        _unavailable(f"{CHROMIUM} is not installed (apt-get install -y chromium)")
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


class Fleet(Cloud):
    """An all-in-one (``api``, ``boot``: the Compute API in-process) with its optimize
    endpoint on a real port (``url``)."""

    def __init__(self, tmp_path):
        from novella.service import HTTPServer
        # A cold move spends a moment copying disks: a drain's progress can be watched.
        super().__init__(AllInOne(
            str(tmp_path / "data"), cells=2, hosts_per_cell=2, log=None,
            config_overrides={"simulated": {"resize_disk_copy_seconds": 0.3}}).start())
        self.server = HTTPServer(self.aio.optimize_app, "127.0.0.1", 0, "optimize").start()
        self.url = self.server.url

    def stop(self):
        from novella.conf import CONF
        self.server.stop()
        self.aio.stop()
        CONF.clear_override("resize_disk_copy_seconds", group="simulated")

    def books(self):
        """What the page must show, read from the databases and Placement:
        {cell name: {host: {"servers": {uuid}, "used": {rc: n}, "capacity": {rc: n}}}},
        and {cell name: {migration uuid}} of the moves in progress."""
        placement = self.aio.placement
        hosts, moves = {}, {}
        for cell in self.aio.cells:
            with cells_mod.cell_database(cell).session() as s:
                nodes = list(s.scalars(sa.select(cm.ComputeNode).where(cm.ComputeNode.deleted == 0)))
                rows = s.execute(sa.select(cm.Instance.uuid, cm.Instance.host).where(
                    cm.Instance.deleted == 0, cm.Instance.hidden.is_(False)))
                by_host = {}
                for uuid, host in rows:
                    by_host.setdefault(host, set()).add(uuid)
                moves[cell.name] = set(s.scalars(sa.select(cm.Migration.uuid).where(
                    cm.Migration.deleted == 0, cm.Migration.hidden.is_(False),
                    # every status a move has not ended in
                    cm.Migration.status.in_(["accepted", "pre-migrating", "migrating",
                                             "post-migrating", "finished", "confirming",
                                             "reverting", "preparing", "running"]))))
            hosts[cell.name] = {}
            for node in nodes:
                usages = placement.get(f"/resource_providers/{node.uuid}/usages")["usages"]
                _gen, inventories = placement.get_inventories(node.uuid)
                hosts[cell.name][node.host] = {
                    "servers": by_host.get(node.host, set()), "used": usages,
                    "capacity": {rc: int((inv["total"] - inv["reserved"]) * inv["allocation_ratio"])
                                 for rc, inv in inventories.items()}}
        return hosts, moves


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    f = Fleet(tmp_path_factory.mktemp("dashboard"))
    yield f
    f.stop()


def _artifact_dir(tmp_path):
    path = pathlib.Path(os.environ.get("NOVELLA_ARTIFACTS") or tmp_path)
    path.mkdir(parents=True, exist_ok=True)
    return path


def _polls(page):
    return int(page.evaluate("document.body.dataset.polls || 0"))


def _next_poll(page):
    """Wait until the page has drawn an answer asked for after this call."""
    seen = _polls(page)
    page.wait_for_function(f"Number(document.body.dataset.polls || 0) >= {seen + 2}",
                           timeout=WAIT_MS)


def _drill_down(page, provider):
    """{"host", "servers": [uuid], "used": {rc: n}, "capacity": {rc: n}} the drill-down
    shows once the host's square is clicked."""
    page.click(f".hm[data-provider='{provider}']")
    page.wait_for_selector(f"[data-detail='{provider}']", timeout=WAIT_MS)
    return page.evaluate("""(provider) => {
        const host = document.querySelector(`[data-detail="${provider}"]`);
        const used = {}, capacity = {};
        for (const n of host.querySelectorAll("[data-rc]")) {
            used[n.dataset.rc] = Number(n.dataset.used);
            capacity[n.dataset.rc] = Number(n.dataset.capacity);
            if (n.textContent !== `${n.dataset.used} / ${n.dataset.capacity}`)
                throw new Error("shown numbers differ: " + n.textContent);
        }
        return {host: host.dataset.host,
                servers: [...host.querySelectorAll("[data-server]")].map(s => s.dataset.server),
                used, capacity};
    }""", provider)


def _shown(page):
    """What the page shows: {cell: {host: {"servers": {uuid}, "used": {rc: n},
    "capacity": {rc: n}}}} (each host's square clicked, its drill-down read) and
    {cell: {migration uuid}}, read from its DOM."""
    squares = page.evaluate("""() => [...document.querySelectorAll("[data-cell] .hm")].map(
        h => [h.closest("[data-cell]").dataset.cell, h.dataset.provider])""")
    moves = page.evaluate("""() => Object.fromEntries([...document.querySelectorAll("[data-cell]")]
        .map(c => [c.dataset.cell, [...c.querySelectorAll("[data-migration]")]
                                       .map(m => m.dataset.migration)]))""")
    hosts = {cell: {} for cell in moves}
    for cell, provider in squares:
        shown = _drill_down(page, provider)
        hosts[cell][shown.pop("host")] = shown
    return {"hosts": hosts, "moves": moves}


def _as_sets(shown):
    hosts = {cell: {host: dict(h, servers=set(h["servers"])) for host, h in by_host.items()}
             for cell, by_host in shown["hosts"].items()}
    return hosts, {cell: set(m) for cell, m in shown["moves"].items()}


def test_dashboard_shows_the_fleet_as_the_books_say(browser, fleet, tmp_path):
    vms = [fleet.boot(f"vm{i}", flavor="1" if i % 2 else "2") for i in range(5)]
    # One move in flight: a resize waiting for its confirmation.
    status, body = fleet.api("POST", f"/servers/{vms[0]}/action",
                                 {"resize": {"flavorRef": "3"}})
    assert status == 202, body
    fleet.aio.wait_idle()
    assert fleet.api("GET", f"/servers/{vms[0]}")[1]["server"]["status"] == "VERIFY_RESIZE"

    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        page.goto(f"{fleet.url}/dashboard#token=admin")
        # (the first answers may show the hosts' own reports while Placement is read)
        page.wait_for_function("Number(document.body.dataset.polls || 0) >= 1 && "
                               "document.body.dataset.usage === 'placement'", timeout=WAIT_MS)
        # the token left the address bar; the page went to /dashboard/ (its files are relative)
        assert page.url == f"{fleet.url}/dashboard/"
        hosts, moves = fleet.books()
        shown_hosts, shown_moves = _as_sets(_shown(page))
        assert set(shown_hosts) == {"cell1", "cell2"}
        assert shown_hosts == hosts
        assert sum(len(h["servers"]) for c in hosts.values() for h in c.values()) == 5
        assert shown_moves == moves and sum(map(len, moves.values())) == 1
        # every resource class Placement has for a host, with its usage (not all zero)
        assert any(h["used"].get("MEMORY_MB") for c in shown_hosts.values() for h in c.values())
        assert page.locator("#totals span").all_inner_texts() == [
            "2 cells", "4 hosts", "5 servers", "1 move in flight"]

        # Live: a confirmed resize leaves the moves, a new server and a deleted one show
        # within a poll or two, without reloading the page.
        assert fleet.api("POST", f"/servers/{vms[0]}/action", {"confirmResize": None})[0] == 204
        extra = fleet.boot("late")
        assert fleet.api("DELETE", f"/servers/{vms[1]}")[0] == 204
        fleet.aio.wait_idle()
        _next_poll(page)
        hosts, moves = fleet.books()
        shown_hosts, shown_moves = _as_sets(_shown(page))
        assert shown_hosts == hosts and shown_moves == moves
        everywhere = set().union(*(h["servers"] for c in shown_hosts.values() for h in c.values()))
        assert extra in everywhere and vms[1] not in everywhere
        assert not any(shown_moves.values())

        shot = _artifact_dir(tmp_path) / "dashboard.png"
        page.screenshot(path=str(shot), full_page=True)
        print(f"dashboard screenshot: {shot}")
        assert shot.stat().st_size > 10000
    finally:
        page.close()


def test_dashboard_data_needs_an_administrators_token(browser, fleet):
    # The data: no token 401, a member's token 403, both in Watcher's error shape.
    r = requests.get(f"{fleet.url}/v1/fleet", timeout=10)
    assert r.status_code == 401
    r = requests.get(f"{fleet.url}/v1/fleet", headers={"X-Auth-Token": "demo:demo"}, timeout=10)
    assert r.status_code == 403 and "error_message" in r.json()
    # The endpoint's admin_api rule decides, not one role name: Watcher's default
    # admits the "administrator" role too.
    r = requests.get(f"{fleet.url}/v1/fleet", timeout=10,
                     headers={"X-Auth-Token": "demo:demo", "X-Roles": "administrator"})
    assert r.status_code == 200 and len(r.json()["fleet"]["cells"]) == 2
    # The page: public, and it asks for a token instead of showing anything.
    assert requests.get(f"{fleet.url}/dashboard/", timeout=10).status_code == 200
    for bad in ("/dashboard/__init__.py", "/dashboard/nothing.js", "/dashboard/%2e%2e%2fapp.py"):
        assert requests.get(f"{fleet.url}{bad}", timeout=10).status_code == 404, bad
    page = browser.new_page()
    try:
        page.goto(f"{fleet.url}/dashboard/")
        page.wait_for_selector("#login:not([hidden])", timeout=WAIT_MS)
        assert page.is_hidden("#main")
        page.goto(f"{fleet.url}/dashboard/#token=demo:demo")
        page.reload()
        page.wait_for_function(
            "document.getElementById('login-reason').textContent.includes('not an administrator')",
            timeout=WAIT_MS)
        assert page.is_hidden("#main") and page.locator("[data-cell]").count() == 0
        # the form takes an administrator's token and the fleet appears
        page.fill("#token", "admin")
        page.click("button[type=submit]")
        page.wait_for_selector("[data-cell=cell1] [data-host]", timeout=WAIT_MS)
        assert page.locator("[data-host]").count() == 4
    finally:
        page.close()



def _optimize(fleet, method, path, body=None):
    r = requests.request(method, f"{fleet.url}/v1{path}", json=body, timeout=30,
                         headers={"X-Auth-Token": "admin", "Accept": "application/json",
                                  "OpenStack-API-Version": "infra-optim 1.5"})
    return r.status_code, (r.json() if r.content else None)


def _plan_shown(page, plan_uuid):
    """(state, done, total, failed) the page shows for a plan, or None."""
    return page.evaluate("""(uuid) => {
        const p = document.querySelector(`[data-plan="${uuid}"]`);
        return p ? [p.dataset.state, Number(p.dataset.done), Number(p.dataset.total),
                    Number(p.dataset.failed)] : null;
    }""", plan_uuid)


def test_dashboard_follows_a_cell_drain(browser, fleet, tmp_path):
    """A plan draining cell1 into cell2, started through the Watcher API, one of whose
    servers cannot start on any host of cell2: the page's count of actions done climbs
    while the plan runs, and at the end it shows what the API and the books say (the
    plan FAILED for that one server, with the reason; every other server in cell2)."""
    from oslo_policy import policy

    from novella.virt import simulated
    enforcer = fleet.aio.compute_api_app.app.api.enforcer
    enforcer.load_rules()
    enforcer.set_rules(policy.Rules.from_dict(
        {"compute:servers:resize:cross_cell": "rule:context_is_admin"}),
        overwrite=False, use_conf=False)
    booted = [fleet.boot(f"drain{i}", host=f"cell1-host{1 + i % 2}") for i in range(4)]
    doomed = booted[2]
    hosts, _moves = fleet.books()
    in_cell1 = set().union(*(h["servers"] for h in hosts["cell1"].values()))
    assert len(in_cell1) >= 4

    status, audit = _optimize(fleet, "POST", "/audits", {
        "audit_type": "ONESHOT", "goal": "hardware_maintenance", "strategy": "cell_drain",
        "parameters": {"source_cell": "cell1", "target_cells": ["cell2"],
                       "parallel_total": 1, "parallel_per_node": 1}})
    assert status == 201, audit

    def planned():
        st, a = _optimize(fleet, "GET", f"/audits/{audit['uuid']}")
        assert a["state"] not in ("FAILED", "CANCELLED"), a
        return a["state"] == "SUCCEEDED"
    processes.wait("the audit's plan", planned)
    status, plans = _optimize(fleet, "GET", f"/action_plans?audit_uuid={audit['uuid']}")
    assert status == 200 and len(plans["action_plans"]) == 1, plans
    plan = plans["action_plans"][0]
    status, actions = _optimize(fleet, "GET", f"/actions?action_plan_uuid={plan['uuid']}")
    total = len(actions["actions"])
    assert total >= len(in_cell1)

    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        page.goto(f"{fleet.url}/dashboard/#token=admin")
        page.wait_for_selector(f"[data-plan='{plan['uuid']}']", timeout=WAIT_MS)
        assert _plan_shown(page, plan["uuid"]) == ["RECOMMENDED", 0, total, 0]

        for host in ("cell2-host1", "cell2-host2"):
            simulated.inject_fault(host, "spawn", instance_uuid=doomed, times=None)
        status, body = _optimize(fleet, "POST", f"/action_plans/{plan['uuid']}/start")
        assert status in (200, 202), body
        seen, shot_taken = [], False
        shot = _artifact_dir(tmp_path) / "dashboard-drain.png"
        end = time.monotonic() + 180
        while time.monotonic() < end:
            shown = _plan_shown(page, plan["uuid"])
            if shown and (not seen or seen[-1] != shown):
                seen.append(shown)
            if shown and shown[0] == "ONGOING" and total // 2 <= shown[1] < total \
                    and not shot_taken:   # half way: servers on both sides
                page.screenshot(path=str(shot), full_page=True)
                shot_taken = True
            if shown and shown[0] in ("SUCCEEDED", "FAILED", "CANCELLED"):
                break
            time.sleep(0.1)
        print(f"plan as the page showed it: {seen}")
        print(f"dashboard screenshot during the drain: {shot}")
        assert seen[-1] == ["FAILED", total - 1, total, 1], seen
        # the count climbed while the plan ran: the page showed it part way
        assert any(s[0] == "ONGOING" and 0 < s[1] < total for s in seen), seen
        assert [s[1] for s in seen] == sorted(s[1] for s in seen), seen
        assert shot_taken
        # the page's last picture is the books': every server but one in cell2, no move left
        _next_poll(page)
        hosts, moves = fleet.books()
        shown_hosts, shown_moves = _as_sets(_shown(page))
        assert shown_hosts == hosts and shown_moves == moves
        assert set().union(*(h["servers"] for h in shown_hosts["cell1"].values())) == {doomed}
        assert in_cell1 - {doomed} <= set().union(
            *(h["servers"] for h in shown_hosts["cell2"].values()))
        # the failure as the API records it, with the server's name
        status, body = _optimize(fleet, "GET", f"/actions?action_plan_uuid={plan['uuid']}")
        (failed,) = [a for a in body["actions"] if a["state"] != "SUCCEEDED"]
        assert failed["state"] == "FAILED" and failed["input_parameters"]["resource_id"] == doomed
        assert failed["status_message"]
        assert page.inner_text(f"[data-failed-action='{failed['uuid']}']") == \
            f"{failed['action_type']} drain2: {failed['status_message']}"
        status, plan_now = _optimize(fleet, "GET", f"/action_plans/{plan['uuid']}")
        assert plan_now["state"] == "FAILED" and plan_now["status_message"]
        assert page.inner_text(f"[data-plan='{plan['uuid']}'] .plan-message") == \
            plan_now["status_message"]
        end_shot = _artifact_dir(tmp_path) / "dashboard-drain-end.png"
        page.screenshot(path=str(end_shot), full_page=True)
        print(f"dashboard screenshot at the drain's end: {end_shot}")
    finally:
        simulated.clear_faults()
        page.close()
