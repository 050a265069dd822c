"""Key pairs and server groups."""
import json

import sqlalchemy as sa

from novella.db import api_models as am

PUB = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGXgw8W4Ebl80ncU1WbY7/IrXoRkCwPFIeiDMxf5sTX0 me@host"


def test_keypairs(cloud):
    resp = cloud.user.post("/os-keypairs", {"keypair": {"name": "k1", "public_key": PUB}}, version="2.2")
    assert resp.status_int == 201
    assert resp.json["keypair"]["fingerprint"].count(":") == 15 and resp.json["keypair"]["type"] == "ssh"
    assert cloud.user.post("/os-keypairs", {"keypair": {"name": "k1", "public_key": PUB}}).status_int == 409
    generated = cloud.user.post("/os-keypairs", {"keypair": {"name": "gen"}}).json["keypair"]
    assert "PRIVATE KEY" in generated["private_key"]
    assert cloud.user.post("/os-keypairs", {"keypair": {"name": "g2"}}, version="2.92").status_int == 400
    assert [k["keypair"]["name"] for k in cloud.user.get("/os-keypairs").json["keypairs"]] == ["gen", "k1"]
    assert cloud.other.get("/os-keypairs").json["keypairs"] == []
    assert cloud.other.get("/os-keypairs/k1").status_int == 404
    assert cloud.user.get("/os-keypairs/k1").json["keypair"]["user_id"] == "alice"
    assert cloud.user.delete("/os-keypairs/k1", version="2.2").status_int == 204
    with cloud.api_db.session() as s:
        assert list(s.scalars(sa.select(am.KeyPair.name))) == ["gen"]


def test_server_groups_old_and_new_formats(cloud):
    resp = cloud.user.post("/os-server-groups", {"server_group": {"name": "g", "policies": ["anti-affinity"]}})
    assert resp.status_int == 200
    old = resp.json["server_group"]
    assert old["policies"] == ["anti-affinity"] and old["metadata"] == {} and old["members"] == []
    assert cloud.user.post("/os-server-groups", {"server_group": {
        "name": "s", "policies": ["soft-affinity"]}}, version="2.14").status_int == 400
    assert cloud.user.post("/os-server-groups", {"server_group": {
        "name": "s", "policies": ["soft-affinity"]}}, version="2.15").status_int == 200
    new = cloud.user.post("/os-server-groups", {"server_group": {
        "name": "r", "policy": "anti-affinity", "rules": {"max_server_per_host": 2}}}, version="2.64")
    assert new.status_int == 200
    g = new.json["server_group"]
    assert g["policy"] == "anti-affinity" and g["rules"] == {"max_server_per_host": 2}
    assert "policies" not in g and g["project_id"] == "project-a"
    assert cloud.user.post("/os-server-groups", {"server_group": {
        "name": "bad", "policy": "affinity", "rules": {"max_server_per_host": 2}}}, version="2.64").status_int == 400
    assert cloud.user.post("/os-server-groups", {"server_group": {
        "name": "bad", "policies": ["anti-affinity"]}}, version="2.64").status_int == 400
    assert cloud.count(cloud.api_db, am.InstanceGroup) == 3
    assert len(cloud.user.get("/os-server-groups").json["server_groups"]) == 3
    assert cloud.other.get("/os-server-groups").json["server_groups"] == []
    assert cloud.other.get(f"/os-server-groups/{g['id']}").status_int == 404
    assert len(cloud.admin.get("/os-server-groups?all_projects=1").json["server_groups"]) == 3
    assert cloud.other.delete(f"/os-server-groups/{g['id']}").status_int == 404
    assert cloud.user.delete(f"/os-server-groups/{g['id']}").status_int == 204
    assert cloud.count(cloud.api_db, am.InstanceGroup) == 2


def test_server_create_joins_group(cloud):
    cloud.flavor()
    gid = cloud.user.post("/os-server-groups", {"server_group": {
        "name": "g", "policy": "affinity"}}, version="2.64").json["server_group"]["id"]
    resp = cloud.user.post("/servers", {"server": {"name": "a", "flavorRef": "1",
                                                   "imageRef": "155d900f-4e14-4e4c-a73d-069cbf4541e6"},
                                        "os:scheduler_hints": {"group": gid}})
    assert resp.status_int == 202
    uuid = resp.json["server"]["id"]
    assert cloud.user.get(f"/os-server-groups/{gid}").json["server_group"]["members"] == [uuid]
    with cloud.api_db.session() as s:
        spec = json.loads(s.scalars(sa.select(am.RequestSpec.spec)).one())
    assert spec["instance_group"]["uuid"] == gid and spec["instance_group"]["policy"] == "affinity"
    assert spec["scheduler_hints"] == {"group": gid}
    assert cloud.user.get("/servers/" + uuid, version="2.71").json["server"]["server_groups"] == [gid]
    missing = "7b4b8d5a-2f27-4a3f-9a0c-5a7b9b4d1e10"
    before = cloud.counts()
    assert cloud.user.post("/servers", {"server": {"name": "b", "flavorRef": "1",
                                                   "imageRef": "155d900f-4e14-4e4c-a73d-069cbf4541e6"},
                                        "os:scheduler_hints": {"group": missing}}).status_int == 400
    assert cloud.counts() == before


def test_limits_count_usage_across_cells_and_build_requests(cloud):
    cloud.instance("cell1", vcpus=2, memory_mb=1024)
    cloud.instance("cell2", vcpus=1, memory_mb=512)
    cloud.instance("cell2", project="project-b", user="bob", vcpus=8)
    cloud.flavor()
    cloud.user.post("/servers", {"server": {"name": "b", "flavorRef": "1",
                                            "imageRef": "155d900f-4e14-4e4c-a73d-069cbf4541e6"}})
    absolute = cloud.user.get("/limits").json["limits"]["absolute"]
    # As the quotas count them: the server being built uses its flavor's core and RAM too.
    assert (absolute["totalInstancesUsed"], absolute["totalCoresUsed"], absolute["totalRAMUsed"]) == (3, 4, 2048)
    assert (absolute["maxTotalInstances"], absolute["maxTotalCores"]) == (10, 20)  # [quota] defaults


def test_keypair_with_an_invalid_public_key_is_refused(cloud):
    for key in ("ssh-rsa JUNK nova@ubuntu", "ssh-rsa " + "A" * 2048 + " openstack@ubuntu",
                "not a key"):
        resp = cloud.user.post("/os-keypairs", {"keypair": {"name": "bad", "public_key": key}})
        assert resp.status_int == 400, key
        assert resp.json["badRequest"]["message"] == \
            "Keypair data is invalid: failed to generate fingerprint"
    with cloud.api_db.session() as s:
        assert list(s.scalars(sa.select(am.KeyPair.name))) == []
