import pytest

from novella.compute import claims
from novella.compute.exceptions import ComputeResourcesUnavailable, PciDeviceRequestFailed

HOST = {"cells": [{"id": 0, "cpus": [0, 2, 4, 6], "memory_mb": 2048},
                  {"id": 1, "cpus": [1, 3, 5, 7], "memory_mb": 2048}]}
DEVICES = [{"address": f"0000:81:00.{i}", "vendor_id": "8086", "product_id": "1520",
            "dev_type": "type-PCI", "numa_node": i % 2} for i in range(3)]
ALIASES = claims.parse_aliases(['{"name": "nic", "vendor_id": "8086", "product_id": "1520"}'])


def _flavor(vcpus=2, memory_mb=1024, **specs):
    return {"vcpus": vcpus, "memory_mb": memory_mb, "extra_specs": specs}


def test_no_numa_request_without_extra_specs():
    assert claims.numa_request(_flavor()) is None
    assert claims.fit_numa(HOST, claims.empty_usage(HOST), None) is None


def test_numa_split_over_cells():
    req = claims.numa_request(_flavor(vcpus=3, memory_mb=1025, **{"hw:numa_nodes": "2"}))
    assert [(c["vcpus"], c["memory_mb"]) for c in req["cells"]] == [(2, 512), (1, 513)]
    topo = claims.fit_numa(HOST, claims.empty_usage(HOST), req)
    assert [c["host_cell"] for c in topo["cells"]] == [0, 1]


def test_dedicated_pins_distinct_cpus_until_full():
    usage = claims.empty_usage(HOST)
    req = claims.numa_request(_flavor(vcpus=4, memory_mb=256, **{"hw:cpu_policy": "dedicated"}))
    first = claims.fit_numa(HOST, usage, req)
    claims.add_usage(usage, first)
    second = claims.fit_numa(HOST, usage, req)
    claims.add_usage(usage, second)
    assert first["cells"][0]["cpu_pinning"] == [0, 2, 4, 6]
    assert second["cells"][0]["cpu_pinning"] == [1, 3, 5, 7]
    with pytest.raises(ComputeResourcesUnavailable):
        claims.fit_numa(HOST, usage, req)
    claims.add_usage(usage, first, sign=-1)
    assert claims.fit_numa(HOST, usage, req)["cells"][0]["host_cell"] == 0


def test_numa_memory_is_not_overcommitted():
    usage = claims.empty_usage(HOST)
    req = claims.numa_request(_flavor(vcpus=1, memory_mb=2048, **{"hw:numa_nodes": "1"}))
    for _ in range(2):
        claims.add_usage(usage, claims.fit_numa(HOST, usage, req))
    with pytest.raises(ComputeResourcesUnavailable):
        claims.fit_numa(HOST, usage, req)


def test_shared_vcpus_use_the_allocation_ratio():
    usage = claims.empty_usage(HOST)
    req = claims.numa_request(_flavor(vcpus=8, memory_mb=64, **{"hw:numa_nodes": "1"}))
    with pytest.raises(ComputeResourcesUnavailable):
        claims.fit_numa(HOST, usage, req, cpu_allocation_ratio=1.0)
    assert claims.fit_numa(HOST, usage, req, cpu_allocation_ratio=2.0) is not None


def test_pci_pick_prefers_the_instance_numa_cell_and_runs_out():
    reqs = claims.pci_requests(_flavor(**{"pci_passthrough:alias": "nic:1"}), ALIASES)
    topo = {"cells": [{"host_cell": 1}]}
    [dev] = claims.pick_pci(DEVICES, set(), reqs, topo)
    assert dev["numa_node"] == 1 and dev["alias_name"] == "nic"
    two = claims.pci_requests(_flavor(**{"pci_passthrough:alias": "nic:2"}), ALIASES)
    with pytest.raises(PciDeviceRequestFailed):
        claims.pick_pci(DEVICES, {DEVICES[0]["address"], DEVICES[1]["address"]}, two)
    pools = claims.pci_pools(DEVICES, {DEVICES[0]["address"]})
    assert [(p["numa_node"], p["count"], p["free"]) for p in pools] == [(0, 2, 1), (1, 1, 1)]


def test_unknown_alias_is_refused():
    with pytest.raises(PciDeviceRequestFailed):
        claims.pci_requests(_flavor(**{"pci_passthrough:alias": "gpu:1"}), ALIASES)
