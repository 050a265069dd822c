"""Boot from volume as clients ask for it: a mapping of an image onto a new volume
(``openstack server create --boot-from-volume``) and a blank volume beside it.

The host has the volume service make each volume (an image's one bootable,
carrying the image's metadata; a blank one named ``<server>-blank-vol``),
attaches it and boots. Asserted on the volumes, their attachments, the
server's mappings and what a delete leaves (``delete_on_termination``); a
compute service dying before each effect of the build leaves, once the server
is deleted, no volume it made.
"""
import pytest
import sqlalchemy as sa

from novella.db import cell_models as cm
from novella.db import cells as cells_mod
from tests.functional.moves import test_compute_crash_recovery as host_death
from tests.functional.moves.conftest import make_cloud  # noqa: F401 - fixture


@pytest.fixture
def cloud(make_cloud):  # noqa: F811
    return make_cloud(hosts=1)


def _boot(cloud, keep_blank=False):
    status, body = cloud.api("POST", "/servers", {"server": {
        "name": "bfv", "flavorRef": "1", "networks": "auto",
        "block_device_mapping_v2": [
            {"source_type": "image", "destination_type": "volume", "boot_index": 0,
             "uuid": cloud.aio.demo_image["id"], "volume_size": 2,
             "delete_on_termination": True},
            {"source_type": "blank", "destination_type": "volume", "boot_index": -1,
             "volume_size": 1, "volume_type": "fast",    # 2.67
             "delete_on_termination": not keep_blank}]}})
    assert status == 202, body
    cloud.aio.wait_idle()
    return body["server"]["id"]


def _volumes(cloud):
    return {v["id"]: v for v in cloud.aio.volume_api.list(None)}


def _mappings(cloud, sid):
    cell_db = cells_mod.cell_database(cells_mod.instance_cell(cloud.aio.api_db, sid))
    with cell_db.read_session() as s:
        return [(b.source_type, b.boot_index, b.volume_id) for b in s.scalars(
            sa.select(cm.BlockDeviceMapping).where(
                cm.BlockDeviceMapping.instance_uuid == sid,
                cm.BlockDeviceMapping.deleted == 0).order_by(cm.BlockDeviceMapping.id))]


def test_volumes_made_from_an_image_and_blank_are_attached_and_follow_delete_on_termination(
        cloud):
    sid = _boot(cloud, keep_blank=True)
    server = cloud.server(sid)
    assert server["status"] == "ACTIVE", cloud.fault(sid)
    assert server["image"] == ""   # booted from a volume
    (_, _, root_id), (_, _, blank_id) = _mappings(cloud, sid)
    volumes = _volumes(cloud)
    root, blank = volumes[root_id], volumes[blank_id]
    assert (root["size"], str(root["bootable"]).lower(), root["name"]) == (2, "true", "")
    assert root["volume_image_metadata"]["image_id"] == cloud.aio.demo_image["id"]
    assert (blank["size"], str(blank["bootable"]).lower(), blank["name"],
            blank["volume_type"]) == (1, "false", f"{sid}-blank-vol", "fast")
    assert root["volume_type"] == "__DEFAULT__"
    for volume in (root, blank):
        assert volume["status"] == "in-use"
        assert [a["server_id"] for a in volume["attachments"]] == [sid]
    assert sorted(v["id"] for v in server["os-extended-volumes:volumes_attached"]) == \
        sorted([root_id, blank_id])

    assert cloud.api("DELETE", f"/servers/{sid}")[0] == 204
    cloud.aio.wait_idle()
    left = _volumes(cloud)
    assert list(left) == [blank_id]    # the root went with the server, the blank stays
    assert (left[blank_id]["status"], left[blank_id]["attachments"]) == ("available", [])


def test_a_compute_service_dying_in_the_build_leaves_no_volume_it_made(cloud, monkeypatch):
    death = host_death.arm_host_deaths(cloud, monkeypatch)
    death.arm(None)
    sid = _boot(cloud)
    effects = list(death.effects)
    assert "create" in effects, effects
    assert cloud.server(sid)["status"] == "ACTIVE", cloud.fault(sid)
    for at in [None] + list(range(1, len(effects) + 1)):
        if at is not None:
            death.arm(at)
            sid = _boot(cloud)
            assert death.reached.is_set(), at
            host_death._restart(cloud, death, death.host)
            cloud.aio.wait_idle()
            assert cloud.server(sid)["status"] in ("ACTIVE", "ERROR"), at
        death.arm(-1)
        assert cloud.api("DELETE", f"/servers/{sid}")[0] == 204
        cloud.aio.wait_idle()
        assert _volumes(cloud) == {}, (at, effects[at - 1] if at else None)
