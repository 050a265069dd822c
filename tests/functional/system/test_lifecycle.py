"""Boot, list, power actions and delete through the whole system."""
import sqlalchemy as sa

from novella.db import api_models as am
from novella.db import cell_models as cm
from novella.db import cells


def _zero(usages):
    return all(v == 0 for u in usages.values() for v in u.values())


def test_boot_list_stop_start_delete_books_exact(cloud):
    ids = [cloud.boot(name=f"vm{i}", flavor="2") for i in range(3)]
    aio = cloud.aio
    flavor_ram = 2048
    for sid in ids:
        srv = cloud.server(sid)
        assert srv["status"] == "ACTIVE"
        host = srv["OS-EXT-SRV-ATTR:host"]
        alloc = cloud.allocations(sid)
        (rp_uuid, rp_alloc), = alloc.items()
        assert rp_alloc["resources"] == {"VCPU": 1, "MEMORY_MB": flavor_ram, "DISK_GB": 20}
        # The instance mapping points at the cell holding the row, and that
        # cell's compute host is the one shown.
        cell = cells.instance_cell(aio.api_db, sid)
        with cells.cell_database(cell).session() as s:
            inst = s.scalars(sa.select(cm.Instance).where(cm.Instance.uuid == sid)).one()
        assert inst.host == host and inst.vm_state == "active"
        assert host.startswith(cell.name)
    usages = cloud.usages()
    assert sum(u["MEMORY_MB"] for u in usages.values()) == 3 * flavor_ram
    # No build request is left once the servers are in their cells.
    with aio.api_db.session() as s:
        assert s.scalars(sa.select(am.BuildRequest)).all() == []

    status, body = cloud.api("GET", "/servers/detail")
    assert status == 200 and sorted(s["id"] for s in body["servers"]) == sorted(ids)

    assert cloud.api("POST", f"/servers/{ids[0]}/action", {"os-stop": None})[0] == 202
    aio.wait_idle()
    assert cloud.server(ids[0])["status"] == "SHUTOFF"
    assert cloud.api("POST", f"/servers/{ids[0]}/action", {"os-start": None})[0] == 202
    aio.wait_idle()
    assert cloud.server(ids[0])["status"] == "ACTIVE"

    for sid in ids:
        assert cloud.api("DELETE", f"/servers/{sid}")[0] == 204
    aio.wait_idle()
    assert _zero(cloud.usages())
    for sid in ids:
        assert cloud.allocations(sid) == {}
        assert cloud.api("GET", f"/servers/{sid}")[0] == 404


def test_unschedulable_server_lands_in_cell0_with_fault(cloud):
    # A flavor no host can hold: it ends in cell0, ERROR, with a fault, no allocation.
    status, _ = cloud.api("POST", "/flavors", {"flavor": {
        "name": "huge", "ram": 10 ** 7, "vcpus": 1, "disk": 1, "id": "huge"}})
    assert status == 200
    # (within the project's quota, which the default would refuse before scheduling)
    probe = cloud.boot(name="probe")
    project = cloud.server(probe)["tenant_id"]
    assert cloud.api("DELETE", f"/servers/{probe}")[0] == 204
    cloud.aio.wait_idle()
    status, _ = cloud.api("PUT", f"/os-quota-sets/{project}", {"quota_set": {"ram": -1}})
    assert status == 200
    sid = cloud.boot(name="too-big", flavor="huge")
    srv = cloud.server(sid)
    assert srv["status"] == "ERROR"
    assert "fault" in srv and srv["fault"]["code"] in (400, 500)
    cell = cells.instance_cell(cloud.aio.api_db, sid)
    assert cell.uuid == cells.CELL0_UUID
    assert cloud.allocations(sid) == {}
    assert _zero(cloud.usages())


def test_state_survives_restart(tmp_path):
    from novella.allinone import AllInOne
    from tests.functional.system.conftest import Cloud
    data = str(tmp_path / "data")
    first = Cloud(AllInOne(data, log=None).start())
    sid = first.boot(name="keeper")
    host = first.server(sid)["OS-EXT-SRV-ATTR:host"]
    first.aio.stop()
    second = Cloud(AllInOne(data, log=None).start())
    try:
        srv = second.server(sid)
        assert srv["status"] == "ACTIVE" and srv["OS-EXT-SRV-ATTR:host"] == host
        assert sum(u["VCPU"] for u in second.usages().values()) == 1
        assert len(second.aio.placement.list_resource_providers()) == 4
    finally:
        second.aio.stop()
