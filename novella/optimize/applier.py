"""The drain's engine: audits are planned, started action plans executed.

One ``Engine`` runs in every process serving the Infrastructure Optimization
API (``novella up``, ``novella serve optimize``). It looks at the API
database: a PENDING audit is planned (``planner``) into a RECOMMENDED action
plan or FAILED with the servers that do not fit; a started plan (PENDING,
ONGOING, SUSPENDED or CANCELLING) is taken under a lease and run. A process
that dies leaves its plans ONGOING with a lease that runs out; the next
engine to start (or any other, once the lease ran out) carries them on.

Every action records what it is about to do before doing it (its
``progress``), so a plan taken over goes on from where it stood:

- ``change_nova_service_state``: whether the host was disabled before
  (a cancelled plan re-enables only what it disabled), then the change.
- ``migrate`` / ``resize``: the server's migrations before the request, then
  the request (through the Compute API, as any client's), then the migration
  record it made, followed until it ends; a cold move is confirmed. Found
  again after a crash by the migration the request made, so a server is never
  moved twice. A move that fails is retried on the plan's alternate hosts,
  then recorded FAILED with its reason; ``on_failure`` says whether the plan
  goes on.

Moves run with the plan's ``parallel_total`` and ``parallel_per_node``
(moves in flight from one source host) limits.
"""
import concurrent.futures
import datetime
import json
import logging
import socket
import threading
import time
import uuid

import sqlalchemy as sa
import webob

from novella.context import RequestContext
from novella.db import optimize_models as om
from novella.db.timestamps import utcnow
from novella.optimize import planner as planner_mod
from novella.optimize import strategies

LOG = logging.getLogger(__name__)

LEASE_SECONDS = 30
POLL_SECONDS = 0.5
COMPUTE_VERSION = "2.80"
DISABLED_REASON = "watcher_maintaining"   # as the reference's action sets it
# Migration statuses that end a move, and those that end it well.
ENDED = {"confirmed", "completed", "done", "error", "failed", "reverted", "cancelled"}
FAILED = {"error", "failed", "reverted", "cancelled"}
PLAN_RUNNING = ("PENDING", "ONGOING", "SUSPENDED", "CANCELLING")
CONFIRM_PATIENCE = 300   # seconds a finished move's confirm may be refused before it fails
AUDIT_PATIENCE = 600     # seconds an audit may be ONGOING before another engine plans it again


def dumps(value):
    return json.dumps(value, sort_keys=True)


def context_of(row):
    data = json.loads(row.context or "{}")
    roles = data.get("roles") or []
    return RequestContext(user_id=data.get("user_id"), project_id=data.get("project_id"),
                          roles=roles, is_admin="admin" in roles)


def context_record(ctxt):
    return dumps({"user_id": ctxt.user_id, "project_id": ctxt.project_id,
                  "roles": list(ctxt.roles or [])})


# -- the Compute API, called in-process as any client calls it ------------------------

class ComputeError(Exception):
    def __init__(self, status, message):
        super().__init__(f"{status}: {message}")
        self.status, self.message = status, message


def unauthenticated(app):
    """The Compute API behind its token check: the caller's context is given instead."""
    inner = getattr(app, "wrapped", app)
    return getattr(inner, "app", inner)


class ComputeClient:
    """Requests to the Compute API v2.1 WSGI application, as ``ctxt``."""

    def __init__(self, app):
        self.app = unauthenticated(app)

    def call(self, ctxt, method, path, body=None, expect=(200, 202, 204)):
        req = webob.Request.blank("/v2.1" + path, method=method)
        req.headers["OpenStack-API-Version"] = "compute " + COMPUTE_VERSION
        req.headers["X-OpenStack-Nova-API-Version"] = COMPUTE_VERSION
        if body is not None:
            req.body = json.dumps(body).encode()
            req.content_type = "application/json"
        req.environ["novella.context"] = ctxt
        resp = req.get_response(self.app)
        data = json.loads(resp.body) if resp.body else {}
        if resp.status_int not in expect:
            message = next((v.get("message") for v in data.values() if isinstance(v, dict)),
                           resp.text) if isinstance(data, dict) else resp.text
            raise ComputeError(resp.status_int, message)
        return data

    def migrations(self, ctxt, instance_uuid):
        return self.call(ctxt, "GET", f"/os-migrations?instance_uuid={instance_uuid}")[
            "migrations"]

    def server(self, ctxt, instance_uuid):
        return self.call(ctxt, "GET", f"/servers/{instance_uuid}")["server"]

    def service(self, ctxt, host):
        found = self.call(ctxt, "GET", f"/os-services?host={host}&binary=nova-compute")[
            "services"]
        if not found:
            raise ComputeError(404, f"Compute service of {host} could not be found.")
        return found[0]

    def set_service(self, ctxt, service_id, enabled):
        body = {"status": "enabled"} if enabled else {"status": "disabled",
                                                      "disabled_reason": DISABLED_REASON}
        return self.call(ctxt, "PUT", f"/os-services/{service_id}", body)


class MigrationWatch:
    """The migration records of a plan's moves in flight, read for all of them at
    once: one ``GET /os-migrations?changes-since=`` per ``interval`` whatever the
    parallelism, each move looking up its own record in the answer. A record the
    answers have not shown yet (one never updated since it was made) is read
    for its server alone."""

    def __init__(self, compute, ctxt, interval=0.1):
        self.compute, self.ctxt, self.interval = compute, ctxt, interval
        self.records = {}
        self.since = None
        self.read_at = 0.0
        self.lock = threading.Lock()

    def _refresh(self):
        started = utcnow()
        query = "/os-migrations"
        if self.since is not None:
            query += "?changes-since=" + (self.since - datetime.timedelta(seconds=2)).strftime(
                "%Y-%m-%dT%H:%M:%SZ")
        for m in self.compute.call(self.ctxt, "GET", query)["migrations"]:
            self.records[m["uuid"]] = m
        self.since = started

    def record(self, instance_uuid, migration_uuid, fresh=False):
        """The newest record of the migration (read again if older than ``interval``)."""
        with self.lock:
            if fresh or time.monotonic() - self.read_at >= self.interval:
                self._refresh()
                self.read_at = time.monotonic()
            found = self.records.get(migration_uuid)
        if found is None:
            for m in self.compute.migrations(self.ctxt, instance_uuid):
                if m["uuid"] == migration_uuid:
                    found = self.records[migration_uuid] = m
        return found or {}


# -- the engine ------------------------------------------------------------------------

class Engine:
    def __init__(self, conf, api_db, placement, compute_app, hostname=None,
                 poll=POLL_SECONDS, lease=LEASE_SECONDS):
        self.conf, self.api_db, self.placement = conf, api_db, placement
        self.compute = ComputeClient(compute_app)
        self.hostname = hostname or f"{socket.gethostname()}:{uuid.uuid4().hex[:8]}"
        self.poll, self.lease = poll, lease
        self._planner = None
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread = None
        self._running = {}      # plan uuid -> PlanRunner thread
        self._lock = threading.Lock()
        self._audits_checked = 0.0

    @property
    def planner(self):
        if self._planner is None:
            # The Compute API's own policy decides whether a move may cross cells.
            enforcer = getattr(getattr(self.compute.app, "api", None), "enforcer", None)
            self._planner = planner_mod.Planner(self.conf, self.api_db, self.placement,
                                                compute_enforcer=enforcer)
        return self._planner

    # -- life -------------------------------------------------------------------
    def has_work(self):
        """An audit to plan or a plan started and not ended (one read)."""
        with self.api_db.session() as s:
            return bool(s.scalar(sa.select(sa.func.count()).select_from(om.Audit).where(
                om.Audit.state.in_(("PENDING", "ONGOING"))))) or bool(s.scalar(
                sa.select(sa.func.count()).select_from(om.ActionPlan).where(
                    om.ActionPlan.state.in_(PLAN_RUNNING))))

    def start(self):
        with self._lock:
            if self._thread is not None:
                return self
            self._reset_interrupted_audits()
            self._thread = threading.Thread(target=self._loop, name="optimize-engine",
                                            daemon=True)
            self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        self._wake.set()
        if self._thread:
            self._thread.join(timeout=10)
        for runner in list(self._running.values()):
            runner.join(timeout=10)

    def wake(self):
        """Something to do: start the engine if it is not running, else look now."""
        if self._thread is None and not self._stop.is_set():
            self.start()
        self._wake.set()

    def _loop(self):
        while not self._stop.is_set():
            try:
                self.step()
            except Exception:  # noqa: BLE001 - the engine outlives any one failure
                LOG.exception("optimize engine step failed")
            self._wake.wait(self.poll)
            self._wake.clear()

    def step(self):
        """Plan what is pending, take over what runs unowned."""
        if not self.has_work():
            return
        if time.monotonic() - self._audits_checked > self.lease:
            self._reset_interrupted_audits()
        while self.plan_next_audit():
            pass
        for plan_uuid in self._claim_plans():
            runner = PlanRunner(self, plan_uuid)
            self._running[plan_uuid] = runner
            runner.start()
        for plan_uuid, runner in list(self._running.items()):
            if not runner.is_alive():
                del self._running[plan_uuid]

    # -- audits -------------------------------------------------------------------
    def _reset_interrupted_audits(self):
        """An audit being planned when its process died is planned again (planning
        moves nothing, and the plan is written in one transaction): at once when it was
        this engine's (the all-in-one's engine keeps its name across restarts), else
        once it has been ONGOING for AUDIT_PATIENCE (another engine may be planning it)."""
        self._audits_checked = time.monotonic()
        stale = utcnow() - datetime.timedelta(seconds=AUDIT_PATIENCE)
        with self.api_db.session(write=True) as s:
            s.execute(sa.update(om.Audit).where(
                om.Audit.state == "ONGOING",
                sa.or_(om.Audit.hostname == self.hostname, om.Audit.updated_at < stale))
                .values(state="PENDING", hostname=None))

    def plan_next_audit(self):
        with self.api_db.session(write=True) as s:
            audit = s.scalars(sa.select(om.Audit).where(om.Audit.state == "PENDING")
                              .order_by(om.Audit.id).limit(1)).first()
            if audit is None:
                return False
            # Claimed only if no other engine claimed it meanwhile.
            claimed = s.execute(sa.update(om.Audit).where(
                om.Audit.uuid == audit.uuid, om.Audit.state == "PENDING").values(
                state="ONGOING", hostname=self.hostname, updated_at=utcnow())).rowcount
            if not claimed:
                return True
            audit_uuid = audit.uuid
            strategy, params = audit.strategy, json.loads(audit.parameters)
            ctxt, auto = context_of(audit), audit.auto_trigger
        try:
            params = strategies.validate(strategy, params)
            plan = self.planner.plan(ctxt, strategy, params)
            failure = plan.failure_message()
        except (strategies.ScopeError, strategies.InvalidParameters) as exc:
            plan, failure = None, str(exc)
        except Exception as exc:  # noqa: BLE001 - recorded on the audit
            LOG.exception("planning audit %s failed", audit_uuid)
            plan, failure = None, f"Planning failed: {exc}"
        with self.api_db.session(write=True) as s:
            audit = s.scalars(sa.select(om.Audit).where(om.Audit.uuid == audit_uuid)).one()
            if failure:
                audit.state, audit.status_message = "FAILED", failure
                return True
            audit.state, audit.status_message = "SUCCEEDED", None
            write_plan(s, audit, plan, started=auto)
        if auto:
            self.wake()
        return True

    # -- plans --------------------------------------------------------------------
    def _claim_plans(self):
        now = utcnow()
        until = now + datetime.timedelta(seconds=self.lease)
        claimed = []
        free = sa.or_(om.ActionPlan.hostname.is_(None), om.ActionPlan.hostname == self.hostname,
                      om.ActionPlan.lease_until.is_(None), om.ActionPlan.lease_until < now)
        with self.api_db.session(write=True) as s:
            uuids = s.scalars(sa.select(om.ActionPlan.uuid).where(
                om.ActionPlan.state.in_(PLAN_RUNNING), free)).all()
            for plan_uuid in uuids:
                if plan_uuid in self._running:
                    continue
                # Taken only if its lease is still free (another engine may look too).
                if s.execute(sa.update(om.ActionPlan).where(
                        om.ActionPlan.uuid == plan_uuid, free).values(
                        hostname=self.hostname, lease_until=until)).rowcount:
                    claimed.append(plan_uuid)
        return claimed

    def renew(self, plan_uuid):
        """Keep the plan's lease; False when another engine took it."""
        until = utcnow() + datetime.timedelta(seconds=self.lease)
        with self.api_db.session(write=True) as s:
            done = s.execute(sa.update(om.ActionPlan).where(
                om.ActionPlan.uuid == plan_uuid, om.ActionPlan.hostname == self.hostname)
                .values(lease_until=until)).rowcount
        return bool(done)

    def wait_idle(self, timeout=600):
        """Tests and benchmarks: until no audit is being planned and no plan runs."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            self.wake()
            with self.api_db.session() as s:
                busy = s.scalar(sa.select(sa.func.count()).select_from(om.Audit).where(
                    om.Audit.state.in_(("PENDING", "ONGOING")))) or s.scalar(
                    sa.select(sa.func.count()).select_from(om.ActionPlan).where(
                        om.ActionPlan.state.in_(("PENDING", "ONGOING", "CANCELLING"))))
            if not busy:
                return
            time.sleep(0.1)
        raise TimeoutError("the optimize engine is still busy")


def write_plan(s, audit, plan, started=False):
    """The action plan of ``audit``: the source hosts disabled first, then one move
    per server, each naming its move type and destination."""
    plan_uuid = str(uuid.uuid4())
    actions = []
    disable_uuids = []
    for host in plan.sources:
        action_uuid = str(uuid.uuid4())
        disable_uuids.append(action_uuid)
        actions.append(dict(
            uuid=action_uuid, action_type="change_nova_service_state", parents=[],
            input_parameters={"resource_id": host, "resource_name": host, "state": "disabled",
                              "disabled_reason": DISABLED_REASON},
            description=f"Disable the compute service of {host}"))
    for move in plan.moves:
        server = move.server
        params = {"resource_id": server.uuid, "resource_name": server.name,
                  "source_node": server.host, "destination_node": move.dest_host,
                  "destination_cell": move.dest_cell}
        if move.kind == "resize":
            params.update(flavor=move.flavor["name"], flavor_id=move.flavor["flavorid"])
            description = (f"Resize {server.name or server.uuid} to {move.flavor['name']} "
                           f"from {server.host} (planned on {move.dest_host})")
        else:
            params["migration_type"] = move.kind
            description = (f"{move.kind.capitalize()} migrate {server.name or server.uuid} "
                           f"from {server.host} to {move.dest_host}")
        actions.append(dict(uuid=str(uuid.uuid4()),
                            action_type="resize" if move.kind == "resize" else "migrate",
                            parents=disable_uuids, input_parameters=params,
                            progress={"alternates": move.alternates},
                            description=description[:255]))
    s.add(om.ActionPlan(
        uuid=plan_uuid, audit_uuid=audit.uuid, strategy=plan.strategy,
        state="PENDING" if started else "RECOMMENDED",
        efficacy_indicators=dumps(plan.efficacy_indicators()),
        global_efficacy=dumps([]), parameters=dumps({
            k: plan.params[k] for k in ("parallel_total", "parallel_per_node", "on_failure")}),
        context=audit.context))
    for position, action in enumerate(actions):
        s.add(om.Action(
            uuid=action["uuid"], action_plan_uuid=plan_uuid, position=position,
            action_type=action["action_type"], state="PENDING",
            input_parameters=dumps(action["input_parameters"]),
            parents=dumps(action["parents"]), description=action["description"],
            progress=dumps(action.get("progress", {}))))
    return plan_uuid


# -- one plan ------------------------------------------------------------------------------

class PlanRunner(threading.Thread):
    """Runs one action plan to its end under the engine's lease."""

    def __init__(self, engine, plan_uuid):
        super().__init__(name=f"plan-{plan_uuid[:8]}", daemon=True)
        self.engine, self.plan_uuid = engine, plan_uuid
        self.api_db = engine.api_db

    # -- records ------------------------------------------------------------------
    def _plan(self):
        with self.api_db.session() as s:
            row = s.scalars(sa.select(om.ActionPlan).where(
                om.ActionPlan.uuid == self.plan_uuid)).one()
            s.expunge(row)
            return row

    def _actions(self):
        with self.api_db.session() as s:
            rows = s.scalars(sa.select(om.Action).where(
                om.Action.action_plan_uuid == self.plan_uuid).order_by(om.Action.position)).all()
            for r in rows:
                s.expunge(r)
            return rows

    def set_plan(self, expect=None, **values):
        with self.api_db.session(write=True) as s:
            q = sa.update(om.ActionPlan).where(om.ActionPlan.uuid == self.plan_uuid)
            if expect:
                q = q.where(om.ActionPlan.state.in_(expect))
            return s.execute(q.values(updated_at=utcnow(), **values)).rowcount

    def set_action(self, action_uuid, **values):
        if "progress" in values:
            values["progress"] = dumps(values["progress"])
        with self.api_db.session(write=True) as s:
            s.execute(sa.update(om.Action).where(om.Action.uuid == action_uuid)
                      .values(updated_at=utcnow(), **values))

    # -- the run -------------------------------------------------------------------
    def run(self):
        try:
            self._run()
        except Exception:  # noqa: BLE001 - the lease runs out and another engine goes on
            LOG.exception("action plan %s stopped", self.plan_uuid)

    def _run(self):
        plan = self._plan()
        ctxt = context_of(plan)
        params = json.loads(plan.parameters)
        self.set_plan(expect=("PENDING",), state="ONGOING")
        total = params.get("parallel_total") or 1
        per_node = params.get("parallel_per_node") or total
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=total,
                                                     thread_name_prefix=f"plan-{self.plan_uuid[:8]}")
        self.watch = MigrationWatch(self.engine.compute, ctxt)
        in_flight = {}     # future -> action
        stop_new = False
        last_renew = time.monotonic()
        try:
            while True:
                if time.monotonic() - last_renew > self.engine.lease / 3:
                    if not self.engine.renew(self.plan_uuid):
                        LOG.warning("action plan %s was taken over", self.plan_uuid)
                        return
                    last_renew = time.monotonic()
                state = self._plan().state
                for fut in [f for f in in_flight if f.done()]:
                    action = in_flight.pop(fut)
                    if fut.exception() is not None:
                        LOG.error("action %s: %s", action.uuid, fut.exception())
                        self.set_action(action.uuid, state="FAILED",
                                        status_message=str(fut.exception())[:1000])
                    if self._action_state(action.uuid) == "FAILED" and \
                            params.get("on_failure") == "stop":
                        stop_new = True
                actions = self._actions()
                pending = [a for a in actions if a.state in ("PENDING", "ONGOING")
                           and a.uuid not in {x.uuid for x in in_flight.values()}]
                if state == "CANCELLING" or stop_new:
                    if not in_flight:
                        return self._finish_cancelled(ctxt, actions, failed=stop_new
                                                      and state != "CANCELLING")
                elif state == "SUSPENDED":
                    pass
                elif state not in ("ONGOING", "PENDING"):
                    return
                else:
                    if not pending and not in_flight:
                        return self._finish(actions)
                    self._start_ready(ctxt, pool, pending, in_flight, actions, total, per_node)
                # Until a move ends, or a look at the plan's state (pause, cancel) is due.
                if in_flight:
                    concurrent.futures.wait(list(in_flight), timeout=0.5,
                                            return_when=concurrent.futures.FIRST_COMPLETED)
                else:
                    time.sleep(min(self.engine.poll, 0.2))
        finally:
            pool.shutdown(wait=True)

    def _action_state(self, action_uuid):
        with self.api_db.session() as s:
            return s.scalar(sa.select(om.Action.state).where(om.Action.uuid == action_uuid))

    def _start_ready(self, ctxt, pool, pending, in_flight, actions, total, per_node):
        done = {a.uuid for a in actions if a.state in ("SUCCEEDED", "SKIPPED")}
        flying = list(in_flight.values())
        per_source = {}
        for a in flying:
            src = json.loads(a.input_parameters).get("source_node")
            per_source[src] = per_source.get(src, 0) + 1
        for action in pending:
            if len(in_flight) >= total:
                break
            parents = json.loads(action.parents)
            if any(p not in done for p in parents):
                # a parent that failed blocks its children for good
                if any(a.uuid in parents and a.state in ("FAILED", "CANCELLED")
                       for a in actions):
                    self.set_action(action.uuid, state="CANCELLED",
                                    status_message="A parent action did not succeed.")
                continue
            src = json.loads(action.input_parameters).get("source_node")
            if src is not None and per_source.get(src, 0) >= per_node:
                continue
            per_source[src] = per_source.get(src, 0) + 1
            fut = pool.submit(ActionRunner(self, ctxt, action).run)
            in_flight[fut] = action

    def _finish(self, actions):
        failed = [a for a in self._actions() if a.state in ("FAILED", "CANCELLED")]
        if failed:
            self.set_plan(state="FAILED", hostname=None, lease_until=None,
                          status_message=f"{len(failed)} of {len(actions)} actions did not "
                                         "succeed; see their status messages.")
        else:
            self.set_plan(state="SUCCEEDED", hostname=None, lease_until=None,
                          status_message=None)

    def _finish_cancelled(self, ctxt, actions, failed=False):
        """No new move starts; the hosts this plan disabled are enabled again."""
        for action in self._actions():
            if action.state == "PENDING":
                self.set_action(action.uuid, state="CANCELLED",
                                status_message="The action plan was cancelled." if not failed
                                else "The action plan stopped after a failure.")
        if not failed:
            for action in self._actions():
                if action.action_type != "change_nova_service_state":
                    continue
                progress = json.loads(action.progress)
                if progress.get("disabled_here") and not progress.get("enabled_again"):
                    host = json.loads(action.input_parameters)["resource_id"]
                    service = self.engine.compute.service(ctxt, host)
                    self.engine.compute.set_service(ctxt, service["id"], enabled=True)
                    self.set_action(action.uuid, progress=dict(progress, enabled_again=True),
                                    status_message=f"{host} enabled again: the plan was "
                                                   "cancelled.")
        if failed:
            self.set_plan(state="FAILED", hostname=None, lease_until=None,
                          status_message="A move failed and the plan's on_failure is stop: "
                                         "the moves not started were cancelled.")
        else:
            self.set_plan(state="CANCELLED", hostname=None, lease_until=None)


# -- one action ------------------------------------------------------------------------

class ActionRunner:
    def __init__(self, plan_runner, ctxt, action):
        self.plan_runner, self.ctxt, self.action = plan_runner, ctxt, action
        self.compute = plan_runner.engine.compute
        self.params = json.loads(action.input_parameters)
        self.progress = json.loads(action.progress or "{}")

    def record(self, **values):
        """Write the action's progress (and state) before the step it announces acts."""
        self.progress.update(values.pop("progress", {}))
        self.plan_runner.set_action(self.action.uuid, progress=self.progress, **values)

    def run(self):
        if self.action.state == "PENDING":
            self.record(state="ONGOING")
        if self.action.action_type == "change_nova_service_state":
            return self._service_state()
        return self._move()

    # -- change_nova_service_state ---------------------------------------------
    def _service_state(self):
        host = self.params["resource_id"]
        enable = self.params["state"] == "enabled"
        service = self.compute.service(self.ctxt, host)
        if "was_disabled" not in self.progress:
            self.record(progress={"was_disabled": service["status"] == "disabled"})
        if (service["status"] == "enabled") != enable:
            self.record(progress={"disabled_here": not enable})
            self.compute.set_service(self.ctxt, service["id"], enabled=enable)
        self.record(state="SUCCEEDED", status_message=f"{host} {self.params['state']}.")

    # -- migrate / resize --------------------------------------------------------
    def _move(self):
        sid = self.params["resource_id"]
        hosts = [self.params.get("destination_node")] + list(self.progress.get("alternates")
                                                             or [])
        attempt = self.progress.get("attempt", 0)
        while True:
            migration = self.progress.get("migration")
            if self.progress.get("requested") and not migration:
                migration = self._new_migration(sid)
                if migration is None:
                    # The request never got through: the server did not start moving.
                    self.record(progress={"requested": False})
                else:
                    self.record(progress={"migration": migration})
            if not self.progress.get("requested"):
                try:
                    server = self.compute.server(self.ctxt, sid)
                except ComputeError as exc:
                    return self.record(state="FAILED", status_message=f"Server {sid}: "
                                                                      f"{exc.message}")
                if server.get("OS-EXT-SRV-ATTR:host") != self.params["source_node"]:
                    return self.record(state="SUCCEEDED", status_message=(
                        f"Server is on {server.get('OS-EXT-SRV-ATTR:host')}, not on "
                        f"{self.params['source_node']}: nothing to move."))
                host = hosts[attempt] if attempt < len(hosts) else None
                before = [m["uuid"] for m in self.compute.migrations(self.ctxt, sid)]
                self.record(progress={"requested": True, "before": before, "attempt": attempt,
                                      "host": host, "migration": None})
                try:
                    self._request(sid, host)
                except ComputeError as exc:
                    self.record(progress={"requested": False})
                    if not self._next_attempt(f"{host or 'scheduler'}: {exc.message}", hosts):
                        return
                    attempt = self.progress["attempt"]
                    continue
                migration = self._new_migration(sid)
                self.record(progress={"migration": migration})
                if migration is None:
                    return self.record(state="FAILED", status_message=(
                        "The Compute API accepted the move but recorded no migration."))
            status, record = self._follow(sid, migration)
            if status in FAILED:
                self.record(progress={"requested": False, "migration": None})
                if not self._next_attempt(
                        f"migration {migration} to {record.get('dest_compute')} ended "
                        f"{status}", hosts):
                    return
                attempt = self.progress["attempt"]
                continue
            return self.record(state="SUCCEEDED", status_message=(
                f"Moved to {record.get('dest_compute')} (migration {migration}, {status})."))

    def _next_attempt(self, reason, hosts):
        failures = list(self.progress.get("failures") or []) + [reason]
        attempt = self.progress.get("attempt", 0) + 1
        if attempt >= len(hosts) + 1:    # the planned host, alternates, then the scheduler's
            self.record(state="FAILED", progress={"failures": failures},
                        status_message="The move failed: " + "; ".join(failures))
            return False
        self.record(progress={"failures": failures, "attempt": attempt})
        return True

    def _request(self, sid, host):
        kind = self.action.action_type
        if kind == "resize":
            body = {"resize": {"flavorRef": self.params["flavor_id"]}}
        elif self.params.get("migration_type") == "live":
            body = {"os-migrateLive": {"host": host, "block_migration": "auto"}}
        else:
            body = {"migrate": {"host": host}}
        self.compute.call(self.ctxt, "POST", f"/servers/{sid}/action", body)

    def _new_migration(self, sid):
        before = set(self.progress.get("before") or [])
        found = [m for m in self.compute.migrations(self.ctxt, sid) if m["uuid"] not in before]
        return found[0]["uuid"] if found else None

    def _follow(self, sid, migration):
        """Wait on the migration record; confirm a finished cold move. -> (status, record)."""
        watch = self.plan_runner.watch
        confirm_sent, refused_since = False, None
        while True:
            record = watch.record(sid, migration, fresh=confirm_sent)
            status = record.get("status")
            if status == "finished" and not confirm_sent:
                if not self.progress.get("confirming"):
                    self.record(progress={"confirming": True})
                try:
                    self.compute.call(self.ctxt, "POST", f"/servers/{sid}/action",
                                      {"confirmResize": None})
                    confirm_sent = True
                except ComputeError as exc:
                    # 409: the server is not resized yet (the record says finished a
                    # moment before the server does) or a confirm is under way; 400: none
                    # left to confirm (one sent before a restart went through). Asked
                    # again until the record says the move ended.
                    if exc.status not in (400, 409):
                        raise
                    refused_since = refused_since or time.monotonic()
                    if time.monotonic() - refused_since > CONFIRM_PATIENCE:
                        raise ComputeError(exc.status, f"the confirm of migration {migration} "
                                                       f"is still refused: {exc.message}")
                    time.sleep(watch.interval)
            elif status in ENDED:
                return status, record
            else:
                time.sleep(watch.interval)
