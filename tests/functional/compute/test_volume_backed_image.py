"""createImage of a volume-backed server: a snapshot of each of its volumes in the
volume service, the guest quiesced while they are made, and an image with no data
whose properties map the snapshots; a server booted from that image gets volumes
made of them. Asserted on the snapshots, the image, the guest's quiesce record, the
server's mappings, its volumes and its allocations; refusals change nothing; a
compute service dying at each effect of a build from the image leaves nothing
behind once the server is deleted."""
import datetime

import pytest
import sqlalchemy as sa

from novella.compute import volume_ops
from novella.context import get_admin_context
from novella.db import cell_models as cm
from novella.db import cells as cells_mod
from novella.db import host_operations
from novella.virt import simulated
from tests.functional.moves import test_compute_crash_recovery as host_death
from tests.functional.moves.conftest import make_cloud  # noqa: F401 - fixture


@pytest.fixture
def cloud(make_cloud):  # noqa: F811
    return make_cloud(hosts=1)


def _from_volume(cloud, require_quiesce=False):
    volume_api = cloud.aio.volume_api
    root = volume_api.create(get_admin_context(), 2, name="root", description="the root",
                             image_id=cloud.aio.demo_image["id"])
    if require_quiesce:
        with volume_api.db.session(write=True) as s:
            from novella.volume import models
            row = s.get(models.Volume, root["id"])
            row.volume_image_metadata = dict(row.volume_image_metadata,
                                             os_require_quiesce="yes")
    status, body = cloud.api("POST", "/servers", {"server": {
        "name": "bfv", "flavorRef": "1", "networks": "auto",
        "block_device_mapping_v2": [{"source_type": "volume", "destination_type": "volume",
                                     "uuid": root["id"], "boot_index": 0,
                                     "delete_on_termination": True}]}})
    assert status == 202, body
    cloud.aio.wait_idle()
    sid = body["server"]["id"]
    assert cloud.server(sid)["status"] == "ACTIVE", cloud.fault(sid)
    return sid, root["id"]


def _guest(cloud, sid):
    return cloud.aio.computes[cloud.host_of(sid)].driver._load(sid)


def _snapshots(cloud):
    return [(s["volume_id"], s["status"], s["name"])
            for s in cloud.aio.volume_api.list_snapshots(None)]


def _mappings(cloud, sid):
    cell_db = cells_mod.cell_database(cells_mod.instance_cell(cloud.aio.api_db, sid))
    with cell_db.read_session() as s:
        return [(b.source_type, b.destination_type, b.boot_index, b.volume_id, b.snapshot_id)
                for b in s.scalars(sa.select(cm.BlockDeviceMapping).where(
                    cm.BlockDeviceMapping.instance_uuid == sid,
                    cm.BlockDeviceMapping.deleted == 0))]


def _create_image(cloud, sid, version="2.45", **extra):
    status, body = cloud.action(sid, {"createImage": {"name": "vb-snap", **extra}},
                                version=version)
    cloud.aio.wait_idle()
    return status, body


def test_an_image_of_a_volume_backed_server_maps_snapshots_of_its_volumes(cloud):
    sid, root = _from_volume(cloud)
    status, body = _create_image(cloud, sid, metadata={"purpose": "test"})
    assert status == 202, body
    [(volume_id, snap_status, snap_name)] = _snapshots(cloud)
    assert (volume_id, snap_status, snap_name) == (root, "available", "snapshot for vb-snap")
    [snap] = cloud.aio.volume_api.list_snapshots(None)
    image = cloud.aio.image_api.get(None, body["image_id"])
    props = image["properties"]
    assert (image["status"], image["size"], image["name"], image["disk_format"]) == \
        ("active", 0, "vb-snap", "raw")
    assert (props["bdm_v2"], props["root_device_name"], props["purpose"]) == \
        (True, "/dev/vda", "test")
    [mapping] = props["block_device_mapping"]
    assert {k: mapping[k] for k in ("source_type", "destination_type", "snapshot_id",
                                    "boot_index", "volume_size", "delete_on_termination",
                                    "volume_id", "device_name")} == {
        "source_type": "snapshot", "destination_type": "volume", "snapshot_id": snap["id"],
        "boot_index": 0, "volume_size": 2, "delete_on_termination": True,
        "volume_id": None, "device_name": "/dev/vda"}
    # The running guest was frozen while its volume was snapshotted, and thawed.
    guest = _guest(cloud, sid)
    assert (guest["quiesces"], guest["quiesced"]) == (1, False)
    assert "quiesced_for_snapshot" not in host_operations.of_server(
        cells_mod.cell_database(cells_mod.instance_cell(cloud.aio.api_db, sid)), sid)
    server = cloud.server(sid)
    assert (server["status"], server["OS-EXT-STS:task_state"]) == ("ACTIVE", None)
    assert cloud.events(sid, "createImage") == {"api_snapshot_instance": "Success"}
    assert cloud.aio.volume_api.get(None, root)["status"] == "in-use"

    # Stopped: no quiesce; before 2.45 no body.
    assert cloud.action(sid, {"os-stop": None})[0] == 202
    cloud.aio.wait_idle()
    status, body = _create_image(cloud, sid, version="2.44")
    assert (status, body) == (202, None)
    assert len(_snapshots(cloud)) == 2 and _guest(cloud, sid)["quiesces"] == 1


def test_a_server_booted_from_the_image_gets_volumes_made_of_the_snapshots(cloud):
    sid, root = _from_volume(cloud)
    image_id = _create_image(cloud, sid)[1]["image_id"]
    [snap] = cloud.aio.volume_api.list_snapshots(None)
    status, body = cloud.api("POST", "/servers", {"server": {
        "name": "from-snap", "flavorRef": "1", "imageRef": image_id, "networks": "auto"}})
    assert status == 202, body
    cloud.aio.wait_idle()
    new = body["server"]["id"]
    assert cloud.server(new)["status"] == "ACTIVE", cloud.fault(new)
    [(source, dest, boot, volume_id, snapshot_id)] = _mappings(cloud, new)
    assert (source, dest, boot, snapshot_id) == ("snapshot", "volume", 0, snap["id"])
    volume = cloud.aio.volume_api.get(None, volume_id)
    assert volume_id != root
    assert (volume["status"], volume["size"], volume["bootable"],
            [a["server_id"] for a in volume["attachments"]]) == ("in-use", 2, True, [new])
    assert list(_guest(cloud, new)["volumes"]) == [volume_id]
    # Volume-backed: no root disk in Placement.
    [resources] = [a["resources"] for a in cloud.allocations(new).values()]
    assert resources.get("DISK_GB", 0) == 0, resources
    # Deleted with the server (the mapping's delete_on_termination is the original's).
    assert cloud.api("DELETE", f"/servers/{new}")[0] == 204
    cloud.aio.wait_idle()
    assert [v["id"] for v in cloud.aio.volume_api.list(None)] == [root]


def test_refusals_make_no_snapshot_and_no_image(cloud):
    sid, _root = _from_volume(cloud)
    images = len(cloud.aio.image_api.list(None))
    status, body = cloud.action(sid, {"createBackup": {
        "name": "b", "backup_type": "daily", "rotation": 1}})
    assert status == 400 and "volume-backed" in body["badRequest"]["message"], body
    assert cloud.action(sid, {"pause": None})[0] == 202
    assert cloud.action(sid, {"createImage": {}})[0] == 400
    cloud.aio.wait_idle()
    assert (_snapshots(cloud), len(cloud.aio.image_api.list(None))) == ([], images)


def test_a_guest_that_cannot_be_quiesced(cloud):
    # An image that does not require quiescing: the snapshots are made anyway.
    sid, _root = _from_volume(cloud)
    simulated.inject_fault(cloud.host_of(sid), "quiesce", sid)
    assert _create_image(cloud, sid)[0] == 202
    assert len(_snapshots(cloud)) == 1 and "quiesces" not in _guest(cloud, sid)
    # One that does: 400, no snapshot, no image.
    sid, _root = _from_volume(cloud, require_quiesce=True)
    images = len(cloud.aio.image_api.list(None))
    simulated.inject_fault(cloud.host_of(sid), "quiesce", sid)
    status, body = _create_image(cloud, sid)
    assert status == 400 and "Quiescing is not supported" in body["badRequest"]["message"]
    assert (len(_snapshots(cloud)), len(cloud.aio.image_api.list(None))) == (1, images)
    assert "quiesced_for_snapshot" not in host_operations.of_server(
        cells_mod.cell_database(cells_mod.instance_cell(cloud.aio.api_db, sid)), sid)


def test_a_compute_service_dying_while_a_guest_is_frozen_thaws_it_when_it_starts(
        cloud, monkeypatch):
    sid, _root = _from_volume(cloud)
    host = cloud.host_of(sid)
    compute = cloud.aio.computes[host]
    # The host quiesced the guest (noted), then its service stopped before the thaw.
    compute.quiesce_instance(get_admin_context(), sid)
    assert _guest(cloud, sid)["quiesced"] is True
    death = host_death.arm_host_deaths(cloud, monkeypatch)
    host_death._restart(cloud, death, host)
    assert _guest(cloud, sid)["quiesced"] is False
    assert "quiesced_for_snapshot" not in host_operations.of_server(compute.cell_db, sid)


def test_a_guest_whose_thaw_never_came_is_thawed_by_the_periodic_task(cloud, monkeypatch):
    sid, _root = _from_volume(cloud)
    compute = cloud.aio.computes[cloud.host_of(sid)]
    # The API quiesced the guest, then its process died before the thaw: the
    # compute service lives on and is never told.
    assert compute._thaw_watch is None             # nothing frozen: no periodic check
    compute.quiesce_instance(get_admin_context(), sid)
    assert compute._thaw_watch is not None
    assert compute.thaw_forgotten_guests() == []   # frozen moments ago: a snapshot may be on
    assert _guest(cloud, sid)["quiesced"] is True
    assert "quiesced_for_snapshot" in host_operations.of_server(compute.cell_db, sid)

    later = volume_ops.utcnow() + volume_ops.FROZEN_AT_MOST + datetime.timedelta(seconds=1)
    monkeypatch.setattr(volume_ops, "utcnow", lambda: later)
    assert compute.thaw_forgotten_guests() == [sid]
    assert _guest(cloud, sid)["quiesced"] is False
    assert "quiesced_for_snapshot" not in host_operations.of_server(compute.cell_db, sid)
    assert cloud.server(sid)["status"] == "ACTIVE"
    assert compute.thaw_forgotten_guests() == [] and compute._thaw_watch is None


def test_a_compute_service_dying_in_a_build_from_the_image_leaves_no_volume(
        cloud, monkeypatch):
    sid, root = _from_volume(cloud)
    image_id = _create_image(cloud, sid)[1]["image_id"]
    death = host_death.arm_host_deaths(cloud, monkeypatch)

    def boot(at):
        death.arm(at)
        status, body = cloud.api("POST", "/servers", {"server": {
            "name": "from-snap", "flavorRef": "1", "imageRef": image_id,
            "networks": "auto"}})
        assert status == 202, body
        cloud.aio.wait_idle()
        return body["server"]["id"]

    new = boot(None)
    effects = list(death.effects)
    assert "create" in effects, effects
    assert cloud.server(new)["status"] == "ACTIVE"
    for at in [None] + list(range(1, len(effects) + 1)):
        if at is not None:
            new = boot(at)
            assert death.reached.is_set(), at
            host_death._restart(cloud, death, death.host)
            cloud.aio.wait_idle()
            assert cloud.server(new)["status"] in ("ACTIVE", "ERROR"), at
        death.arm(-1)
        assert cloud.api("DELETE", f"/servers/{new}")[0] == 204
        cloud.aio.wait_idle()
        assert [v["id"] for v in cloud.aio.volume_api.list(None)] == [root], \
            (at, effects[at - 1] if at else None)


def test_an_image_keeping_its_mappings_as_json_text_boots_the_same(cloud):
    """Glance keeps ``block_device_mapping`` as JSON text and ``bdm_v2`` as "True"."""
    import json
    sid, root = _from_volume(cloud)
    image = cloud.aio.image_api.get(None, _create_image(cloud, sid)[1]["image_id"])
    props = image["properties"]
    api = cloud.aio.image_api
    text = api.create(None, name="as-text", visibility="public", disk_format="raw",
                      container_format="bare", properties={
                          "block_device_mapping": json.dumps(props["block_device_mapping"]),
                          "bdm_v2": "True", "root_device_name": "/dev/vda"})
    api.upload(None, text["id"], b"")
    status, body = cloud.api("POST", "/servers", {"server": {
        "name": "from-text", "flavorRef": "1", "imageRef": text["id"], "networks": "auto"}})
    assert status == 202, body
    cloud.aio.wait_idle()
    new = body["server"]["id"]
    assert cloud.server(new)["status"] == "ACTIVE", cloud.fault(new)
    [(source, _dest, boot, volume_id, snapshot_id)] = _mappings(cloud, new)
    assert (source, boot, snapshot_id) == (
        "snapshot", 0, props["block_device_mapping"][0]["snapshot_id"])
    assert cloud.aio.volume_api.get(None, volume_id)["attachments"][0]["server_id"] == new
