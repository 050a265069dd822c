"""Compute quotas on a whole all-in-one: usage counted from the cells or from
placement (``[quota] count_usage_from_placement``), unshelve of an offloaded
server, and the recheck after a create racing another (``[quota]
recheck_quota``). See docs/limits.md."""
import pytest
import sqlalchemy as sa

from novella.api.compute import quotas
from novella.db import api_models as am
from novella.db import cell_models as cm
from novella.db import cells as cells_mod
from tests.functional.moves.conftest import MoveCloud
from tests.functional.system.conftest import cloud_factory

PROJECT = "admin"
MODES = pytest.mark.parametrize("from_placement", [False, True], ids=["cells", "placement"])


@pytest.fixture
def make_cloud(tmp_path):
    factory = cloud_factory(tmp_path, MoveCloud, cells=1)
    make = next(factory)

    def build(from_placement, recheck=True):
        return make(2, quota={"count_usage_from_placement": from_placement,
                              "recheck_quota": recheck})
    yield build
    next(factory, None)


def _set_quota(cloud, **limits):
    status, body = cloud.api("PUT", f"/os-quota-sets/{PROJECT}", {"quota_set": limits})
    assert status == 200, body


def _detail(cloud, user=None):
    path = f"/os-quota-sets/{PROJECT}/detail" + (f"?user_id={user}" if user else "")
    status, body = cloud.api("GET", path)
    assert status == 200, body
    return {r: body["quota_set"][r]["in_use"] for r in ("instances", "cores", "ram")}


def _placement_usage(cloud, user=None):
    params = {"project_id": PROJECT, **({"user_id": user} if user else {})}
    usages = cloud.aio.placement.get("/usages", params=params, microversion="1.9")["usages"]
    return usages.get("VCPU", 0), usages.get("MEMORY_MB", 0)


def _consumers(cloud):
    """Every consumer holding an allocation on any provider."""
    out = set()
    for rp in cloud.aio.placement.list_resource_providers():
        out |= set(cloud.aio.placement.get_provider_allocations(rp["uuid"]))
    return out


def _names(cloud):
    with cells_mod.cell_database(cloud.aio.cells[0]).session() as s:
        cell = set(s.scalars(sa.select(cm.Instance.display_name).where(cm.Instance.deleted == 0)))
    cell0 = cells_mod.cell_by_uuid(cloud.aio.api_db, cells_mod.CELL0_UUID)
    with cells_mod.cell_database(cell0).session() as s:
        cell0 = set(s.scalars(sa.select(cm.Instance.display_name)))
    return cell | cell0


def _api_rows(cloud):
    with cloud.aio.api_db.session() as s:
        return {m.__tablename__: s.scalar(sa.select(sa.func.count()).select_from(m))
                for m in (am.BuildRequest, am.RequestSpec, am.InstanceMapping)}


def _shelve(cloud, sid):
    status, body = cloud.action(sid, {"shelve": None})
    assert status == 202, body
    cloud.aio.wait_idle()
    assert cloud.server(sid)["status"] == "SHELVED_OFFLOADED"


@MODES
def test_usage_counted_from_the_cells_or_from_placement(make_cloud, from_placement):
    cloud = make_cloud(from_placement)
    mine = cloud.boot(name="a")                           # admin's: 1 core, 512 MB
    cloud.boot(name="b", flavor="3", token="bob:admin")   # bob's: 2 cores, 4096 MB
    offloaded = cloud.boot(name="c", token="bob:admin")
    _shelve(cloud, offloaded)
    assert cloud.allocations(offloaded) == {}

    project, bob = _detail(cloud), _detail(cloud, "bob")
    admin = _detail(cloud, "admin")
    assert project["instances"] == 3 and bob["instances"] == 2 and admin["instances"] == 1
    if from_placement:
        # As placement holds them: the offloaded server holds nothing.
        assert (project["cores"], project["ram"]) == _placement_usage(cloud) == (3, 4608)
        assert (bob["cores"], bob["ram"]) == _placement_usage(cloud, "bob") == (2, 4096)
    else:
        # As the cells record them: the offloaded server keeps its flavor.
        assert (project["cores"], project["ram"]) == (4, 5120)
        assert (bob["cores"], bob["ram"]) == (3, 4608)
    assert (admin["cores"], admin["ram"]) == (1, 512) == _placement_usage(cloud, "admin")
    absolute = cloud.api("GET", "/limits")[1]["limits"]["absolute"]
    assert (absolute["totalCoresUsed"], absolute["totalRAMUsed"]) == \
        (project["cores"], project["ram"])
    assert cloud.server(mine)["status"] == "ACTIVE"


@MODES
def test_unshelve_of_an_offloaded_server_checks_cores_and_ram(make_cloud, from_placement):
    cloud = make_cloud(from_placement)
    _set_quota(cloud, cores=2)
    first = cloud.boot(name="first")
    _shelve(cloud, first)
    status, body = cloud.api("POST", "/servers", {"server": {
        "name": "second", "flavorRef": "3", "imageRef": cloud.aio.demo_image["id"],
        "networks": "auto"}})
    if not from_placement:
        # Counted from the cells, the offloaded server still uses its core:
        # there is no room for two more, and unshelving it needs no check.
        assert status == 403, body
        assert body["forbidden"]["message"] == (
            "Quota exceeded for cores: Requested 2, but already used 1 of 2 cores")
        status, body = cloud.action(first, {"unshelve": None})
        assert status == 202, body
        cloud.aio.wait_idle()
        assert cloud.server(first)["status"] == "ACTIVE"
        return
    # Counted from placement, the offloaded server uses nothing: the second
    # server takes both cores, and unshelving the first is refused.
    assert status == 202, body
    cloud.aio.wait_idle()
    second = body["server"]["id"]
    before = (_api_rows(cloud), cloud.usages(), _consumers(cloud),
              cloud.api("GET", f"/servers/{first}/os-instance-actions")[1])
    status, body = cloud.action(first, {"unshelve": None})
    assert status == 403, body
    assert body == {"forbidden": {"code": 403,
                                  "message": "Quota exceeded for resources: ['cores']"}}
    cloud.aio.wait_idle()
    srv = cloud.server(first)
    assert (srv["status"], srv["OS-EXT-STS:task_state"], srv["OS-EXT-SRV-ATTR:host"]) == (
        "SHELVED_OFFLOADED", None, None)
    assert (_api_rows(cloud), cloud.usages(), _consumers(cloud),
            cloud.api("GET", f"/servers/{first}/os-instance-actions")[1]) == before
    assert _consumers(cloud) == {second}
    # RAM too, and a user's own limit: once the cores are free, bob's RAM
    # quota (below the flavor's 512 MB) still refuses it.
    assert cloud.api("DELETE", f"/servers/{second}")[0] == 204
    cloud.aio.wait_idle()
    status, body = cloud.api("PUT", f"/os-quota-sets/{PROJECT}?user_id=admin",
                             {"quota_set": {"ram": 256}})
    assert status == 200, body
    status, body = cloud.action(first, {"unshelve": None})
    assert status == 403 and body["forbidden"]["message"] == \
        "Quota exceeded for resources: ['ram']", body
    status, body = cloud.api("DELETE", f"/os-quota-sets/{PROJECT}?user_id=admin")
    assert status == 202, body
    status, body = cloud.action(first, {"unshelve": None})
    assert status == 202, body
    cloud.aio.wait_idle()
    assert cloud.server(first)["status"] == "ACTIVE"
    assert _consumers(cloud) == {first}


def _race(cloud, monkeypatch):
    """Create 'late' while 'early' is created between late's quota check and
    its write, as two requests racing for the last core do."""
    real = quotas.servers_that_fit
    raced = []

    def fit_then_race(*args, **kwargs):
        fit = real(*args, **kwargs)
        if not raced:
            raced.append(None)          # the early request checks as usual
            raced[0] = cloud.boot(name="early")
        return fit
    monkeypatch.setattr(quotas, "servers_that_fit", fit_then_race)
    status, body = cloud.api("POST", "/servers", {"server": {
        "name": "late", "flavorRef": "1", "imageRef": cloud.aio.demo_image["id"],
        "networks": "auto"}})
    cloud.aio.wait_idle()
    return raced[0], status, body


@MODES
def test_recheck_undoes_a_create_that_lost_a_race(make_cloud, monkeypatch, from_placement):
    cloud = make_cloud(from_placement)
    _set_quota(cloud, cores=2)
    first = cloud.boot(name="first")
    early, status, body = _race(cloud, monkeypatch)
    assert status == 403, body
    assert body["forbidden"]["message"] == (
        "Quota exceeded for cores: Requested 1, but already used 2 of 2 cores")
    # The late request left nothing: no build request, mapping or spec, no
    # instance in any cell, and nothing in placement.
    assert _api_rows(cloud) == {"build_requests": 0, "request_specs": 2,
                                "instance_mappings": 2}
    assert _names(cloud) == {"first", "early"}
    assert _consumers(cloud) == {first, early}
    assert _placement_usage(cloud) == (2, 1024)
    assert _detail(cloud)["cores"] == 2
    assert {s["status"] for s in cloud.api("GET", "/servers/detail")[1]["servers"]} == {"ACTIVE"}


def test_without_recheck_the_race_passes_the_quota(make_cloud, monkeypatch):
    cloud = make_cloud(False, recheck=False)
    _set_quota(cloud, cores=2)
    cloud.boot(name="first")
    _early, status, body = _race(cloud, monkeypatch)
    assert status == 202, body
    assert _names(cloud) == {"first", "early", "late"}
    assert _detail(cloud)["cores"] == 3        # over the quota of 2


@pytest.fixture
def two_cells(tmp_path):
    factory = cloud_factory(tmp_path, MoveCloud, cells=2)
    yield next(factory)(1, quota={"count_usage_from_placement": False})
    next(factory, None)


def _cells_asked(monkeypatch):
    """The uuids of the cells each scatter of the quota count asks, call by call."""
    asked, scatter = [], cells_mod.scatter

    def recording(cells, fn):
        asked.append(sorted(c.uuid for c in cells))
        return scatter(cells, fn)
    monkeypatch.setattr(cells_mod, "scatter", recording)
    return asked


def test_cores_and_ram_counted_in_the_cells_the_mappings_name(two_cells, monkeypatch):
    """Cores and RAM are counted in the cells holding the project's servers,
    a server being deleted (queued for delete, its row not yet deleted) still
    counting its cores there; a mapping with no cell and no build request (a
    server between its build request and its cell) makes every cell count."""
    cloud = two_cells
    sid = cloud.boot("vm1", flavor="2")   # m1.small: 1 vCPU, 2048 MB
    assert _detail(cloud) == {"instances": 1, "cores": 1, "ram": 2048}
    with cloud.aio.api_db.session() as s:
        cell_id = s.scalar(sa.select(am.InstanceMapping.cell_id)
                           .where(am.InstanceMapping.instance_uuid == sid))
        cell = s.scalar(sa.select(am.CellMapping.uuid).where(am.CellMapping.id == cell_id))
    asked = _cells_asked(monkeypatch)
    assert _detail(cloud) == {"instances": 1, "cores": 1, "ram": 2048}
    assert asked == [[cell]]

    def set_mapping(**values):
        with cloud.aio.api_db.session(write=True) as s:
            s.execute(sa.update(am.InstanceMapping)
                      .where(am.InstanceMapping.instance_uuid == sid).values(**values))

    set_mapping(queued_for_delete=True)  # a delete under way: the host has not deleted it
    asked.clear()
    assert _detail(cloud) == {"instances": 0, "cores": 1, "ram": 2048}
    assert asked == [[cell]]

    set_mapping(queued_for_delete=False, cell_id=None)  # no cell, no build request
    asked.clear()
    assert _detail(cloud) == {"instances": 1, "cores": 1, "ram": 2048}
    every = sorted(c.uuid for c in cells_mod.list_cells(cloud.aio.api_db))
    assert asked == [every] and len(every) == 3  # cell0 and both cells
