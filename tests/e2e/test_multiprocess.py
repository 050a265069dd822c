"""Separate processes over RabbitMQ and PostgreSQL, two cells.

Every service runs as its own `novella serve ...` process: placement, the
Compute API, the image, network and volume APIs, the conductor, the scheduler
and one compute host per cell. Each cell has its own PostgreSQL database and
its own RabbitMQ virtual host, as its cell mapping says. Servers are booted
into both cells, listed, stopped, started and deleted; placement usages must
come back to zero. A server booted on a port made through the network API
and given a volume made through the volume API shows in those APIs.
"""
import pytest
import requests
import sqlalchemy as sa

from novella.context import get_admin_context
from novella.db import cell_models as cm
from novella.db import cells as cells_mod
from tests.e2e import processes
from tests.e2e.processes import ADMIN, EMBEDDED, TOKEN

pytestmark = [pytest.mark.postgresql, pytest.mark.rabbitmq]

_wait = processes.wait
_usages = processes.usages
_status = processes.status
_seed = processes.seed
_allocations = processes.allocations


@pytest.fixture
def deployment(tmp_path):
    with processes.deployment(tmp_path) as d:
        yield d


def test_servers_in_two_cells_across_processes(deployment):
    api, db = deployment["api"], deployment["db"]
    image, _image_api = _seed(deployment)

    ids = []
    # Two servers are pinned to a host of each cell (2.74 host), two go where
    # the scheduler sends them.
    for i, host in enumerate(("cell1-host", "cell2-host", None, None)):
        server = {"name": f"vm{i}", "flavorRef": "small", "imageRef": image["id"],
                  "networks": "auto"}
        if host:
            server["host"] = host
        r = requests.post(f"{api}/servers", json={"server": server},
                          headers=dict(ADMIN, **{"OpenStack-API-Version": "compute 2.74"}))
        assert r.status_code == 202, r.text
        ids.append(r.json()["server"]["id"])
    for sid in ids:
        _wait(f"{sid} ACTIVE", lambda sid=sid: _status(api, sid) == "ACTIVE")

    # Both cells hold servers, and each server's row is in the cell its mapping names.
    api_db = cells_mod.database(db["api"])
    by_cell = {}
    for sid in ids:
        cell = cells_mod.instance_cell(api_db, sid)
        by_cell.setdefault(cell.name, []).append(sid)
        with cells_mod.database(db[cell.name]).session() as s:
            assert s.scalars(sa.select(cm.Instance.host).where(cm.Instance.uuid == sid)).one() \
                in (f"{cell.name}-host", f"{cell.name}-host2")
    assert set(by_cell) == {"cell1", "cell2"}
    usages = _usages(deployment["placement"])
    assert sum(u["MEMORY_MB"] for u in usages.values()) == 4 * 512

    listed = requests.get(f"{api}/servers/detail", headers=ADMIN).json()["servers"]
    assert sorted(s["id"] for s in listed) == sorted(ids)

    for action, status in (("os-stop", "SHUTOFF"), ("os-start", "ACTIVE")):
        for sid in ids:
            r = requests.post(f"{api}/servers/{sid}/action", headers=ADMIN, json={action: None})
            assert r.status_code == 202, r.text
        for sid in ids:
            _wait(f"{sid} {status}", lambda sid=sid: _status(api, sid) == status)

    for sid in ids:
        assert requests.delete(f"{api}/servers/{sid}", headers=ADMIN).status_code == 204
    for sid in ids:
        _wait(f"{sid} gone", lambda sid=sid: _status(api, sid) == 404)
    _wait("usages back to zero", lambda: all(
        v == 0 for u in _usages(deployment["placement"]).values() for v in u.values()))


def test_cross_cell_resize_and_revert_across_processes(deployment):
    """One resize from cell1 to cell2 and its revert, every service in its own process."""
    api, db, placement = deployment["api"], deployment["db"], deployment["placement"]
    image, image_api = _seed(deployment)
    r = requests.post(f"{api}/servers", json={"server": {
        "name": "mover", "flavorRef": "small", "imageRef": image["id"], "networks": "auto",
        "host": "cell1-host"}}, headers=dict(ADMIN, **{"OpenStack-API-Version": "compute 2.74"}))
    assert r.status_code == 202, r.text
    sid = r.json()["server"]["id"]
    _wait("ACTIVE", lambda: _status(api, sid) == "ACTIVE")
    api_db = cells_mod.database(db["api"])
    assert cells_mod.instance_cell(api_db, sid).name == "cell1"
    (source_rp, source_alloc), = _allocations(placement, sid).items()

    r = requests.post(f"{api}/servers/{sid}/action", headers=ADMIN,
                      json={"resize": {"flavorRef": "medium"}})
    assert r.status_code == 202, r.text
    _wait("VERIFY_RESIZE", lambda: _status(api, sid) == "VERIFY_RESIZE", timeout=120)

    # The mapping follows the server to cell2; cell1 keeps a hidden copy; the
    # migration owns the source allocation and the instance the destination's.
    assert cells_mod.instance_cell(api_db, sid).name == "cell2"
    rows = {}
    for cell in ("cell1", "cell2"):
        with cells_mod.database(db[cell]).session() as s:
            rows[cell] = s.execute(sa.select(cm.Instance.hidden, cm.Instance.host).where(
                cm.Instance.uuid == sid, cm.Instance.deleted == 0)).one()
    assert rows == {"cell1": (True, "cell1-host"), "cell2": (False, "cell2-host")}
    with cells_mod.database(db["cell2"]).session() as s:
        migration = s.scalars(sa.select(cm.Migration).where(
            cm.Migration.instance_uuid == sid)).one()
    assert migration.cross_cell_move and migration.status == "finished"
    assert _allocations(placement, migration.uuid) == {source_rp: source_alloc}
    (dest_rp, dest_alloc), = _allocations(placement, sid).items()
    assert dest_rp != source_rp and dest_alloc["MEMORY_MB"] == 1024
    ctxt = get_admin_context()
    assert [i for i in image_api.list(ctxt) if i["id"] != image["id"]] == []  # snapshot gone

    r = requests.post(f"{api}/servers/{sid}/action", headers=ADMIN, json={"revertResize": None})
    assert r.status_code == 202, r.text
    _wait("ACTIVE again", lambda: _status(api, sid) == "ACTIVE", timeout=120)
    assert cells_mod.instance_cell(api_db, sid).name == "cell1"
    with cells_mod.database(db["cell2"]).session() as s:
        assert s.scalars(sa.select(cm.Instance).where(cm.Instance.uuid == sid)).all() == []
    with cells_mod.database(db["cell1"]).session() as s:
        inst = s.scalars(sa.select(cm.Instance).where(cm.Instance.uuid == sid)).one()
    assert (inst.hidden, inst.host, inst.memory_mb) == (False, "cell1-host", 512)
    _wait("source allocation handed back", lambda: _allocations(placement, sid) == {
        source_rp: source_alloc} and _allocations(placement, migration.uuid) == {})

    assert requests.delete(f"{api}/servers/{sid}", headers=ADMIN).status_code == 204
    _wait("gone", lambda: _status(api, sid) == 404)
    _wait("usages back to zero", lambda: all(
        v == 0 for u in _usages(placement).values() for v in u.values()))


def test_live_migration_and_shelve_across_processes(deployment):
    """Inside cell1, between two compute processes: live-migrate, then shelve and unshelve."""
    api, placement = deployment["api"], deployment["placement"]
    image, _image_api = _seed(deployment)
    r = requests.post(f"{api}/servers", json={"server": {
        "name": "runner", "flavorRef": "small", "imageRef": image["id"], "networks": "auto",
        "host": "cell1-host"}}, headers=dict(ADMIN, **{"OpenStack-API-Version": "compute 2.74"}))
    assert r.status_code == 202, r.text
    sid = r.json()["server"]["id"]
    _wait("ACTIVE", lambda: _status(api, sid) == "ACTIVE")
    (source_rp, alloc), = _allocations(placement, sid).items()

    def host():
        return requests.get(f"{api}/servers/{sid}", headers=ADMIN).json()["server"][
            "OS-EXT-SRV-ATTR:host"]

    r = requests.post(f"{api}/servers/{sid}/action", headers=ADMIN,
                      json={"os-migrateLive": {"host": None, "block_migration": "auto"}})
    assert r.status_code == 202, r.text
    _wait("on cell1-host2", lambda: _status(api, sid) == "ACTIVE" and host() == "cell1-host2",
          timeout=120)
    (dest_rp, dest_alloc), = _allocations(placement, sid).items()
    assert dest_rp != source_rp and dest_alloc == alloc
    migrations = requests.get(f"{api}/os-migrations?instance_uuid={sid}", headers=dict(
        ADMIN, **{"OpenStack-API-Version": "compute 2.59"})).json()["migrations"]
    assert [(m["migration_type"], m["status"]) for m in migrations] == [
        ("live-migration", "completed")]
    assert _allocations(placement, migrations[0]["uuid"]) == {}

    r = requests.post(f"{api}/servers/{sid}/action", headers=ADMIN, json={"shelve": None})
    assert r.status_code == 202, r.text
    _wait("SHELVED_OFFLOADED", lambda: _status(api, sid) == "SHELVED_OFFLOADED", timeout=120)
    assert _allocations(placement, sid) == {}
    r = requests.post(f"{api}/servers/{sid}/action", headers=ADMIN, json={"unshelve": None})
    assert r.status_code == 202, r.text
    _wait("ACTIVE again", lambda: _status(api, sid) == "ACTIVE", timeout=120)
    assert host().startswith("cell1-")                        # unshelved in its cell
    (_rp, back), = _allocations(placement, sid).items()
    assert back == alloc

    assert requests.delete(f"{api}/servers/{sid}", headers=ADMIN).status_code == 204
    _wait("gone", lambda: _status(api, sid) == 404)
    _wait("usages back to zero", lambda: all(
        v == 0 for u in _usages(placement).values() for v in u.values()))


def test_image_network_and_volume_apis_in_processes_of_their_own(deployment):
    """`novella serve image|network|volume`: each API shows what the test, the other
    API processes and the compute services wrote to the shared tables."""
    api, images, networks, volumes = (deployment[k] for k in ("api", *EMBEDDED))
    image, _image_api = _seed(deployment)

    listed = requests.get(f"{images}/v2/images", headers=TOKEN).json()["images"]
    assert [(i["id"], i["name"], i["status"], i["size"]) for i in listed] == [
        (image["id"], "cirros", "active", len(b"image bytes\n" * 32))]
    (net,) = requests.get(f"{networks}/v2.0/networks", headers=TOKEN).json()["networks"]
    assert (net["name"], net["shared"], len(net["subnets"])) == ("private", True, 1)

    r = requests.post(f"{networks}/v2.0/ports", headers=TOKEN,
                      json={"port": {"network_id": net["id"], "name": "p1"}})
    assert r.status_code == 201, r.text
    port = r.json()["port"]
    assert (port["device_id"], port["fixed_ips"][0]["subnet_id"]) == ("", net["subnets"][0])
    r = requests.post(f"{volumes}/v3/admin/volumes", headers=TOKEN, json={"volume": {
        "size": 1, "name": "data", "imageRef": image["id"]}})
    assert r.status_code == 202, r.text
    vid = r.json()["volume"]["id"]

    def port_state():
        p = requests.get(f"{networks}/v2.0/ports/{port['id']}", headers=TOKEN).json()["port"]
        return p["device_id"], p["binding:host_id"], p["fixed_ips"]

    def volume():
        return requests.get(f"{volumes}/v3/admin/volumes/{vid}", headers=TOKEN).json()["volume"]

    def volume_state():
        v = volume()
        return v["status"], [a["server_id"] for a in v["attachments"]]

    made = volume()
    assert (made["status"], made["bootable"], made["volume_image_metadata"]["image_id"]) \
        == ("available", "true", image["id"])

    r = requests.post(f"{api}/servers", headers=ADMIN, json={"server": {
        "name": "vm", "flavorRef": "small", "imageRef": image["id"],
        "networks": [{"port": port["id"]}]}})
    assert r.status_code == 202, r.text
    sid = r.json()["server"]["id"]
    _wait("ACTIVE", lambda: _status(api, sid) == "ACTIVE")
    host = requests.get(f"{api}/servers/{sid}", headers=ADMIN).json()["server"][
        "OS-EXT-SRV-ATTR:host"]
    assert port_state() == (sid, host, port["fixed_ips"])
    r = requests.post(f"{api}/servers/{sid}/os-volume_attachments", headers=ADMIN,
                      json={"volumeAttachment": {"volumeId": vid}})
    assert r.status_code == 200, r.text
    _wait("volume in-use", lambda: volume_state() == ("in-use", [sid]))

    # Deleting the server releases the port it was given and detaches the volume.
    assert requests.delete(f"{api}/servers/{sid}", headers=ADMIN).status_code == 204
    _wait("gone", lambda: _status(api, sid) == 404)
    _wait("port released", lambda: port_state() == ("", "", port["fixed_ips"]))
    _wait("volume available", lambda: volume_state() == ("available", []))
