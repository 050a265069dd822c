"""A server group shows only its members that are not deleted."""


def _group(cloud, group_id, version="2.79"):
    status, body = cloud.api("GET", f"/os-server-groups/{group_id}", version=version)
    assert status == 200, body
    return body["server_group"]


def _listed(cloud, group_id):
    status, body = cloud.api("GET", "/os-server-groups")
    assert status == 200, body
    return next(g for g in body["server_groups"] if g["id"] == group_id)


def _boot_in(cloud, gid, name):
    status, body = cloud.api("POST", "/servers", {
        "server": {"name": name, "flavorRef": "1", "imageRef": cloud.aio.demo_image["id"],
                   "networks": "auto"},
        "os:scheduler_hints": {"group": gid}})
    assert status == 202, body
    cloud.aio.wait_idle()
    return body["server"]["id"]


def test_deleted_server_leaves_the_group_view(cloud):
    status, body = cloud.api("POST", "/os-server-groups", {"server_group": {
        "name": "g", "policy": "soft-anti-affinity"}}, version="2.64")
    assert status == 200, body
    gid = body["server_group"]["id"]
    first, second = _boot_in(cloud, gid, "a"), _boot_in(cloud, gid, "b")
    assert sorted(_group(cloud, gid)["members"]) == sorted([first, second])

    status, _ = cloud.api("DELETE", f"/servers/{first}")
    assert status == 204
    cloud.aio.wait_idle()
    status, _ = cloud.api("GET", f"/servers/{first}")
    assert status == 404
    assert _group(cloud, gid)["members"] == [second]
    assert _group(cloud, gid, version="2.1")["members"] == [second]
    assert _listed(cloud, gid)["members"] == [second]
    assert cloud.server(second)["status"] == "ACTIVE"
