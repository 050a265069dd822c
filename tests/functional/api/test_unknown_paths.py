"""An unknown path is a 404 for anyone; a project id in the URL is checked on known ones."""
import pytest


def _not_found(resp):
    assert resp.status_int == 404, resp.body
    assert resp.json["itemNotFound"] == {"code": 404,
                                         "message": "The resource could not be found."}


@pytest.mark.parametrize("path", ["/os-nothing", "/os-nothing/here", "/os-nothing/here/too",
                                  "/project-b/os-nothing", "/project-a/servers/x/nothing/y"])
def test_unknown_path_is_404_for_a_member(cloud, path):
    _not_found(cloud.user.get(path))
    _not_found(cloud.user.post(path, {"server": {"name": "x"}}))


def test_unknown_path_is_404_for_an_admin(cloud):
    _not_found(cloud.admin.get("/os-nothing/here"))


def test_project_in_url_on_a_known_path(cloud):
    cloud.compute_host("cell1", "h1")
    uuid = cloud.instance("cell1", host="h1")
    # The caller's own project: the same answer as without it, links keep the project.
    resp = cloud.user.get("/project-a/servers")
    assert resp.status_int == 200
    assert [s["id"] for s in resp.json["servers"]] == [uuid]
    assert "/v2.1/project-a/servers/" + uuid in resp.json["servers"][0]["links"][0]["href"]
    # Another project's id in the URL is a malformed request, and lists nothing.
    resp = cloud.user.get("/project-b/servers")
    assert resp.status_int == 400
    assert resp.json["badRequest"]["message"] == (
        "Malformed request URL: URL's project_id 'project-b' doesn't match "
        "Context's project_id 'project-a'")
