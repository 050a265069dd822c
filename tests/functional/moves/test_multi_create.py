"""Several servers in one request (min_count/max_count), as `openstack server create
--min N --max N --image ...` sends it: the image as a block device mapping."""
import pytest
import sqlalchemy as sa

from novella.db import api_models as am
from novella.db import cell_models as cm
from novella.db import cells

TINY = {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}
QUOTA = 10  # the [quota] instances default


def _create(cloud, count):
    image = cloud.aio.demo_image["id"]
    return cloud.api("POST", "/servers", {"server": {
        "name": "many", "flavorRef": "1", "imageRef": image, "networks": "auto",
        "block_device_mapping_v2": [{"uuid": image, "boot_index": 0, "source_type": "image",
                                     "destination_type": "local",
                                     "delete_on_termination": True}],
        "min_count": count, "max_count": count}})


def _servers(cloud):
    return cloud.api("GET", "/servers/detail?limit=100")[1]["servers"]


def _mappings_rows(cloud, ids):
    """{server: its block device mappings' uuids} read in the cell each is mapped to."""
    out = {}
    for sid in ids:
        cell = cells.instance_cell(cloud.aio.api_db, sid)
        assert cell is not None and cell.name == "cell1", (sid, cell)
        with cells.cell_database(cell).session() as s:
            out[sid] = s.scalars(sa.select(cm.BlockDeviceMapping.uuid).where(
                cm.BlockDeviceMapping.instance_uuid == sid,
                cm.BlockDeviceMapping.deleted == 0)).all()
    return out


@pytest.mark.parametrize("count", [2, QUOTA])
def test_every_server_of_a_request_is_built_with_its_own_books(make_cloud, count):
    cloud = make_cloud(hosts=2)
    status, body = _create(cloud, count)
    assert status == 202, body
    cloud.aio.wait_idle()

    servers = _servers(cloud)
    assert len(servers) == count
    assert [s["status"] for s in servers] == ["ACTIVE"] * count, [s.get("fault") for s in servers]
    ids = [s["id"] for s in servers]
    rows = _mappings_rows(cloud, ids)
    assert all(len(uuids) == 1 for uuids in rows.values()), rows
    assert len({uuids[0] for uuids in rows.values()}) == count  # one mapping each, its own
    for sid in ids:
        (resources,) = cloud.allocations(sid).values()
        assert resources["resources"] == TINY
    usages = cloud.usages()
    assert sum(u["VCPU"] for u in usages.values()) == count
    assert sum(u["MEMORY_MB"] for u in usages.values()) == count * TINY["MEMORY_MB"]
    with cloud.aio.api_db.session() as s:
        assert s.scalar(sa.select(sa.func.count()).select_from(am.BuildRequest)) == 0
        assert s.scalar(sa.select(sa.func.count()).select_from(am.Operation).where(
            am.Operation.status == "running")) == 0

    for sid in ids:
        assert cloud.api("DELETE", f"/servers/{sid}")[0] == 204
    cloud.aio.wait_idle()
    assert _servers(cloud) == []
    assert all(cloud.allocations(sid) == {} for sid in ids)
    assert all(not any(u.values()) for u in cloud.usages().values())


def test_a_request_over_the_quota_is_refused_and_changes_nothing(make_cloud):
    cloud = make_cloud(hosts=2)
    status, body = _create(cloud, QUOTA + 1)
    assert status == 403, body
    assert "Quota exceeded" in body["forbidden"]["message"]
    cloud.aio.wait_idle()
    assert _servers(cloud) == []
    with cloud.aio.api_db.session() as s:
        for model in (am.BuildRequest, am.RequestSpec, am.InstanceMapping):
            assert s.scalar(sa.select(sa.func.count()).select_from(model)) == 0, model
    assert all(not any(u.values()) for u in cloud.usages().values())


def test_a_server_that_cannot_even_be_buried_does_not_stop_the_others(make_cloud,
                                                                      monkeypatch):
    """The first server's build fails and so does recording it in cell0: the others
    of the request are still built (the scheduler claimed for all of them at once)."""
    from novella.conductor import ends
    from novella.conductor.tasks import build

    cloud = make_cloud(hosts=2)
    real_create, failed = build.create_instance, []

    def create_instance(cell_db, ctxt, instance_uuid, *args, **kwargs):
        if not failed:
            failed.append(instance_uuid)
            raise RuntimeError("cell database refused the server")
        return real_create(cell_db, ctxt, instance_uuid, *args, **kwargs)

    def bury(*args, **kwargs):
        raise RuntimeError("cell0 refused it too")

    monkeypatch.setattr(build, "create_instance", create_instance)
    monkeypatch.setattr(ends, "bury_in_cell0", bury)
    status, body = _create(cloud, 3)
    assert status == 202, body
    cloud.aio.wait_idle()

    built = [s for s in _servers(cloud) if s["id"] not in failed]
    assert [s["status"] for s in built] == ["ACTIVE", "ACTIVE"]
    for server in built:
        (resources,) = cloud.allocations(server["id"]).values()
        assert resources["resources"] == TINY
    assert cloud.allocations(failed[0]) == {}  # its claim was given back
    assert sum(u["VCPU"] for u in cloud.usages().values()) == 2
