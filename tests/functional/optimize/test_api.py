"""The Infrastructure Optimization API: Watcher's field names, states, versions
and error shape; bad input answered in that shape with nothing changed."""
import json

import pytest
import sqlalchemy as sa

from novella.db import optimize_models as om
from novella.optimize import strategies

AUDIT_FIELDS = {"uuid", "name", "audit_type", "state", "goal_uuid", "goal_name",
                "strategy_uuid", "strategy_name", "parameters", "interval", "scope",
                "auto_trigger", "next_run_time", "hostname", "start_time", "end_time", "force",
                "status_message", "links", "created_at", "updated_at", "deleted_at"}
PLAN_FIELDS = {"uuid", "audit_uuid", "strategy_uuid", "strategy_name", "state",
               "efficacy_indicators", "global_efficacy", "hostname", "status_message", "links",
               "created_at", "updated_at", "deleted_at"}
ACTION_FIELDS = {"uuid", "action_plan_uuid", "action_type", "state", "input_parameters",
                 "parents", "description", "status_message", "links", "created_at",
                 "updated_at", "deleted_at"}


def _fault(body):
    """Watcher's error body: the fault as JSON text in error_message."""
    assert set(body) == {"error_message"}, body
    fault = json.loads(body["error_message"])
    assert set(fault) == {"faultcode", "faultstring", "debuginfo"}
    return fault["faultstring"]


def _counts(cloud):
    with cloud.aio.api_db.session() as s:
        return tuple(s.scalar(sa.select(sa.func.count()).select_from(model))
                     for model in (om.AuditTemplate, om.Audit, om.ActionPlan, om.Action))


def test_versions_and_microversion_headers(dcloud):
    status, body, _ = dcloud.optimize("GET", "/", token=None, version=None)
    assert status == 200
    assert body["default_version"]["id"] == "v1"
    assert body["versions"][0]["max_version"] == "1.5"
    status, body, headers = dcloud.optimize("GET", "/v1", version="infra-optim 1.3")
    assert status == 200 and "audits" in body
    assert headers["OpenStack-API-Version"] == "infra-optim 1.3"
    assert headers["OpenStack-API-Minimum-Version"] == "1.0"
    assert headers["OpenStack-API-Maximum-Version"] == "1.5"
    status, body, headers = dcloud.optimize("GET", "/v1/goals", version="infra-optim 1.9")
    assert status == 406 and "1.9" in _fault(body)
    assert headers["OpenStack-API-Maximum-Version"] == "1.5"
    status, body, _ = dcloud.optimize("GET", "/v1/goals", version=None)
    assert status == 200
    status, body, _ = dcloud.optimize("GET", "/v1/goals", token=None)
    assert status == 401


def test_goals_and_strategies(dcloud):
    status, body, _ = dcloud.optimize("GET", "/v1/goals")
    assert status == 200
    names = {g["name"] for g in body["goals"]}
    assert names == {"cluster_maintaining", "hardware_maintenance"}
    goal = next(g for g in body["goals"] if g["name"] == "hardware_maintenance")
    assert set(goal) >= {"uuid", "name", "display_name", "efficacy_specification", "links"}
    assert dcloud.optimize("GET", f"/v1/goals/{goal['uuid']}")[1]["name"] == goal["name"]
    status, body, _ = dcloud.optimize("GET", "/v1/strategies?goal=hardware_maintenance")
    assert {s["name"] for s in body["strategies"]} == {"zone_migration", "cell_drain"}
    status, body, _ = dcloud.optimize("GET", "/v1/strategies/host_maintenance")
    assert body["goal_name"] == "cluster_maintaining"
    assert body["parameters_spec"]["required"] == ["maintenance_node"]
    status, body, _ = dcloud.optimize("GET", "/v1/strategies/nope")
    assert status == 404 and "nope" in _fault(body)


def test_every_resource_needs_the_admin_role(dcloud):
    before = _counts(dcloud)
    for method, path, body in [("GET", "/v1/goals", None), ("GET", "/v1/audits", None),
                               ("POST", "/v1/audits", {"audit_type": "ONESHOT",
                                                       "strategy": "cell_drain",
                                                       "parameters": {"source_cell": "cell1"}}),
                               ("GET", "/v1/action_plans", None)]:
        status, answer, _ = dcloud.optimize(method, path, body, token="demo:demo")
        assert status == 403, (path, answer)
        assert "Policy doesn't allow" in _fault(answer)
    assert _counts(dcloud) == before


BAD_AUDITS = [
    ({"audit_type": "ONESHOT", "strategy": "nope"}, "Strategy nope could not be found"),
    ({"audit_type": "ONESHOT", "goal": "nope"}, "Goal nope could not be found"),
    ({"audit_type": "ONESHOT", "goal": "cluster_maintaining", "strategy": "cell_drain"},
     "does not relate"),
    ({"audit_type": "ONESHOT", "strategy": "host_maintenance", "parameters": {}},
     "'maintenance_node' is a required property"),
    ({"audit_type": "ONESHOT", "strategy": "cell_drain",
      "parameters": {"source_cell": "cell1", "parallel_total": 0}}, "parallel_total"),
    ({"audit_type": "ONESHOT", "strategy": "cell_drain",
      "parameters": {"source_cell": "cell1", "source_zone": "nova"}}, "exactly one of"),
    ({"audit_type": "ONESHOT", "strategy": "cell_drain",
      "parameters": {"source_cell": "cell1", "colour": "blue"}}, "colour"),
    ({"audit_type": "CONTINUOUS", "strategy": "cell_drain", "interval": "60",
      "parameters": {"source_cell": "cell1"}}, "CONTINUOUS audits are not supported"),
    ({"audit_type": "SOMETIMES", "strategy": "cell_drain"}, "audit_type"),
    ({"audit_type": "ONESHOT", "strategy": "cell_drain", "parameters": {"source_cell": "c"},
      "flavour": 1}, "flavour"),
    ({"audit_type": "ONESHOT", "strategy": "cell_drain", "parameters": {"source_cell": "c"},
      "auto_trigger": "yes"}, "auto_trigger"),
    ({"audit_type": "ONESHOT"}, "A goal or a strategy must be given"),
    ([1, 2], "must be a JSON object"),
]


@pytest.mark.parametrize("body, message", BAD_AUDITS)
def test_bad_audit_is_refused_and_changes_nothing(dcloud, body, message):
    before = _counts(dcloud)
    status, answer, _ = dcloud.optimize("POST", "/v1/audits", body)
    assert status == 400, answer
    assert message in _fault(answer)
    assert _counts(dcloud) == before


def test_malformed_body_and_unknown_resources(dcloud):
    before = _counts(dcloud)
    import webob
    req = webob.Request.blank("/v1/audits", method="POST", body=b"{not json")
    req.headers["X-Auth-Token"] = "admin:admin"
    req.content_type = "application/json"
    resp = req.get_response(dcloud.aio.optimize_app)
    assert resp.status_int == 400 and "Malformed" in _fault(resp.json_body)
    for path in ("/v1/audits/nope", "/v1/action_plans/nope",
                 "/v1/actions/00000000-0000-0000-0000-000000000000", "/v1/nothing"):
        status, answer, _ = dcloud.optimize("GET", path)
        assert status == 404, path
        _fault(answer)
    status, answer, _ = dcloud.optimize("DELETE", "/v1/goals")
    assert status == 405
    status, answer, _ = dcloud.optimize("GET", "/v1/audits?limit=x")
    assert status == 400 and "limit" in _fault(answer)
    assert _counts(dcloud) == before


def test_audit_template_round_trip(dcloud):
    status, tpl, headers = dcloud.optimize("POST", "/v1/audit_templates", {
        "name": "drain-gen1", "goal": "hardware_maintenance", "strategy": "cell_drain",
        "description": "old hardware"})
    assert status == 201, tpl
    assert tpl["goal_name"] == "hardware_maintenance" and tpl["strategy_name"] == "cell_drain"
    assert headers["Location"].endswith(f"/v1/audit_templates/{tpl['uuid']}")
    status, answer, _ = dcloud.optimize("POST", "/v1/audit_templates", {
        "name": "drain-gen1", "goal": "hardware_maintenance"})
    assert status == 409, answer
    status, same, _ = dcloud.optimize("GET", "/v1/audit_templates/drain-gen1")
    assert same["uuid"] == tpl["uuid"]
    status, changed, _ = dcloud.optimize("PATCH", f"/v1/audit_templates/{tpl['uuid']}", [
        {"op": "replace", "path": "/description", "value": "gen1 racks"}])
    assert status == 200 and changed["description"] == "gen1 racks"
    # An audit from the template takes its goal and strategy.
    status, audit, _ = dcloud.optimize("POST", "/v1/audits", {
        "audit_type": "ONESHOT", "audit_template_uuid": tpl["uuid"],
        "parameters": {"source_cell": "cell1"}})
    assert status == 201, audit
    assert audit["strategy_name"] == "cell_drain" and audit["state"] == "PENDING"
    assert set(audit) == AUDIT_FIELDS
    status, _, _ = dcloud.optimize("DELETE", f"/v1/audit_templates/{tpl['uuid']}")
    assert status == 204
    assert dcloud.optimize("GET", f"/v1/audit_templates/{tpl['uuid']}")[0] == 404


def test_audit_plan_and_action_fields_and_states(dcloud):
    sid = dcloud.boot("a", availability_zone="nova:cell1-host1")
    audit = dcloud.audit("cell_drain", source_cell="cell1")
    assert audit["state"] == "SUCCEEDED", audit
    assert audit["goal_name"] == "hardware_maintenance"
    assert audit["goal_uuid"] == strategies.stable_uuid("goal", "hardware_maintenance")
    assert audit["parameters"] == {"source_cell": "cell1"}
    [plan] = dcloud.plan_of(audit)
    assert set(plan) == PLAN_FIELDS
    assert plan["state"] == "RECOMMENDED" and plan["audit_uuid"] == audit["uuid"]
    assert {i["name"]: i["value"] for i in plan["efficacy_indicators"]}[
        "instance_migrations_count"] == 1
    actions = dcloud.actions(plan["uuid"])
    assert all(set(a) == ACTION_FIELDS and a["state"] == "PENDING" for a in actions)
    disables = [a for a in actions if a["action_type"] == "change_nova_service_state"]
    [move] = [a for a in actions if a["action_type"] == "migrate"]
    assert {a["input_parameters"]["resource_id"] for a in disables} == {"cell1-host1",
                                                                         "cell1-host2"}
    assert move["parents"] == [a["uuid"] for a in disables]
    assert move["input_parameters"]["resource_id"] == sid
    assert move["input_parameters"]["migration_type"] == "cold"
    assert move["input_parameters"]["destination_node"].startswith("cell2-")
    # Before 1.5 there is no status_message.
    status, old, _ = dcloud.optimize("GET", f"/v1/action_plans/{plan['uuid']}",
                                     version="infra-optim 1.0")
    assert "status_message" not in old
    # Paging follows the reference's next link.
    status, page, _ = dcloud.optimize("GET", f"/v1/actions?action_plan_uuid={plan['uuid']}"
                                             "&limit=2")
    assert len(page["actions"]) == 2 and "marker=" in page["next"]
    # Bad transitions change nothing.
    for patch_state in ("SUCCEEDED", "ONGOING", "CANCELLING"):
        status, answer, _ = dcloud.optimize("PATCH", f"/v1/action_plans/{plan['uuid']}", [
            {"op": "replace", "path": "/state", "value": patch_state}])
        assert status == 400 and "State transition not allowed" in _fault(answer)
    status, answer, _ = dcloud.optimize("PATCH", f"/v1/action_plans/{plan['uuid']}", [
        {"op": "replace", "path": "/audit_uuid", "value": "x"}])
    assert status == 400
    assert dcloud.plan(plan["uuid"])["state"] == "RECOMMENDED"
    # Skip the move (1.5), then cancel the plan: nothing moved, no host disabled.
    status, skipped, _ = dcloud.optimize("PATCH", f"/v1/actions/{move['uuid']}", [
        {"op": "replace", "path": "/state", "value": "SKIPPED"},
        {"op": "replace", "path": "/status_message", "value": "kept for now"}])
    assert status == 200 and skipped["state"] == "SKIPPED"
    assert skipped["status_message"] == "kept for now"
    status, cancelled, _ = dcloud.optimize("PATCH", f"/v1/action_plans/{plan['uuid']}", [
        {"op": "replace", "path": "/state", "value": "CANCELLED"}])
    assert status == 200 and cancelled["state"] == "CANCELLED"
    assert {a["state"] for a in dcloud.actions(plan["uuid"])} == {"CANCELLED", "SKIPPED"}
    status, answer, _ = dcloud.optimize("POST", f"/v1/action_plans/{plan['uuid']}/start")
    assert status == 400 and "CANCELLED -> PENDING" in _fault(answer)
    assert dcloud.host_of(sid) == "cell1-host1"
    assert not dcloud.service("cell1-host1").disabled
    assert dcloud.optimize("DELETE", f"/v1/action_plans/{plan['uuid']}")[0] == 204
    assert dcloud.actions(plan["uuid"]) == []
    assert dcloud.optimize("DELETE", f"/v1/audits/{audit['uuid']}")[0] == 204
