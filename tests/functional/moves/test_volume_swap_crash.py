"""A compute service dies before any one effect of a volume swap; started again, it
finishes the swap (novella/compute/volume_ops.py).

As tests/functional/moves/test_compute_crash_recovery.py does for the other
operations of a host: a clean run counts the swap's effects (hypervisor,
volume service, Placement, cell database writes); then, for each effect, a
new server swaps a volume the volume service is migrating and its host's
service dies just before that effect. A fresh service on the same databases
and disks starts, and the books must be those of the clean run: the block
device mapping (the volume id it keeps, its device, its attachment live and
attached on the server's host), both volumes (status, migration status,
live attachments), the guest's volumes in domain.json, the server's state,
and no swap left recorded for the server.
"""
import json

import sqlalchemy as sa

from novella.db import cell_models as cm
from novella.db import cells as cells_mod
from novella.db import host_operations
from novella.virt import simulated
from tests.functional.moves import test_compute_crash_recovery as host_death


def _volume(cloud, size=1):
    return cloud.aio.volume_api.create(None, size)["id"]


def _prepare(cloud):
    """A server with ``old`` attached, the volume service moving it to ``new``."""
    status, body = cloud.api("POST", "/servers", {"server": {
        "name": "vm", "flavorRef": "1", "imageRef": cloud.aio.demo_image["id"],
        "networks": "auto"}})
    assert status == 202, body
    sid = body["server"]["id"]
    cloud.aio.wait_idle()
    old, new = _volume(cloud), _volume(cloud)
    status, body = cloud.api("POST", f"/servers/{sid}/os-volume_attachments",
                             {"volumeAttachment": {"volumeId": old}})
    assert status == 200, body
    cloud.aio.wait_idle()
    cloud.aio.volume_api.reset_status(None, old, migration_status="migrating")
    cloud.aio.volume_api.reset_status(None, new, migration_status=f"target:{old}")
    return sid, old, new


def _books(cloud, sid, old, new):
    names = {old: "old", new: "new"}
    server = cloud.server(sid)
    host = server["OS-EXT-SRV-ATTR:host"]
    cell = cells_mod.instance_cell(cloud.aio.api_db, sid)
    cell_db = cells_mod.cell_database(cell)
    with cell_db.read_session() as s:
        bdms = s.scalars(sa.select(cm.BlockDeviceMapping).where(
            cm.BlockDeviceMapping.instance_uuid == sid, cm.BlockDeviceMapping.deleted == 0,
            cm.BlockDeviceMapping.volume_id.is_not(None))).all()
        mappings = [(names.get(b.volume_id), b.device_name, b.attachment_id) for b in bdms]
    api = cloud.aio.volume_api
    attachments = {names[a["volume_id"]]: (a["id"], a["status"], a["attached_host"] == host)
                   for vid in (old, new) for a in api.attachment_list(None, volume_id=vid)}
    mapped = [(volume, device, attachments.get(volume, (None,))[0] == att)
              for volume, device, att in mappings]
    volumes = {}
    for vid in (old, new):
        try:
            v = api.get(None, vid)
            volumes[names[vid]] = (v["status"], v["migration_status"])
        except Exception:  # noqa: BLE001 - the volume service's not found
            volumes[names[vid]] = "gone"
    with open(simulated.driver_for(host)._domain_file(sid)) as f:
        guest = {names.get(k, k): v for k, v in json.load(f)["volumes"].items()}
    return {"server": (server["status"], server["OS-EXT-STS:task_state"]),
            "mappings": mapped, "volumes": volumes,
            "attachments": {k: v[1:] for k, v in attachments.items()}, "guest": guest,
            "noted": host_operations.of_server(cell_db, sid).get("swap_volume")}


def _swap(cloud, death, at):
    for compute in cloud.aio.computes.values():  # a restarted service's too
        if not getattr(compute.swap_volume, "dies", False):
            compute.swap_volume = death.detached(compute.swap_volume)
            compute.swap_volume.dies = True
    death.arm(-1)
    sid, old, new = _prepare(cloud)
    death.arm(at)
    status, body = cloud.api("PUT", f"/servers/{sid}/os-volume_attachments/{old}",
                             {"volumeAttachment": {"volumeId": new}})
    assert status == 202, body
    cloud.aio.wait_idle()
    return sid, old, new


def test_a_compute_service_dying_inside_a_swap_finishes_it_on_restart(cloud, monkeypatch):
    death = host_death.arm_host_deaths(cloud, monkeypatch)
    sid, old, new = _swap(cloud, death, None)
    finished = _books(cloud, sid, old, new)
    effects = list(death.effects)
    assert finished == {
        "server": ("ACTIVE", None), "mappings": [("old", "/dev/vdb", True)],
        "volumes": {"old": ("in-use", "success"), "new": "gone"},
        "attachments": {"old": ("attached", True)}, "guest": {"new": "/dev/vdb"},
        "noted": None}, finished
    assert {"attachment_update", "swap_volume", "attachment_complete", "attachment_delete",
            "migrate_volume_completion", "set_system_metadata"} <= set(effects), effects

    for at in range(1, len(effects) + 1):
        sid, old, new = _swap(cloud, death, at)
        assert death.reached.is_set(), f"never reached effect {at}"
        host_death._restart(cloud, death, death.host)
        cloud.aio.wait_idle()
        where = (at, effects[at - 1])
        assert _books(cloud, sid, old, new) == finished, where
        death.arm(-1)
        assert cloud.api("DELETE", f"/servers/{sid}")[0] == 204, where
        cloud.aio.wait_idle()


def test_a_swap_sends_the_reference_volume_swap_notifications(cloud):
    from novella.rpc.notifier import FakeNotifications
    from tests.conformance import test_notifications as reference
    sid, old, new = _prepare(cloud)
    notes = FakeNotifications(cloud.aio.transport)
    assert cloud.api("PUT", f"/servers/{sid}/os-volume_attachments/{old}",
                     {"volumeAttachment": {"volumeId": new}})[0] == 202
    cloud.aio.wait_idle()
    assert reference._check(notes, sid) == reference._pairs("volume_swap")
    data = [m["payload"]["nova_object.data"] for m in notes.messages
            if m["event_type"].startswith("instance.volume_swap")]
    assert {(d["old_volume_id"], d["new_volume_id"]) for d in data} == {(old, new)}
