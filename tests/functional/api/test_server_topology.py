"""GET /servers/{id}/topology (2.78): a simulated guest's NUMA cells as its host claimed them."""
import json

import pytest
import sqlalchemy as sa

from novella.db import cell_models as cm, cells

from tests.functional.moves.conftest import make_cloud  # noqa: F401 - the fixture


@pytest.fixture
def cloud(make_cloud):  # noqa: F811
    return make_cloud(hosts=1, simulated={"numa_cells": 2})


def _claimed(cloud, sid):
    cell = cells.instance_cell(cloud.aio.api_db, sid)
    with cells.cell_database(cell).session() as s:
        return json.loads(s.scalars(sa.select(cm.InstanceExtra.numa_topology).where(
            cm.InstanceExtra.instance_uuid == sid)).one())


def test_topology_of_a_pinned_guest_on_two_cells(cloud):
    cloud.flavor("numa", vcpus=4, ram=1024, disk=1)
    status, body = cloud.api("POST", "/flavors/numa/os-extra_specs", {"extra_specs": {
        "hw:numa_nodes": "2", "hw:cpu_policy": "dedicated"}})
    assert status == 200, body
    sid = cloud.boot(flavor="numa", token="alice:project-a")
    assert cloud.server(sid)["status"] == "ACTIVE", cloud.fault(sid)
    claimed = _claimed(cloud, sid)
    pins = [c["cpu_pinning"] for c in claimed["cells"]]
    assert all(len(p) == 2 for p in pins)

    status, body = cloud.api("GET", f"/servers/{sid}/topology", version="2.78")
    assert status == 200, body
    assert body == {"pagesize_kb": None, "nodes": [
        {"vcpu_set": [0, 1], "siblings": [], "memory_mb": 512,
         "host_node": claimed["cells"][0]["host_cell"],
         "cpu_pinning": {"0": pins[0][0], "1": pins[0][1]}},
        {"vcpu_set": [2, 3], "siblings": [], "memory_mb": 512,
         "host_node": claimed["cells"][1]["host_cell"],
         "cpu_pinning": {"2": pins[1][0], "3": pins[1][1]}}]}
    assert {n["host_node"] for n in body["nodes"]} == {0, 1}

    # The owner (not allowed to see hosts) gets the guest's side only.
    status, body = cloud.api("GET", f"/servers/{sid}/topology", token="alice:project-a",
                             version="2.78")
    assert status == 200 and body["nodes"] == [
        {"vcpu_set": [0, 1], "siblings": [], "memory_mb": 512},
        {"vcpu_set": [2, 3], "siblings": [], "memory_mb": 512}]
    # Another project's server is not found; before 2.78 the route is not there.
    status, body = cloud.api("GET", f"/servers/{sid}/topology", token="bob:project-b",
                             version="2.78")
    assert status == 404 and body["itemNotFound"]["code"] == 404
    status, body = cloud.api("GET", f"/servers/{sid}/topology", version="2.77")
    assert status == 404 and body["itemNotFound"]["code"] == 404
    status, body = cloud.api("GET", f"/servers/{sid}/topology?x=1", version="2.102")
    assert status == 400 and body["badRequest"]["code"] == 400


def test_topology_of_a_guest_without_numa_cells(cloud):
    sid = cloud.boot()
    status, body = cloud.api("GET", f"/servers/{sid}/topology", version="2.78")
    assert status == 200 and body == {"nodes": [], "pagesize_kb": None}
    status, body = cloud.api("GET", "/servers/00000000-0000-0000-0000-000000000000/topology",
                             version="2.78")
    assert status == 404 and body["itemNotFound"]["code"] == 404
