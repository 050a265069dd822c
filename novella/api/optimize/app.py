"""Infrastructure Optimization API v1 (OpenStack Watcher's wire format), the
part a drain needs (docs/drain.md):

    GET  /                                     versions
    GET  /v1                                   the v1 document
    GET  /v1/goals[/detail], /v1/goals/{goal}                  (uuid or name)
    GET  /v1/strategies[/detail], /v1/strategies/{strategy}    (?goal=)
    GET|POST /v1/audit_templates[/detail], GET|PATCH|DELETE /v1/audit_templates/{t}
    GET|POST /v1/audits[/detail], GET|PATCH|DELETE /v1/audits/{audit}
    GET  /v1/action_plans[/detail] (?audit_uuid=), GET|PATCH|DELETE /v1/action_plans/{uuid}
    POST /v1/action_plans/{uuid}/start
    GET  /v1/actions[/detail] (?action_plan_uuid=, ?audit_uuid=), GET|PATCH /v1/actions/{uuid}

Microversions ``OpenStack-API-Version: infra-optim 1.x`` (1.0 to
``MAX_VERSION``), answered with the minimum, maximum and chosen version
headers; a version out of range is 406. Errors are Watcher's: the fault as a
JSON string in ``error_message``. Every ``/v1`` resource needs the admin
role (the reference's default policy, ``novella/policies/optimize.py``).

Goals and strategies are the code's (``novella/optimize/strategies.py``);
audits are planned and plans run by the engine (``novella/optimize/applier.py``).

The fleet dashboard is handed every ``GET /dashboard``, ``GET /dashboard/...``
and ``GET /v1/fleet`` request:

    novella.api.optimize.dashboard.handle(req) -> (status, body[, headers])

``req`` is a ``novella.api.rest.Request``; ``req.state`` holds ``conf``,
``api_db`` (the API database), ``placement`` (a PlacementClient) and
``optimize_app`` (this API as a WSGI callable, for reading plans through
their JSON). The ``/dashboard`` pages are public; ``/v1/fleet`` needs a
token with the admin role, as every ``/v1`` resource.
"""
import datetime
import importlib
import json
import re
import uuid as uuid_mod

import microversion_parse
import sqlalchemy as sa

from novella.api import rest
from novella.db import optimize_models as om
from novella.optimize import strategies
from novella.optimize.applier import context_record

MIN_VERSION = "1.0"
MAX_VERSION = "1.5"
VERSION_HEADER = "OpenStack-API-Version"
SERVICE_TYPE = "infra-optim"
MAX_LIMIT = 1000          # the reference's [api] max_limit default

AUDIT_TYPES = ("ONESHOT", "CONTINUOUS", "EVENT")
PLAN_TRANSITIONS = {      # action plan state -> states a PATCH may set
    "RECOMMENDED": {"PENDING", "CANCELLED"},
    "PENDING": {"CANCELLED"},
    "ONGOING": {"CANCELLING", "SUSPENDED"},
    "SUSPENDED": {"ONGOING", "PENDING", "CANCELLING"},
}
PLAN_RUNNING = ("PENDING", "ONGOING", "SUSPENDED", "CANCELLING")


def error_body(code, title, message, kind):
    """Watcher's error document: the fault as a JSON string in ``error_message``."""
    fault = {"faultcode": "Client" if code < 500 else "Server",
             "faultstring": message, "debuginfo": None}
    return {"error_message": json.dumps(fault)}


# -- versions -------------------------------------------------------------------------

def _parse_version(text):
    m = re.fullmatch(r"(\d+)\.(\d+)", text or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def _vstr(v):
    return f"{v[0]}.{v[1]}"


class Microversions:
    """Chooses the request's version (``environ["optimize.version"]``) and adds
    the version headers to every ``/v1`` answer; 406 for one out of range."""

    def __init__(self, app):
        self.app = app

    def __call__(self, environ, start_response):
        path = environ.get("PATH_INFO") or "/"
        if not path.startswith("/v1"):
            return self.app(environ, start_response)
        lo, hi = _parse_version(MIN_VERSION), _parse_version(MAX_VERSION)
        asked = microversion_parse.get_version(
            {VERSION_HEADER: environ.get("HTTP_OPENSTACK_API_VERSION") or ""},
            service_type=SERVICE_TYPE)
        headers = [("OpenStack-API-Minimum-Version", MIN_VERSION),
                   ("OpenStack-API-Maximum-Version", MAX_VERSION)]
        if asked is None:
            version = lo
        elif asked == "latest":
            version = hi
        else:
            version = _parse_version(asked)
            if version is None or not lo <= version <= hi:
                message = (f"Invalid value for {VERSION_HEADER} header: {asked}"
                           if version is None else
                           f"Version {asked} was requested but the minor version is not "
                           f"supported by this service. The supported version range is: "
                           f"[{MIN_VERSION}, {MAX_VERSION}].")
                code = 400 if version is None else 406
                body = json.dumps(error_body(code, "", message, "")).encode()
                start_response(f"{code} {'Bad Request' if code == 400 else 'Not Acceptable'}",
                               headers + [("Content-Type", "application/json"),
                                          ("Content-Length", str(len(body)))])
                return [body]
        environ["optimize.version"] = version
        headers.append((VERSION_HEADER, f"{SERVICE_TYPE} {_vstr(version)}"))

        def with_versions(status, response_headers, exc_info=None):
            return start_response(status, list(response_headers) + headers, exc_info)
        return self.app(environ, with_versions)


def _version(req):
    return req.environ.get("optimize.version") or _parse_version(MIN_VERSION)


def _at_least(req, text):
    return _version(req) >= _parse_version(text)


# -- helpers --------------------------------------------------------------------------------

def _base(req):
    return req.host_url + req.script_name


def _links(req, collection, ident):
    return [{"href": f"{_base(req)}/v1/{collection}/{ident}", "rel": "self"},
            {"href": f"{_base(req)}/{collection}/{ident}", "rel": "bookmark"}]


def _time(value):
    if value is None:
        return None
    return value.replace(tzinfo=datetime.timezone.utc).isoformat()


def _stamps(row):
    return {"created_at": _time(row.created_at),
            "updated_at": _time(row.updated_at), "deleted_at": None}


def _authorize(req, rule):
    ctxt = req.context
    enforcer = req.state["enforcer"]
    target = {"project_id": ctxt.project_id, "user_id": ctxt.user_id}
    if not enforcer.authorize(rule, target, ctxt, do_raise=False):
        raise rest.HTTPError(403, f"Policy doesn't allow {rule} to be performed.")


def _db(req):
    return req.state["api_db"]


def _is_uuid(value):
    try:
        uuid_mod.UUID(str(value))
        return True
    except ValueError:
        return False


def _page(req, rows, collection, view, query_extra=""):
    """Watcher's paging: ``limit`` (at most MAX_LIMIT), ``marker``, ``sort_key``,
    ``sort_dir``; a ``next`` link when the page is full."""
    limit = req.GET.get("limit")
    if limit is not None:
        try:
            limit = int(limit)
        except ValueError:
            raise rest.bad_request(f"Invalid input for field/attribute limit. Value: '{limit}'. "
                                   "unable to convert to int")
        if limit < 0:
            raise rest.bad_request("Limit must be positive")
    limit = min(limit or MAX_LIMIT, MAX_LIMIT)
    sort_dir = req.GET.get("sort_dir", "asc")
    if sort_dir not in ("asc", "desc"):
        raise rest.bad_request(f"Invalid sort direction: {sort_dir}. Acceptable values are "
                               "'asc' or 'desc'")
    docs = [view(req, r) for r in rows]
    sort_key = req.GET.get("sort_key")
    if sort_key:
        # A field shown in the documents, and one with a plain value.
        if docs and (sort_key not in docs[0] or isinstance(docs[0][sort_key], (dict, list))):
            raise rest.bad_request(f"The sort_key value {sort_key} is an invalid field "
                                   "for sorting")
        docs.sort(key=lambda d: (d.get(sort_key) is None, str(d.get(sort_key) or "")),
                  reverse=sort_dir == "desc")
    elif sort_dir == "desc":
        docs.reverse()
    marker = req.GET.get("marker")
    if marker:
        uuids = [d["uuid"] for d in docs]
        if marker not in uuids:
            raise rest.bad_request(f"Marker {marker} could not be found.")
        docs = docs[uuids.index(marker) + 1:]
    body = {collection: docs[:limit]}
    if len(docs) > limit:
        body["next"] = (f"{_base(req)}/v1/{collection}?limit={limit}"
                        f"&marker={docs[limit - 1]['uuid']}{query_extra}")
    return 200, body


def _get(s, model, ident):
    """The row of ``model`` named by its uuid, or by its name where it has one; 404 if none."""
    if _is_uuid(ident):
        column = model.uuid
    elif hasattr(model, "name"):
        column = model.name
    else:
        raise rest.not_found(f"{model.__name__} {ident} could not be found")
    row = s.scalars(sa.select(model).where(column == ident)).first()
    if row is None:
        raise rest.not_found(f"{model.__name__} {ident} could not be found")
    return row


def _patch_ops(req, allowed_paths):
    ops = req.json()
    if not isinstance(ops, list) or not ops:
        raise rest.bad_request("The request body must be a JSON patch: a list of operations.")
    out = {}
    for op in ops:
        if not isinstance(op, dict) or op.get("op") not in ("replace", "add", "remove"):
            raise rest.bad_request("Each patch operation needs an op of add, replace or remove.")
        path = op.get("path")
        if not isinstance(path, str) or path.lstrip("/") not in allowed_paths:
            raise rest.bad_request(f"Invalid patch path: {path!r}. Allowed: "
                                   + ", ".join("/" + p for p in allowed_paths))
        if op["op"] != "remove" and "value" not in op:
            raise rest.bad_request(f"The patch operation on {path} needs a value.")
        out[path.lstrip("/")] = op.get("value") if op["op"] != "remove" else None
    return out


def _wake(req):
    engine = req.state.get("engine")
    if engine is not None:
        engine.wake()


# -- goals and strategies ---------------------------------------------------------------

def _list_goals(req):
    return _page(req, list(strategies.GOALS), "goals", _goal_view)


def _goal_view(req, name):
    gid = strategies.stable_uuid("goal", name)
    return {"uuid": gid, "name": name, "display_name": strategies.GOALS[name],
            "efficacy_specification": [
                {k: s[k] for k in ("name", "description", "unit", "schema")}
                for s in strategies.EFFICACY_SPEC],
            "links": _links(req, "goals", gid), "created_at": None, "updated_at": None,
            "deleted_at": None}


def _find_goal(ident):
    for name in strategies.GOALS:
        if ident in (name, strategies.stable_uuid("goal", name)):
            return name
    return None


def _find_strategy(ident):
    for name in strategies.STRATEGIES:
        if ident in (name, strategies.stable_uuid("strategy", name)):
            return name
    return None


def show_goal(req, goal):
    _authorize(req, "goal:get")
    name = _find_goal(goal)
    if name is None:
        raise rest.not_found(f"Goal {goal} could not be found")
    return 200, _goal_view(req, name)


def _strategy_view(req, name):
    s = strategies.STRATEGIES[name]
    sid = strategies.stable_uuid("strategy", name)
    return {"uuid": sid, "name": name, "display_name": s["display_name"],
            "goal_uuid": strategies.stable_uuid("goal", s["goal"]), "goal_name": s["goal"],
            "parameters_spec": s["parameters_spec"], "links": _links(req, "strategies", sid),
            "created_at": None, "updated_at": None, "deleted_at": None}


def _strategies(req):
    goal = req.GET.get("goal")
    names = list(strategies.STRATEGIES)
    if goal:
        goal_name = _find_goal(goal)
        names = strategies.strategies_of(goal_name) if goal_name else []
    return names


def _list_strategies(req):
    return _page(req, _strategies(req), "strategies", _strategy_view)


def show_strategy(req, strategy):
    _authorize(req, "strategy:get")
    name = _find_strategy(strategy)
    if name is None:
        raise rest.not_found(f"Strategy {strategy} could not be found")
    return 200, _strategy_view(req, name)


# -- audit templates -------------------------------------------------------------------

def _template_view(req, row):
    doc = {"uuid": row.uuid, "name": row.name, "description": row.description,
           "goal_uuid": strategies.stable_uuid("goal", row.goal), "goal_name": row.goal,
           "strategy_uuid": strategies.stable_uuid("strategy", row.strategy)
           if row.strategy else None,
           "strategy_name": row.strategy, "scope": json.loads(row.scope),
           "links": _links(req, "audit_templates", row.uuid)}
    doc.update(_stamps(row))
    return doc


def _goal_and_strategy(goal, strategy):
    """(goal name, strategy name) from names or uuids; 400 when they do not match."""
    goal_name = _find_goal(goal) if goal is not None else None
    if goal is not None and goal_name is None:
        raise rest.bad_request(f"Goal {goal} could not be found")
    strategy_name = None
    if strategy is not None:
        strategy_name = _find_strategy(strategy)
        if strategy_name is None:
            raise rest.bad_request(f"Strategy {strategy} could not be found")
        if goal_name is None:
            goal_name = strategies.goal_of(strategy_name)
        elif strategies.goal_of(strategy_name) != goal_name:
            raise rest.bad_request(f"'{strategy_name}' strategy does not relate to the "
                                   f"'{goal_name}' goal")
    if goal_name is None:
        raise rest.bad_request("A goal or a strategy must be given.")
    return goal_name, strategy_name


def _check_fields(body, allowed, what):
    if not isinstance(body, dict):
        raise rest.bad_request(f"The {what} must be a JSON object.")
    unknown = sorted(set(body) - set(allowed))
    if unknown:
        raise rest.bad_request(f"Unknown attribute for argument {what}: {unknown[0]}")


def _string(body, key, maxlen, required=False):
    value = body.get(key)
    if value is None:
        if required:
            raise rest.bad_request(f"Mandatory field missing: {key}")
        return None
    if not isinstance(value, str) or len(value) > maxlen:
        raise rest.bad_request(f"Invalid input for field/attribute {key}: a string of at "
                               f"most {maxlen} characters is expected.")
    return value


def _list_by_goal_and_strategy(req, model, collection, view):
    """Audit templates or audits, filtered by ``?goal=`` and ``?strategy=`` (names or uuids)."""
    with _db(req).session() as s:
        q = sa.select(model).order_by(model.id)
        goal = req.GET.get("goal")
        if goal:
            q = q.where(model.goal == (_find_goal(goal) or goal))
        strategy = req.GET.get("strategy")
        if strategy:
            q = q.where(model.strategy == (_find_strategy(strategy) or strategy))
        return _page(req, s.scalars(q).all(), collection, view)


def _list_templates(req):
    return _list_by_goal_and_strategy(req, om.AuditTemplate, "audit_templates", _template_view)


def create_template(req):
    _authorize(req, "audit_template:create")
    body = req.json()
    _check_fields(body, ("name", "description", "goal", "strategy", "scope"), "audit template")
    name = _string(body, "name", 63, required=True)
    description = _string(body, "description", 255)
    goal, strategy = _goal_and_strategy(body.get("goal"), body.get("strategy"))
    scope = body.get("scope") or []
    if not isinstance(scope, list):
        raise rest.bad_request("Invalid input for field/attribute scope: a list is expected.")
    with _db(req).session(write=True) as s:
        if s.scalars(sa.select(om.AuditTemplate).where(om.AuditTemplate.name == name)).first():
            raise rest.HTTPError(409, f"An audit_template with UUID or name {name} "
                                      "already exists")
        row = om.AuditTemplate(uuid=str(uuid_mod.uuid4()), name=name, description=description,
                               goal=goal, strategy=strategy, scope=json.dumps(scope))
        s.add(row)
        s.flush()
        doc = _template_view(req, row)
    return 201, doc, {"Location": doc["links"][0]["href"]}


def show_template(req, template):
    _authorize(req, "audit_template:get")
    with _db(req).session() as s:
        return 200, _template_view(req, _get(s, om.AuditTemplate, template))


def update_template(req, template):
    _authorize(req, "audit_template:update")
    changes = _patch_ops(req, ("name", "description", "goal", "strategy"))
    with _db(req).session(write=True) as s:
        row = _get(s, om.AuditTemplate, template)
        if "name" in changes:
            row.name = _string(changes, "name", 63, required=True)
        if "description" in changes:
            row.description = _string(changes, "description", 255)
        if "goal" in changes or "strategy" in changes:
            goal, strategy = _goal_and_strategy(changes.get("goal", row.goal),
                                                changes.get("strategy", row.strategy))
            row.goal, row.strategy = goal, strategy
        s.flush()
        return 200, _template_view(req, row)


def delete_template(req, template):
    _authorize(req, "audit_template:delete")
    with _db(req).session(write=True) as s:
        s.delete(_get(s, om.AuditTemplate, template))
    return 204, None


# -- audits --------------------------------------------------------------------------------

def _audit_view(req, row):
    doc = {"uuid": row.uuid, "name": row.name, "audit_type": row.audit_type, "state": row.state,
           "goal_uuid": strategies.stable_uuid("goal", row.goal), "goal_name": row.goal,
           "strategy_uuid": strategies.stable_uuid("strategy", row.strategy)
           if row.strategy else None,
           "strategy_name": row.strategy, "parameters": json.loads(row.parameters),
           "interval": None, "scope": json.loads(row.scope), "auto_trigger": row.auto_trigger,
           "next_run_time": None, "hostname": row.hostname,
           "links": _links(req, "audits", row.uuid)}
    if _at_least(req, "1.1"):
        doc.update(start_time=None, end_time=None)
    if _at_least(req, "1.2"):
        doc["force"] = False
    if _at_least(req, "1.5"):
        doc["status_message"] = row.status_message
    doc.update(_stamps(row))
    return doc


def _list_audits(req):
    return _list_by_goal_and_strategy(req, om.Audit, "audits", _audit_view)


AUDIT_FIELDS = ("audit_template_uuid", "audit_type", "interval", "parameters", "goal",
                "strategy", "auto_trigger", "name", "start_time", "end_time", "force", "scope")


def create_audit(req):
    """An audit to plan (PENDING); the engine plans it into a RECOMMENDED action plan
    or marks it FAILED with the servers that do not fit."""
    _authorize(req, "audit:create")
    body = req.json()
    _check_fields(body, AUDIT_FIELDS, "audit")
    audit_type = body.get("audit_type", "ONESHOT")
    if audit_type not in AUDIT_TYPES:
        raise rest.bad_request(f"Invalid input for field/attribute audit_type. Value: "
                               f"'{audit_type}'. Value should be one of: "
                               + ", ".join(AUDIT_TYPES))
    if audit_type != "ONESHOT":
        raise rest.bad_request(f"{audit_type} audits are not supported here: drains are "
                               "ONESHOT audits (docs/conformance.md).")
    if body.get("interval") is not None:
        raise rest.bad_request("Interval of audit must not be set for ONESHOT.")
    auto_trigger = body.get("auto_trigger", False)
    if not isinstance(auto_trigger, bool):
        raise rest.bad_request("Invalid input for field/attribute auto_trigger: a boolean "
                               "is expected.")
    goal, strategy, scope = body.get("goal"), body.get("strategy"), body.get("scope")
    if body.get("audit_template_uuid"):
        with _db(req).session() as s:
            try:
                template = _get(s, om.AuditTemplate, body["audit_template_uuid"])
            except rest.HTTPError:
                raise rest.bad_request(f"AuditTemplate {body['audit_template_uuid']} could "
                                       "not be found")
            goal = goal or template.goal
            strategy = strategy or template.strategy
            scope = scope if scope is not None else json.loads(template.scope)
    goal, strategy = _goal_and_strategy(goal, strategy)
    if strategy is None:
        strategy = strategies.strategies_of(goal)[0]
    params = body.get("parameters") or {}
    try:
        strategies.validate(strategy, params)
    except strategies.InvalidParameters as exc:
        raise rest.bad_request(str(exc))
    name = _string(body, "name", 63)
    now = datetime.datetime.now(datetime.timezone.utc)
    name = name or f"{strategy}-{now.strftime('%Y%m%dT%H%M%S%f')}"
    with _db(req).session(write=True) as s:
        if s.scalars(sa.select(om.Audit).where(om.Audit.name == name)).first():
            raise rest.bad_request(f"An audit with UUID or name {name} already exists")
        row = om.Audit(uuid=str(uuid_mod.uuid4()), name=name, audit_type=audit_type,
                       state="PENDING", goal=goal, strategy=strategy,
                       parameters=json.dumps(params), scope=json.dumps(scope or []),
                       auto_trigger=auto_trigger, context=context_record(req.context))
        s.add(row)
        s.flush()
        doc = _audit_view(req, row)
    _wake(req)
    return 201, doc, {"Location": doc["links"][0]["href"]}


def show_audit(req, audit):
    _authorize(req, "audit:get")
    with _db(req).session() as s:
        return 200, _audit_view(req, _get(s, om.Audit, audit))


def update_audit(req, audit):
    _authorize(req, "audit:update")
    changes = _patch_ops(req, ("name", "state"))
    with _db(req).session(write=True) as s:
        row = _get(s, om.Audit, audit)
        if "state" in changes and changes["state"] != row.state:
            raise rest.bad_request(f"State transition not allowed: ({row.state} -> "
                                   f"{changes['state']}): only CONTINUOUS audits change "
                                   "state by request.")
        if "name" in changes:
            row.name = _string(changes, "name", 63, required=True)
        s.flush()
        return 200, _audit_view(req, row)


def delete_audit(req, audit):
    _authorize(req, "audit:delete")
    with _db(req).session(write=True) as s:
        row = _get(s, om.Audit, audit)
        if row.state in ("PENDING", "ONGOING"):
            raise rest.bad_request(f"Operation not permitted: audit {row.uuid} is "
                                   f"{row.state}.")
        s.delete(row)
    return 204, None


# -- action plans ---------------------------------------------------------------------------

def _plan_view(req, row):
    doc = {"uuid": row.uuid, "audit_uuid": row.audit_uuid,
           "strategy_uuid": strategies.stable_uuid("strategy", row.strategy),
           "strategy_name": row.strategy, "state": row.state,
           "efficacy_indicators": json.loads(row.efficacy_indicators),
           "global_efficacy": json.loads(row.global_efficacy),
           "hostname": row.hostname, "links": _links(req, "action_plans", row.uuid)}
    if _at_least(req, "1.5"):
        doc["status_message"] = row.status_message
    doc.update(_stamps(row))
    return doc


def _list_plans(req):
    with _db(req).session() as s:
        q = sa.select(om.ActionPlan).order_by(om.ActionPlan.id)
        extra = ""
        audit = req.GET.get("audit_uuid")
        if audit:
            q = q.where(om.ActionPlan.audit_uuid == audit)
            extra = f"&audit_uuid={audit}"
        strategy = req.GET.get("strategy")
        if strategy:
            q = q.where(om.ActionPlan.strategy == (_find_strategy(strategy) or strategy))
        return _page(req, s.scalars(q).all(), "action_plans", _plan_view, extra)


def show_plan(req, action_plan):
    _authorize(req, "action_plan:get")
    with _db(req).session() as s:
        return 200, _plan_view(req, _get(s, om.ActionPlan, action_plan))


def _set_plan_state(req, action_plan, new_state):
    with _db(req).session(write=True) as s:
        row = _get(s, om.ActionPlan, action_plan)
        if new_state == row.state:
            return 200, _plan_view(req, row)
        if new_state not in PLAN_TRANSITIONS.get(row.state, ()):
            raise rest.bad_request(f"State transition not allowed: ({row.state} -> "
                                   f"{new_state})")
        if row.state == "SUSPENDED" and new_state == "PENDING":
            new_state = "ONGOING"      # resuming a plan that has started
        if new_state == "PENDING":
            # Starting one plan supersedes the other recommendations (the fleet changes).
            s.execute(sa.update(om.ActionPlan).where(
                om.ActionPlan.state == "RECOMMENDED", om.ActionPlan.uuid != row.uuid)
                .values(state="SUPERSEDED"))
        if new_state == "CANCELLED":
            s.execute(sa.update(om.Action).where(
                om.Action.action_plan_uuid == row.uuid, om.Action.state == "PENDING")
                .values(state="CANCELLED"))
        row.state = new_state
        s.flush()
        doc = _plan_view(req, row)
    _wake(req)
    return 200, doc


def start_plan(req, action_plan):
    _authorize(req, "action_plan:start")
    with _db(req).session() as s:
        state = _get(s, om.ActionPlan, action_plan).state
    if state != "RECOMMENDED":
        raise rest.bad_request(f"State transition not allowed: ({state} -> PENDING)")
    return _set_plan_state(req, action_plan, "PENDING")


def update_plan(req, action_plan):
    _authorize(req, "action_plan:update")
    changes = _patch_ops(req, ("state",))
    state = changes.get("state")
    if not isinstance(state, str):
        raise rest.bad_request("Invalid input for field/attribute state.")
    return _set_plan_state(req, action_plan, state)


def delete_plan(req, action_plan):
    _authorize(req, "action_plan:delete")
    with _db(req).session(write=True) as s:
        row = _get(s, om.ActionPlan, action_plan)
        if row.state in PLAN_RUNNING:
            raise rest.bad_request(f"Delete not allowed for action plan in state {row.state}")
        s.execute(sa.delete(om.Action).where(om.Action.action_plan_uuid == row.uuid))
        s.delete(row)
    return 204, None


# -- actions --------------------------------------------------------------------------------

def _action_view(req, row):
    doc = {"uuid": row.uuid, "action_plan_uuid": row.action_plan_uuid,
           "action_type": row.action_type, "state": row.state,
           "input_parameters": json.loads(row.input_parameters),
           "parents": json.loads(row.parents), "description": row.description,
           "links": _links(req, "actions", row.uuid)}
    if _at_least(req, "1.5"):
        doc["status_message"] = row.status_message
    doc.update(_stamps(row))
    return doc


def _list_actions(req):
    plan, audit = req.GET.get("action_plan_uuid"), req.GET.get("audit_uuid")
    if plan and audit:
        raise rest.bad_request("Only one of action_plan_uuid and audit_uuid may be given.")
    with _db(req).session() as s:
        q = sa.select(om.Action).order_by(om.Action.action_plan_uuid, om.Action.position)
        extra = ""
        if plan:
            q = q.where(om.Action.action_plan_uuid == plan)
            extra = f"&action_plan_uuid={plan}"
        if audit:
            q = q.where(om.Action.action_plan_uuid.in_(
                sa.select(om.ActionPlan.uuid).where(om.ActionPlan.audit_uuid == audit)))
            extra = f"&audit_uuid={audit}"
        return _page(req, s.scalars(q).all(), "actions", _action_view, extra)


def show_action(req, action):
    _authorize(req, "action:get")
    with _db(req).session() as s:
        return 200, _action_view(req, _get(s, om.Action, action))


def update_action(req, action):
    """1.5: a PENDING action of a plan not started yet may be SKIPPED (with a reason)."""
    _authorize(req, "action:update")
    if not _at_least(req, "1.5"):
        raise rest.HTTPError(405, "The method is not allowed for this resource.")
    changes = _patch_ops(req, ("state", "status_message"))
    with _db(req).session(write=True) as s:
        row = _get(s, om.Action, action)
        plan = _get(s, om.ActionPlan, row.action_plan_uuid)
        state = changes.get("state", row.state)
        if state != row.state:
            if state != "SKIPPED" or row.state != "PENDING" or \
                    plan.state not in ("RECOMMENDED", "PENDING"):
                raise rest.HTTPError(409, f"State transition not allowed: ({row.state} -> "
                                          f"{state}) for an action of a {plan.state} plan")
            row.state = "SKIPPED"
        if "status_message" in changes:
            if row.state != "SKIPPED":
                raise rest.HTTPError(409, "status_message may only be set on a SKIPPED action")
            row.status_message = _string(changes, "status_message", 1000)
        s.flush()
        return 200, _action_view(req, row)


# -- versions and the dashboard ----------------------------------------------------------

def _listing(resource, lister):
    """``GET /v1/<collection>`` under ``<resource>:get_all``, and its ``/detail`` under
    ``<resource>:detail``: the same documents (every field) either way."""
    def get_all(req):
        _authorize(req, f"{resource}:get_all")
        return lister(req)

    def detail(req):
        _authorize(req, f"{resource}:detail")
        return lister(req)
    return get_all, detail


LISTINGS = {name: _listing(resource, lister) for name, resource, lister in [
    ("goals", "goal", _list_goals), ("strategies", "strategy", _list_strategies),
    ("audit_templates", "audit_template", _list_templates), ("audits", "audit", _list_audits),
    ("action_plans", "action_plan", _list_plans), ("actions", "action", _list_actions)]}


def _version_doc(req):
    return {"id": "v1", "status": "CURRENT", "min_version": MIN_VERSION,
            "max_version": MAX_VERSION,
            "links": [{"rel": "self", "href": f"{_base(req)}/v1/"}]}


def root(req):
    v1 = _version_doc(req)
    return 200, {"name": "OpenStack Watcher API",
                 "description": "Audits, action plans and their actions: planned, "
                                "capacity-checked server moves.",
                 "versions": [v1], "default_version": v1}


def v1_document(req):
    doc = {"id": "v1", "media_types": [{"base": "application/json",
                                        "type": "application/vnd.openstack.watcher.v1+json"}],
           "links": [{"rel": "self", "href": f"{_base(req)}/v1/"}]}
    for collection in ("goals", "strategies", "audit_templates", "audits", "action_plans",
                       "actions"):
        doc[collection] = [{"rel": "self", "href": f"{_base(req)}/v1/{collection}/"},
                           {"rel": "bookmark", "href": f"{_base(req)}/{collection}/"}]
    return 200, doc


def _dashboard(req, **_path):
    try:
        module = importlib.import_module("novella.api.optimize.dashboard")
    except ImportError:
        raise rest.not_found("The dashboard is not installed.")
    return module.handle(req)


ROUTES = [
    ("GET", "/", root),
    ("GET", "/v1", v1_document),
    ("GET", "/v1/goals", LISTINGS["goals"][0]),
    ("GET", "/v1/goals/detail", LISTINGS["goals"][1]),
    ("GET", "/v1/goals/{goal}", show_goal),
    ("GET", "/v1/strategies", LISTINGS["strategies"][0]),
    ("GET", "/v1/strategies/detail", LISTINGS["strategies"][1]),
    ("GET", "/v1/strategies/{strategy}", show_strategy),
    ("GET", "/v1/audit_templates", LISTINGS["audit_templates"][0]),
    ("POST", "/v1/audit_templates", create_template),
    ("GET", "/v1/audit_templates/detail", LISTINGS["audit_templates"][1]),
    ("GET", "/v1/audit_templates/{template}", show_template),
    ("PATCH", "/v1/audit_templates/{template}", update_template),
    ("DELETE", "/v1/audit_templates/{template}", delete_template),
    ("GET", "/v1/audits", LISTINGS["audits"][0]),
    ("POST", "/v1/audits", create_audit),
    ("GET", "/v1/audits/detail", LISTINGS["audits"][1]),
    ("GET", "/v1/audits/{audit}", show_audit),
    ("PATCH", "/v1/audits/{audit}", update_audit),
    ("DELETE", "/v1/audits/{audit}", delete_audit),
    ("GET", "/v1/action_plans", LISTINGS["action_plans"][0]),
    ("GET", "/v1/action_plans/detail", LISTINGS["action_plans"][1]),
    ("GET", "/v1/action_plans/{action_plan}", show_plan),
    ("PATCH", "/v1/action_plans/{action_plan}", update_plan),
    ("DELETE", "/v1/action_plans/{action_plan}", delete_plan),
    ("POST", "/v1/action_plans/{action_plan}/start", start_plan),
    ("GET", "/v1/actions", LISTINGS["actions"][0]),
    ("GET", "/v1/actions/detail", LISTINGS["actions"][1]),
    ("GET", "/v1/actions/{action}", show_action),
    ("PATCH", "/v1/actions/{action}", update_action),
    ("GET", "/dashboard", _dashboard),
    ("GET", "/dashboard/{path}", _dashboard),
    ("GET", "/v1/fleet", _dashboard),
    ("GET", "/v1/fleet/hosts/{node}", _dashboard),
]

PUBLIC_PREFIXES = ("/dashboard",)


class _PublicPrefixes:
    """The versions document and the dashboard's pages pass without a token
    (the dashboard's data does not)."""

    def __init__(self, public_app, protected_app):
        self.public_app, self.protected_app = public_app, protected_app

    def __call__(self, environ, start_response):
        path = environ.get("PATH_INFO") or "/"
        if path == "/" or path.startswith(PUBLIC_PREFIXES):
            environ.setdefault("novella.context", None)
            return self.public_app(environ, start_response)
        return self.protected_app(environ, start_response)


def make_app(conf, api_db=None, placement=None, engine=None):
    """The API as a WSGI application; ``engine`` (an ``applier.Engine``) is woken
    when an audit is created or a plan started (else it finds them at its next look)."""
    from novella.policies import make_enforcer, optimize as optimize_policies
    enforcer = make_enforcer(conf, optimize_policies.list_rules())
    # The policy file is nova.conf's, shared with the Compute API: its rules name the
    # Compute API's base rules, which are not this API's business.
    enforcer.skip_undefined_check = True
    state = {"conf": conf, "api_db": api_db, "placement": placement, "engine": engine,
             "enforcer": enforcer}
    public = rest.App(ROUTES, error_body, state)
    protected = rest.make_app(conf, ROUTES, error_body, state=state)
    app = _PublicPrefixes(Microversions(public), Microversions(protected))
    state["optimize_app"] = app
    return app
