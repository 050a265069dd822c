"""Compute quotas: os-quota-sets, os-quota-class-sets, /limits, and the
checks at server create (min_count/max_count) and resize."""
import concurrent.futures

import sqlalchemy as sa

from novella.conf import quota as quota_conf
from novella.db import api_models as am, cell_models as cm
from tests.functional.api.conftest import IMAGE

P = "/os-quota-sets/project-a"


def _builds(cloud):
    return cloud.count(cloud.api_db, am.BuildRequest, am.BuildRequest.project_id == "project-a")


def _server(**kw):
    return {"server": {"name": "q", "flavorRef": "1", "imageRef": IMAGE, **kw}}


def test_quota_sets_show_update_delete_defaults_detail(services_cloud):
    cloud = services_cloud
    cloud.flavor()
    shown = cloud.user.get(P).json["quota_set"]
    assert shown["instances"] == 10 and shown["cores"] == 20 and shown["id"] == "project-a"
    assert "injected_files" in shown and "floating_ips" in shown      # 2.1
    latest = cloud.user.get(P, version="2.57").json["quota_set"]
    assert "injected_files" not in latest and "floating_ips" not in latest
    assert cloud.user.put(P, {"quota_set": {"instances": 2}}).status_int == 403
    resp = cloud.admin.put(P, {"quota_set": {"instances": 2, "cores": 4}})
    assert resp.status_int == 200 and resp.json["quota_set"]["instances"] == 2
    assert cloud.user.get(P).json["quota_set"]["instances"] == 2
    assert cloud.user.get(P + "/defaults").json["quota_set"]["instances"] == 10
    cloud.user.post("/servers", _server())
    detail = cloud.user.get(P + "/detail").json["quota_set"]
    assert detail["instances"] == {"limit": 2, "in_use": 1, "reserved": 0}
    # Below what is used: refused unless forced.
    assert cloud.admin.put(P, {"quota_set": {"instances": 0}}).status_int == 400
    assert cloud.admin.put(P, {"quota_set": {"instances": 0, "force": True}}).status_int == 200
    # A user's quota may not exceed the project's.
    assert cloud.admin.put(P + "?user_id=alice", {"quota_set": {"cores": 5}}).status_int == 400
    assert cloud.admin.put(P + "?user_id=alice", {"quota_set": {"cores": 3}}).status_int == 200
    assert cloud.user.get(P + "?user_id=alice").json["quota_set"]["cores"] == 3
    assert cloud.admin.delete(P).status_int == 202
    assert cloud.user.get(P).json["quota_set"]["instances"] == 10
    # The default class changes every project's defaults.
    resp = cloud.admin.put("/os-quota-class-sets/default", {"quota_class_set": {"instances": 7}})
    assert resp.status_int == 200 and resp.json["quota_class_set"]["instances"] == 7
    assert cloud.admin.get("/os-quota-class-sets/default").json["quota_class_set"]["instances"] == 7
    assert cloud.user.get(P).json["quota_set"]["instances"] == 7
    assert cloud.user.get("/limits").json["limits"]["absolute"]["maxTotalInstances"] == 7


def test_create_makes_as_many_as_fit_then_403_and_writes_nothing(services_cloud):
    cloud = services_cloud
    cloud.flavor()
    cloud.admin.put(P, {"quota_set": {"instances": 3}})
    resp = cloud.user.post("/servers", _server(min_count=1, max_count=5))
    assert resp.status_int == 202
    assert _builds(cloud) == 3
    before = cloud.counts()
    resp = cloud.user.post("/servers", _server())
    assert resp.status_int == 403
    assert resp.json["forbidden"]["message"] == (
        "Quota exceeded for instances: Requested 1, but already used 3 of 3 instances")
    assert cloud.counts() == before
    absolute = cloud.user.get("/limits").json["limits"]["absolute"]
    assert (absolute["maxTotalInstances"], absolute["totalInstancesUsed"]) == (3, 3)


def test_cores_quota_bounds_max_count(services_cloud):
    cloud = services_cloud
    cloud.flavor()
    cloud.admin.put(P, {"quota_set": {"cores": 2}})
    assert cloud.user.post("/servers", _server(min_count=3, max_count=3)).status_int == 403
    assert _builds(cloud) == 0
    assert cloud.user.post("/servers", _server(min_count=1, max_count=3)).status_int == 202
    assert _builds(cloud) == 2


def test_concurrent_creates_end_with_exactly_the_quota(services_cloud):
    cloud = services_cloud
    cloud.flavor()
    cloud.admin.put(P, {"quota_set": {"instances": 4}})
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        codes = list(pool.map(lambda _: cloud.user.post("/servers", _server()).status_int,
                              range(12)))
    assert sorted(codes) == [202] * 4 + [403] * 8
    assert _builds(cloud) == 4


def test_noop_driver_enforces_nothing(services_cloud):
    cloud = services_cloud
    cloud.flavor()
    quota_conf.register_opts(cloud.conf)
    cloud.conf.set_override("driver", "nova.quota.NoopQuotaDriver", group="quota")
    cloud.conf.set_override("instances", 1, group="quota")
    assert cloud.user.post("/servers", _server(min_count=3, max_count=3)).status_int == 202
    assert cloud.user.get("/limits").json["limits"]["absolute"]["maxTotalInstances"] == -1


def test_resize_over_cores_quota_is_403_and_changes_nothing(cloud):
    cloud.flavor()
    cloud.flavor(flavorid="2", name="m1.big", vcpus=8, ram=1024)
    cloud.compute_host("cell1", "host1")
    server = cloud.instance("cell1", host="host1")
    cloud.admin.put(P, {"quota_set": {"cores": 4}})
    before = cloud.counts()
    resp = cloud.user.post(f"/servers/{server}/action", {"resize": {"flavorRef": "2"}})
    assert resp.status_int == 403, resp.body
    assert "Quota exceeded for cores" in resp.json["forbidden"]["message"]
    assert cloud.counts() == before
    with cloud.db("cell1").session() as s:
        assert s.scalar(sa.select(cm.Instance.task_state).where(cm.Instance.uuid == server)) is None


def test_key_pairs_server_groups_and_members_quotas(services_cloud):
    cloud = services_cloud
    cloud.flavor()
    cloud.admin.put(P, {"quota_set": {"key_pairs": 1, "server_groups": 1,
                                      "server_group_members": 2}})
    assert cloud.user.post("/os-keypairs", {"keypair": {"name": "a"}}).status_int == 200
    resp = cloud.user.post("/os-keypairs", {"keypair": {"name": "b"}})
    assert resp.status_int == 403
    assert resp.json["forbidden"]["message"] == "Quota exceeded, too many key pairs."
    assert cloud.count(cloud.api_db, am.KeyPair) == 1
    group = cloud.user.post("/os-server-groups", {"server_group": {
        "name": "g", "policies": ["anti-affinity"]}}).json["server_group"]
    assert cloud.user.post("/os-server-groups", {"server_group": {
        "name": "h", "policies": ["affinity"]}}).status_int == 403
    hints = {"os:scheduler_hints": {"group": group["id"]}}
    assert cloud.user.post("/servers", {**_server(max_count=2), **hints}).status_int == 202
    before = cloud.counts()
    resp = cloud.user.post("/servers", {**_server(), **hints})
    assert resp.status_int == 403
    assert resp.json["forbidden"]["message"] == "Quota exceeded, too many servers in group"
    assert cloud.counts() == before
