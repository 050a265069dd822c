"""The reference's nova-network quota names (floating_ips, fixed_ips,
security_groups, security_group_rules): kept by the default quota class before
2.50 and by a project before 2.36, shown back, stored as overrides."""
import sqlalchemy as sa

from novella.db import api_models as am

NETWORK = ("floating_ips", "fixed_ips", "security_groups", "security_group_rules")
C = "/os-quota-class-sets/default"


def _rows(cloud, model, *where):
    with cloud.api_db.session() as s:
        return {r.resource: r.hard_limit for r in s.scalars(sa.select(model).where(*where))}


def test_default_class_keeps_network_quotas_where_they_exist(cloud):
    shown = cloud.admin.get(C).json["quota_class_set"]
    assert all(shown[n] == -1 for n in NETWORK)
    body = {k: v + 100 for k, v in shown.items() if k != "id"}  # as tempest does
    resp = cloud.admin.put(C, {"quota_class_set": body})
    assert resp.status_int == 200
    assert {k: resp.json["quota_class_set"][k] for k in body} == body
    again = cloud.admin.get(C).json["quota_class_set"]
    assert {k: again[k] for k in body} == body
    stored = _rows(cloud, am.QuotaClass, am.QuotaClass.class_name == "default")
    assert {n: stored[n] for n in NETWORK} == {n: 99 for n in NETWORK}
    # The class's network values are the defaults a project shows before 2.36.
    project = cloud.admin.get("/os-quota-sets/project-a/defaults").json["quota_set"]
    assert all(project[n] == 99 for n in NETWORK)
    limits = cloud.user.get("/limits").json["limits"]["absolute"]
    assert limits["maxTotalFloatingIps"] == 99 and limits["maxSecurityGroupRules"] == 99
    # From 2.50 the class neither shows nor takes them (400, nothing stored).
    assert "floating_ips" not in cloud.admin.get(C, version="2.50").json["quota_class_set"]
    resp = cloud.admin.put(C, {"quota_class_set": {"floating_ips": 5}}, version="2.50")
    assert resp.status_int == 400
    assert _rows(cloud, am.QuotaClass)["floating_ips"] == 99


def test_project_keeps_network_quotas_before_2_36(cloud):
    resp = cloud.admin.put("/os-quota-sets/project-a", {"quota_set": {"security_groups": 7}})
    assert resp.status_int == 200 and resp.json["quota_set"]["security_groups"] == 7
    assert _rows(cloud, am.Quota, am.Quota.project_id == "project-a") == {"security_groups": 7}
    assert cloud.user.get("/os-quota-sets/project-a").json["quota_set"]["security_groups"] == 7
    resp = cloud.admin.put("/os-quota-sets/project-a", {"quota_set": {"security_groups": 8}},
                           version="2.36")
    assert resp.status_int == 400
    assert _rows(cloud, am.Quota, am.Quota.project_id == "project-a") == {"security_groups": 7}
