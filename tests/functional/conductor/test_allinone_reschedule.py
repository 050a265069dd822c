"""Reschedule through the real compute service: a spawn fault injected in the
simulated driver makes the host give up, and the conductor moves on."""
import pytest
import sqlalchemy as sa
import webob

from novella.allinone import AllInOne
from novella.db import cell_models as cm
from novella.db import cells
from novella.virt import simulated


@pytest.fixture
def aio(tmp_path):
    aio = AllInOne(str(tmp_path / "data"), cells=1, hosts_per_cell=2, log=None).start()
    yield aio
    aio.stop()
    simulated.clear_faults()


def _boot(aio):
    req = webob.Request.blank("/v2.1/servers", method="POST")
    req.headers["X-Auth-Token"] = "admin:admin"
    req.headers["OpenStack-API-Version"] = "compute 2.79"
    req.json_body = {"server": {"name": "vm", "flavorRef": "1",
                                "imageRef": aio.demo_image["id"], "networks": "none"}}
    resp = req.get_response(aio.compute_api_app)
    assert resp.status_int == 202, resp.body
    aio.wait_idle()
    return resp.json_body["server"]["id"]


def _instance(aio, server_id):
    cell = cells.instance_cell(aio.api_db, server_id)
    with cells.cell_database(cell).session() as s:
        inst = s.scalars(sa.select(cm.Instance).where(cm.Instance.uuid == server_id)).one()
        faults = s.scalars(sa.select(cm.InstanceFault)
                           .where(cm.InstanceFault.instance_uuid == server_id)).all()
        return cell.name, inst, [f.message for f in faults]


def _used(aio, host):
    """MEMORY_MB used on the host's provider (named after its node)."""
    (rp,) = aio.placement.list_resource_providers(name=host)
    return aio.placement.get_provider_usages(rp["uuid"])[1]["MEMORY_MB"]


def test_spawn_failure_reschedules_to_the_alternate(aio):
    first = _boot(aio)
    _, inst, _ = _instance(aio, first)
    busy = inst.host
    (idle,) = [h for h in aio.computes if h != busy]   # more free RAM: tried first
    simulated.inject_fault(idle, "spawn")
    second = _boot(aio)
    cell, inst, faults = _instance(aio, second)
    assert (cell, inst.vm_state, inst.host) == ("cell1", "active", busy)
    assert simulated.pending_faults(idle) == []          # it was tried
    (rp, alloc), = aio.placement.get_allocations(second)["allocations"].items()
    assert _used(aio, idle) == 0 and _used(aio, busy) == 2 * alloc["resources"]["MEMORY_MB"]


def test_every_host_failing_ends_in_error_with_nothing_held(aio):
    for host in aio.computes:
        simulated.inject_fault(host, "spawn")
    server = _boot(aio)
    cell, inst, faults = _instance(aio, server)
    assert (cell, inst.vm_state, inst.host) == ("cell1", "error", None)
    assert any("Exceeded maximum number of retries" in m for m in faults)
    assert aio.placement.get_allocations(server)["allocations"] == {}
    assert all(_used(aio, h) == 0 for h in aio.computes)
