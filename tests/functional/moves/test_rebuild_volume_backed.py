"""Rebuild of a volume-backed server: with its volume's image at any microversion, with
another image from 2.93 (the image written onto the root volume); and a compute
service dying before any effect of the 2.93 rebuild, which it finishes when it
starts again. Asserted on the root volume (image, status, attachments), its block
device mapping, the server's state and image, and the simulated guest."""
import sqlalchemy as sa

from novella.db import cell_models as cm
from novella.db import cells as cells_mod
from novella.db import host_operations
from tests.functional.moves import test_compute_crash_recovery as host_death


def _image(cloud, name="other"):
    api = cloud.aio.image_api
    image = api.create(None, name=name, visibility="public", disk_format="qcow2",
                       container_format="bare")
    api.upload(None, image["id"], b"another image\n" * 16)
    return image["id"]


def _rebuild(cloud, sid, image_id, version="2.93"):
    return cloud.action(sid, {"rebuild": {"imageRef": image_id, "name": "rebuilt"}},
                        version=version)


def _books(cloud, sid, root):
    server = cloud.server(sid)
    host = server["OS-EXT-SRV-ATTR:host"]
    cell_db = cells_mod.cell_database(cells_mod.instance_cell(cloud.aio.api_db, sid))
    with cell_db.read_session() as s:
        [bdm] = s.scalars(sa.select(cm.BlockDeviceMapping).where(
            cm.BlockDeviceMapping.instance_uuid == sid, cm.BlockDeviceMapping.deleted == 0,
            cm.BlockDeviceMapping.volume_id.is_not(None))).all()
        bdm = (bdm.volume_id == root, bdm.boot_index, bdm.attachment_id)
    volume = cloud.aio.volume_api.get(None, root)
    attachments = cloud.aio.volume_api.attachment_list(None, volume_id=root)
    guest = cloud.aio.computes[host].driver._load(sid)
    return {"server": (server["status"], server["OS-EXT-STS:task_state"], server["image"],
                       server["name"]),
            "mapping": bdm[:2] + (bdm[2] == (attachments[0]["id"] if attachments else None),),
            "volume": (volume["status"], volume["volume_image_metadata"]["image_id"]),
            "attachments": [(a["status"], a["attached_host"] == host) for a in attachments],
            "guest": (guest["power_state"], list(guest["volumes"]) == [root]),
            "noted": host_operations.of_server(cell_db, sid).get("rebuild_reimage_root")}


def test_rebuild_of_a_volume_backed_server(cloud):
    sid, root = cloud.boot_from_volume()
    other = _image(cloud)
    before = _books(cloud, sid, root)
    # Another image before 2.93: 400, nothing changes.
    status, body = _rebuild(cloud, sid, other, version="2.92")
    assert status == 400 and "volume-backed" in body["badRequest"]["message"]
    cloud.aio.wait_idle()
    assert _books(cloud, sid, root) == before

    # The volume's own image: the root volume is kept as it is.
    assert _rebuild(cloud, sid, cloud.aio.demo_image["id"], version="2.92")[0] == 202
    cloud.aio.wait_idle()
    assert _books(cloud, sid, root) == dict(before, server=("ACTIVE", None, "", "rebuilt"))

    # 2.93: the other image written onto the root volume, re-attached here.
    attachment = cloud.aio.volume_api.attachment_list(None, volume_id=root)[0]["id"]
    status, body = _rebuild(cloud, sid, other)
    assert status == 202, body
    assert body["server"]["image"] == ""
    cloud.aio.wait_idle()
    after = _books(cloud, sid, root)
    assert after == {"server": ("ACTIVE", None, "", "rebuilt"), "mapping": (True, 0, True),
                     "volume": ("in-use", other), "attachments": [("attached", True)],
                     "guest": (1, True), "noted": None}, after
    assert cloud.aio.volume_api.attachment_list(None, volume_id=root)[0]["id"] != attachment
    assert cloud.events(sid, "rebuild") == {"compute_rebuild_instance": "Success"}


def test_a_compute_service_dying_inside_a_2_93_rebuild_finishes_it(cloud, monkeypatch):
    death = host_death.arm_host_deaths(cloud, monkeypatch)
    other = _image(cloud)

    def run(at):
        death.arm(-1)
        sid, root = cloud.boot_from_volume()
        death.arm(at)
        assert _rebuild(cloud, sid, other)[0] == 202
        cloud.aio.wait_idle()
        return sid, root

    sid, root = run(None)
    finished = _books(cloud, sid, root)
    effects = list(death.effects)
    assert finished["volume"] == ("in-use", other) and finished["noted"] is None, finished
    assert {"attachment_create", "attachment_delete", "reimage", "attachment_update",
            "attachment_complete", "rebuild"} <= set(effects), effects

    for at in range(1, len(effects) + 1):
        death.arm(-1)
        assert cloud.api("DELETE", f"/servers/{sid}")[0] == 204
        cloud.aio.wait_idle()
        sid, root = run(at)
        assert death.reached.is_set(), f"never reached effect {at}"
        host_death._restart(cloud, death, death.host)
        cloud.aio.wait_idle()
        assert _books(cloud, sid, root) == finished, (at, effects[at - 1])
