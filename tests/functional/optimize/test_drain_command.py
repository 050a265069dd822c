"""`novella drain`: creates the audit, shows the plan, asks, starts and follows it."""
import io
import json

import webob

from novella.cmd import drain
from novella.cmd.main import build_parser


class _Response:
    def __init__(self, resp):
        self.status_code, self.content, self.text = resp.status_int, resp.body, resp.text

    def json(self):
        return json.loads(self.content)


class InProcessSession:
    """What the command asks of a keystoneauth session, answered by the WSGI app."""

    def __init__(self, app):
        self.app = app

    def request(self, url, method, json=None, headers=None, raise_exc=True):
        req = webob.Request.blank(url[len("http://optimize"):], method=method)
        req.headers.update(headers or {})
        req.headers["X-Auth-Token"] = "admin:admin"
        if json is not None:
            req.json_body = json
            req.content_type = "application/json"
        return _Response(req.get_response(self.app))


def _run(cloud, argv, answer="y"):
    args = build_parser().parse_args(["drain", *argv, "--poll", "0.05"])
    client = drain.Client(InProcessSession(cloud.aio.optimize_app), "http://optimize")
    out = io.StringIO()
    code = drain.main(args, client=client, out=out, ask=lambda _prompt: answer)
    return code, out.getvalue()


def test_drain_with_yes_moves_every_server_and_reports(dcloud):
    sids = [dcloud.boot(f"s{i}", availability_zone=f"nova:cell1-host{1 + i % 2}")
            for i in range(3)]
    code, text = _run(dcloud, ["--source-cell", "cell1", "--parallel-total", "2", "--yes"])
    assert code == 0, text
    assert "disable 2 hosts (cell1-host1, cell1-host2), then move 3 servers (3 cold)" in text
    assert "/dashboard/#token=TOKEN" in text
    assert "3/3 servers moved" in text and "SUCCEEDED" in text
    assert all(dcloud.mapped_cell(s) == "cell2" for s in sids)


def test_drain_that_does_not_fit_names_the_servers_and_moves_nothing(make_dcloud):
    cloud = make_dcloud()          # no cross-cell policy: nothing may leave cell1
    sid = cloud.boot("s", availability_zone="nova:cell1-host1")
    code, text = _run(cloud, ["--source-cell", "cell1", "--yes"])
    assert code == 1
    assert "The plan does not fit; nothing was moved." in text and sid in text
    assert cloud.host_of(sid) == "cell1-host1"
    assert not cloud.service("cell1-host1").disabled


def test_drain_answered_no_leaves_the_plan_recommended(dcloud):
    sid = dcloud.boot("s", availability_zone="nova:cell1-host1")
    code, text = _run(dcloud, ["--host", "cell1-host1", "--backup-host", "cell1-host2"],
                      answer="n")
    assert code == 0 and "Not started" in text and "1 live" in text
    status, body, _ = dcloud.optimize("GET", "/v1/action_plans")
    assert [p["state"] for p in body["action_plans"]] == ["RECOMMENDED"]
    assert dcloud.host_of(sid) == "cell1-host1"
