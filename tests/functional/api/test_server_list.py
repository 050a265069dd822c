"""Listing servers merges every cell and the build requests, in order, page by page."""
import datetime
import uuid as uuid_mod

import pytest

T0 = datetime.datetime(2024, 1, 1, 12, 0, 0)


@pytest.fixture
def spread(cloud):
    """Ten servers of project-a spread over cell0, cell1, cell2 and two build requests."""
    cloud.flavor()
    cloud.flavor(flavorid="2", name="m1.large", ram=2048)
    made = []
    cells = ["cell1", "cell2", "cell1", "cell0", "cell2", "cell2", "cell1", "cell1"]
    for i, cell in enumerate(cells):
        made.append(cloud.instance(cell, name=f"srv-{i}", host=None if cell == "cell0" else "h",
                                   vm_state="error" if cell == "cell0" else "active",
                                   created_at=T0 + datetime.timedelta(minutes=i),
                                   tags=["even"] if i % 2 == 0 else ["odd"]))
    for i in (8, 9):
        made.append(cloud.user.post("/servers", {"server": {
            "name": f"srv-{i}", "flavorRef": "1", "imageRef": "155d900f-4e14-4e4c-a73d-069cbf4541e6"}}
        ).json["server"]["id"])
    # Noise that must never show: hidden copies, another project, deleted.
    cloud.instance("cell2", name="hidden-copy", hidden=True, created_at=T0)
    cloud.instance("cell1", name="bobs", project="project-b", user="bob")
    cloud.instance("cell2", name="gone", deleted=1)
    return made


def _names(resp):
    return [s["name"] for s in resp.json["servers"]]


def test_default_order_is_newest_first_across_cells(cloud, spread):
    resp = cloud.user.get("/servers")
    assert resp.status_int == 200
    names = _names(resp)
    assert set(names[:2]) == {"srv-8", "srv-9"}
    assert names[2:] == [f"srv-{i}" for i in range(7, -1, -1)]


def test_paging_with_marker_walks_every_server_once(cloud, spread):
    seen, marker = [], None
    while True:
        path = "/servers/detail?limit=3&sort_key=display_name&sort_dir=asc"
        resp = cloud.user.get(path + (f"&marker={marker}" if marker else ""))
        assert resp.status_int == 200
        page = resp.json["servers"]
        seen += [s["name"] for s in page]
        if "servers_links" not in resp.json:
            break
        assert resp.json["servers_links"][0]["rel"] == "next"
        marker = page[-1]["id"]
    assert seen == [f"srv-{i}" for i in range(10)]


def test_sort_by_two_keys(cloud, spread):
    resp = cloud.user.get("/servers/detail?sort_key=vm_state&sort_dir=asc&sort_key=display_name&sort_dir=desc")
    names = _names(resp)
    # active < building < error; names descending inside each.
    assert names == ["srv-7", "srv-6", "srv-5", "srv-4", "srv-2", "srv-1", "srv-0",
                     "srv-9", "srv-8", "srv-3"]


def test_filters(cloud, spread):
    assert _names(cloud.user.get("/servers?name=srv-[12]")) == ["srv-2", "srv-1"]
    assert sorted(_names(cloud.user.get("/servers?status=ERROR"))) == ["srv-3"]
    assert sorted(_names(cloud.user.get("/servers?status=BUILD"))) == ["srv-8", "srv-9"]
    odd = cloud.user.get("/servers?tags=odd", version="2.26")
    assert sorted(_names(odd)) == ["srv-1", "srv-3", "srv-5", "srv-7"]
    assert len(_names(cloud.user.get("/servers?not-tags=odd", version="2.26"))) == 6
    assert _names(cloud.user.get("/servers?flavor=2")) == []
    assert len(_names(cloud.user.get("/servers?flavor=1"))) == 10
    since = (T0 + datetime.timedelta(minutes=30)).isoformat()
    assert cloud.user.get("/servers?status=nonsense", version="2.38").status_int == 400
    assert cloud.user.get("/servers?status=nonsense").json["servers"] == []
    assert cloud.user.get("/servers?changes-since=yesterday").status_int == 400
    assert cloud.user.get(f"/servers?changes-since={since}").status_int == 200


def test_bad_paging_parameters(cloud, spread):
    assert cloud.user.get("/servers?limit=-1").status_int == 400
    assert cloud.user.get("/servers?limit=abc").status_int == 400
    resp = cloud.user.get(f"/servers?marker={uuid_mod.uuid4()}")
    assert resp.status_int == 400 and "marker" in resp.json["badRequest"]["message"]
    assert cloud.user.get("/servers?sort_key=deleted").status_int == 400
    assert cloud.user.get("/servers?sort_dir=up").status_int == 400
    assert cloud.user.get("/servers?foo=bar", version="2.75").status_int == 400
    assert cloud.user.get("/servers?foo=bar", version="2.74").status_int == 200


def test_all_tenants_is_admin_only(cloud, spread):
    assert cloud.user.get("/servers?all_tenants=1").status_int == 403
    names = _names(cloud.admin.get("/servers?all_tenants=1"))
    assert "bobs" in names and "hidden-copy" not in names and "gone" not in names
    assert _names(cloud.admin.get("/servers?all_tenants=1&project_id=project-b")) == ["bobs"]
    # The admin's own project has nothing.
    assert _names(cloud.admin.get("/servers")) == []


def test_host_filter_is_admin_only(cloud, spread):
    cloud.instance("cell1", name="on-h2", host="h2")
    assert _names(cloud.admin.get("/servers?all_tenants=1&host=h2")) == ["on-h2"]
    # Ignored for a user: every server of the project is listed.
    assert len(_names(cloud.user.get("/servers?host=h2"))) == 11


def test_detail_shows_cell_and_build_request_fields(cloud, spread):
    servers = cloud.user.get("/servers/detail", version="2.47").json["servers"]
    by_name = {s["name"]: s for s in servers}
    assert by_name["srv-8"]["status"] == "BUILD"
    assert by_name["srv-0"]["status"] == "ACTIVE"
    assert by_name["srv-3"]["status"] == "ERROR"
    assert all(s["flavor"]["ram"] == 512 for s in servers)


def _move_to_cell(cloud, server_id, cell, **values):
    """What the conductor does with a build request: the instance in its cell first,
    then its mapping points there and the build request goes."""
    import sqlalchemy as sa
    from novella.db import api_models as am, cell_models as cm
    cloud.instance(cell, uuid=server_id, name="moved", host="h", hidden=True, **values)
    with cloud.db(cell).session(write=True) as s:
        s.execute(sa.update(cm.Instance).where(cm.Instance.uuid == server_id).values(hidden=False))
    with cloud.api_db.session(write=True) as s:
        s.execute(sa.update(am.InstanceMapping).where(
            am.InstanceMapping.instance_uuid == server_id).values(cell_id=cloud.cells[cell].id))
        s.execute(sa.delete(am.BuildRequest).where(am.BuildRequest.instance_uuid == server_id))


@pytest.mark.parametrize("query", ["", "?status=ACTIVE", "?name=moved"])
def test_server_leaving_its_build_request_while_listed_is_listed(cloud, monkeypatch, query):
    """A server that reaches its cell after that cell was read is still listed, as it is
    in its cell (not as the build request it was)."""
    from novella.api.compute import instances
    cloud.flavor()
    waiting, moving = [cloud.user.post("/servers", {"server": {
        "name": name, "flavorRef": "1", "imageRef": "155d900f-4e14-4e4c-a73d-069cbf4541e6"}}
    ).json["server"]["id"] for name in ("waiting", "moving")]
    scatter = instances.cells_mod.scatter

    def cells_then_move(cells, fn):
        results = scatter(cells, fn)
        if not moved:
            moved.append(moving)
            _move_to_cell(cloud, moving, "cell2")
        return results
    moved = []
    monkeypatch.setattr(instances.cells_mod, "scatter", cells_then_move)
    resp = cloud.user.get("/servers/detail" + query)
    assert moved == [moving]
    listed = {s["id"]: (s["name"], s["status"]) for s in resp.json["servers"]}
    expected = {moving: ("moved", "ACTIVE")}
    if not query:
        expected[waiting] = ("waiting", "BUILD")
    assert listed == expected
