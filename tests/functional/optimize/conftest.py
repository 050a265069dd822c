"""An all-in-one of two cells for drain tests, with helpers for the
Infrastructure Optimization API and the books."""
import time

import pytest
import sqlalchemy as sa
import webob

from novella.db import api_models as am
from novella.db import cell_models as cm
from novella.db import cells as cells_mod
from tests.functional.cross_cell.conftest import CrossCellCloud
from tests.functional.system.conftest import cloud_factory

OPTIMIZE_VERSION = "infra-optim 1.5"


class DrainCloud(CrossCellCloud):
    def optimize(self, method, path, body=None, token="admin:admin", version=OPTIMIZE_VERSION):
        req = webob.Request.blank(path, method=method)
        req.headers["X-Auth-Token"] = token
        if version:
            req.headers["OpenStack-API-Version"] = version
        if body is not None:
            req.json_body = body
            req.content_type = "application/json"
        resp = req.get_response(self.aio.optimize_app)
        return resp.status_int, (resp.json_body if resp.body else None), resp.headers

    def audit(self, strategy, goal=None, **parameters):
        body = {"audit_type": "ONESHOT", "strategy": strategy, "parameters": parameters}
        if goal:
            body["goal"] = goal
        status, audit, _ = self.optimize("POST", "/v1/audits", body)
        assert status == 201, audit
        self.aio.optimize_engine.wait_idle()
        return self.optimize("GET", f"/v1/audits/{audit['uuid']}")[1]

    def plan_of(self, audit):
        status, body, _ = self.optimize("GET", f"/v1/action_plans?audit_uuid={audit['uuid']}")
        assert status == 200, body
        return body["action_plans"]

    def actions(self, plan_uuid):
        status, body, _ = self.optimize("GET", f"/v1/actions?action_plan_uuid={plan_uuid}")
        assert status == 200, body
        return body["actions"]

    def plan(self, plan_uuid):
        return self.optimize("GET", f"/v1/action_plans/{plan_uuid}")[1]

    def start(self, plan_uuid, wait=True):
        status, body, _ = self.optimize("POST", f"/v1/action_plans/{plan_uuid}/start")
        assert status == 200, body
        if wait:
            self.aio.optimize_engine.wait_idle()
        return self.plan(plan_uuid)

    def wait_plan(self, plan_uuid, states, timeout=120):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            plan = self.plan(plan_uuid)
            if plan["state"] in states:
                return plan
            time.sleep(0.05)
        raise AssertionError(f"plan {plan_uuid} still {plan['state']}")

    def service(self, host):
        cell = self.cell_of_host(host)
        with cells_mod.cell_database(cell).session() as s:
            return s.scalars(sa.select(cm.Service).where(
                cm.Service.host == host, cm.Service.binary == "nova-compute")).one()

    def migration_consumers(self):
        """Placement consumers that are migrations (a move's source allocation held)."""
        uuids = set()
        for cell in self.aio.cells:
            with cells_mod.cell_database(cell).session() as s:
                uuids |= set(s.scalars(sa.select(cm.Migration.uuid)))
        return {u for u in uuids if self.allocations(u)}

    def instance_rows(self, sid):
        """{cell name: (host, vm_state)} of the server's non-deleted rows."""
        out = {}
        for cell in self.aio.cells:
            with cells_mod.cell_database(cell).session() as s:
                row = s.scalars(sa.select(cm.Instance).where(
                    cm.Instance.uuid == sid, cm.Instance.deleted == 0)).first()
                if row is not None and not row.hidden:
                    out[cell.name] = (row.host, row.vm_state)
        return out

    def boot(self, name="vm", flavor="1", token="admin:admin", **extra):
        """A server without ports unless ``networks`` asks for some (drains move
        whatever a server has; the ports' own cases name theirs)."""
        extra.setdefault("networks", "none")
        return super().boot(name, flavor, token, **extra)

    def boot_in_group(self, name, group, **extra):
        server = {"name": name, "flavorRef": "1", "imageRef": self.aio.demo_image["id"],
                  "networks": "none", **extra}
        status, body = self.api("POST", "/servers", {"server": server,
                                                     "os:scheduler_hints": {"group": group}})
        assert status == 202, body
        self.aio.wait_idle()
        return body["server"]["id"]

    def group(self, name, policy):
        status, body = self.api("POST", "/os-server-groups",
                                {"server_group": {"name": name, "policy": policy}},
                                version="2.64")
        assert status == 200, body
        return body["server_group"]["id"]

    def mapping_count(self):
        with self.aio.api_db.session() as s:
            return s.scalar(sa.select(sa.func.count()).select_from(am.InstanceMapping))


@pytest.fixture
def make_dcloud(tmp_path):
    """make_dcloud(hosts_per_cell=2, **{group: {option: value}}) -> a started DrainCloud."""
    factory = cloud_factory(tmp_path, DrainCloud, cells=2)
    make = next(factory)
    yield lambda hosts_per_cell=2, **overrides: make(hosts_per_cell, **overrides)
    next(factory, None)


@pytest.fixture
def dcloud(make_dcloud):
    cloud = make_dcloud()
    cloud.allow_cross_cell()
    return cloud
