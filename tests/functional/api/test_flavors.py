"""Flavors, extra specs and access lists."""
import sqlalchemy as sa

from novella.db import api_models as am

FLAVOR = {"flavor": {"name": "m1.test", "ram": 1024, "vcpus": 2, "disk": 10, "id": "10"}}


def test_create_show_list_delete(cloud):
    resp = cloud.admin.post("/flavors", FLAVOR, version="2.55")
    assert resp.status_int == 200
    fl = resp.json["flavor"]
    assert (fl["id"], fl["ram"], fl["vcpus"], fl["disk"], fl["swap"]) == ("10", 1024, 2, 10, "")
    assert fl["os-flavor-access:is_public"] is True and fl["description"] is None
    assert cloud.user.get("/flavors/10").json["flavor"]["name"] == "m1.test"
    assert cloud.user.get("/flavors").json["flavors"][0]["id"] == "10"
    detail = cloud.user.get("/flavors/detail", version="2.75").json["flavors"][0]
    assert detail["swap"] == 0
    assert cloud.admin.put("/flavors/10", {"flavor": {"description": "small"}},
                           version="2.55").json["flavor"]["description"] == "small"
    assert cloud.admin.delete("/flavors/10").status_int == 202
    assert cloud.count(cloud.api_db, am.Flavor) == 0
    assert cloud.user.get("/flavors/10").status_int == 404


def test_create_is_admin_only_and_validated(cloud):
    assert cloud.user.post("/flavors", FLAVOR).status_int == 403
    assert cloud.admin.post("/flavors", {"flavor": {"name": "x", "ram": 0, "vcpus": 1, "disk": 1}}).status_int == 400
    assert cloud.admin.post("/flavors", {"flavor": {"name": "x"}}).status_int == 400
    assert cloud.count(cloud.api_db, am.Flavor) == 0
    assert cloud.admin.post("/flavors", FLAVOR).status_int == 200
    resp = cloud.admin.post("/flavors", FLAVOR)
    assert resp.status_int == 409 and "conflictingRequest" in resp.json
    assert cloud.count(cloud.api_db, am.Flavor) == 1


def test_generated_id_and_paging(cloud):
    for i in range(5):
        cloud.flavor(flavorid=f"f{i}", name=f"n{i}", ram=128 * (i + 1))
    page = cloud.user.get("/flavors?limit=2").json
    assert [f["id"] for f in page["flavors"]] == ["f0", "f1"]
    assert "flavors_links" in page
    page = cloud.user.get("/flavors?limit=2&marker=f1").json
    assert [f["id"] for f in page["flavors"]] == ["f2", "f3"]
    assert [f["id"] for f in cloud.user.get("/flavors/detail?minRam=512").json["flavors"]] == ["f3", "f4"]
    assert [f["id"] for f in cloud.user.get("/flavors?sort_key=memory_mb&sort_dir=desc&limit=1").json["flavors"]] == ["f4"]
    assert cloud.user.get("/flavors?marker=nope").status_int == 400
    fl = cloud.admin.post("/flavors", {"flavor": {"name": "auto", "ram": 1, "vcpus": 1, "disk": 0}}).json["flavor"]
    assert len(fl["id"]) == 36


def test_extra_specs(cloud):
    cloud.flavor(flavorid="1")
    resp = cloud.admin.post("/flavors/1/os-extra_specs", {"extra_specs": {"hw:cpu_policy": "dedicated",
                                                                           "trait:HW_CPU_X86_AVX": "required"}})
    assert resp.status_int == 200
    assert cloud.user.get("/flavors/1/os-extra_specs").json["extra_specs"]["hw:cpu_policy"] == "dedicated"
    assert cloud.user.get("/flavors/1/os-extra_specs/hw:cpu_policy").json == {"hw:cpu_policy": "dedicated"}
    assert cloud.admin.put("/flavors/1/os-extra_specs/hw:cpu_policy",
                           {"hw:cpu_policy": "shared"}).json == {"hw:cpu_policy": "shared"}
    assert cloud.admin.put("/flavors/1/os-extra_specs/a", {"b": "1"}).status_int == 400
    assert cloud.user.post("/flavors/1/os-extra_specs", {"extra_specs": {"k": "v"}}).status_int == 403
    assert cloud.admin.delete("/flavors/1/os-extra_specs/hw:cpu_policy").status_int == 200
    assert cloud.admin.delete("/flavors/1/os-extra_specs/hw:cpu_policy").status_int == 404
    with cloud.api_db.session() as s:
        assert list(s.scalars(sa.select(am.FlavorExtraSpec.key))) == ["trait:HW_CPU_X86_AVX"]
    assert cloud.user.get("/flavors/1", version="2.61").json["flavor"]["extra_specs"] == \
        {"trait:HW_CPU_X86_AVX": "required"}


def test_private_flavor_access(cloud):
    cloud.admin.post("/flavors", {"flavor": {"name": "private", "ram": 1, "vcpus": 1, "disk": 0,
                                             "id": "p", "os-flavor-access:is_public": False}})
    assert cloud.user.get("/flavors/p").status_int == 404
    assert [f["id"] for f in cloud.user.get("/flavors").json["flavors"]] == []
    resp = cloud.admin.post("/flavors/p/action", {"addTenantAccess": {"tenant": "project-a"}})
    assert resp.json == {"flavor_access": [{"flavor_id": "p", "tenant_id": "project-a"}]}
    assert cloud.admin.post("/flavors/p/action", {"addTenantAccess": {"tenant": "project-a"}}).status_int == 409
    assert cloud.user.get("/flavors/p").status_int == 200
    assert [f["id"] for f in cloud.user.get("/flavors").json["flavors"]] == ["p"]
    assert cloud.other.get("/flavors/p").status_int == 404
    assert cloud.admin.get("/flavors/p/os-flavor-access").json["flavor_access"][0]["tenant_id"] == "project-a"
    assert cloud.user.get("/flavors/p/os-flavor-access").status_int == 403
    assert cloud.admin.post("/flavors/p/action", {"removeTenantAccess": {"tenant": "project-a"}}).json == \
        {"flavor_access": []}
    assert cloud.admin.post("/flavors/p/action", {"removeTenantAccess": {"tenant": "project-a"}}).status_int == 404
    assert cloud.count(cloud.api_db, am.FlavorProject) == 0
    cloud.flavor(flavorid="pub", name="pub")
    assert cloud.admin.get("/flavors/pub/os-flavor-access").status_int == 404
