"""SR-IOV devices for ports (novella/virt/pci.py, novella/compute/pci.py): which devices a [pci] device_spec
gives ports, and which one a port gets."""
import json

import pytest

from novella.compute import pci
from novella.compute.exceptions import PciDeviceRequestFailed
from novella.virt import pci as virt_pci
from novella.virt.simulated import SimulatedDriver


@pytest.fixture
def devices(tmp_path):
    from novella.conf import CONF
    driver = SimulatedDriver("h1", CONF, instances_path=str(tmp_path))
    driver.sriov_nics, driver.numa_cells = ["ens1:2", "ens2:2"], 2
    return driver.sriov_devices()


def _spec(**spec):
    return virt_pci.parse_device_specs([json.dumps(spec)])


def _tagged(devices, *specs):
    return sorted((d["address"], d["physical_network"])
                  for d in virt_pci.port_devices(devices, [s for ss in specs for s in ss]))


PF1 = ["0000:3b:00.0", "0000:3b:02.0", "0000:3b:02.1"]
PF2 = ["0000:3c:00.0", "0000:3c:02.0", "0000:3c:02.1"]


def test_a_spec_matches_a_pf_and_its_vfs_by_devname_address_or_ids(devices):
    assert _tagged(devices, _spec(devname="ens1", physical_network="p1")) == \
        [(a, "p1") for a in PF1]
    assert _tagged(devices, _spec(address="0000:3c:*", physical_network="p2")) == \
        [(a, "p2") for a in PF2]
    assert _tagged(devices, _spec(parent_ifname="ens2", physical_network="p2")) == \
        [(a, "p2") for a in PF2[1:]]
    assert _tagged(devices, _spec(vendor_id="8086", product_id="154c",
                                  physical_network="p")) == [(a, "p") for a in PF1[1:] + PF2[1:]]
    # No physical network: not for ports; the first spec that matches decides.
    assert _tagged(devices, _spec(devname="ens1")) == []
    assert _tagged(devices, _spec(devname="ens1", physical_network="a"),
                   _spec(vendor_id="8086", physical_network="b")) == \
        [(a, "a") for a in PF1] + [(a, "b") for a in PF2]


def _port(pid, vnic="direct", physnet="p"):
    return {"port_id": pid, "vnic_type": vnic, "physical_network": physnet}


def test_a_port_takes_a_vf_of_its_pf_and_a_direct_physical_port_a_whole_pf(devices):
    tagged = virt_pci.port_devices(devices, _spec(vendor_id="8086", physical_network="p"))
    [vf] = pci.pick(tagged, set(), [_port("a")], {"a": "ens2"},
                    port_profiles={"a": {"allocation": {"g": "rp2"}}})
    assert (vf["address"], vf["port_id"], vf["parent_ifname"]) == ("0000:3c:02.0", "a", "ens2")
    assert pci.binding_profile(vf) == {"pci_slot": "0000:3c:02.0", "physical_network": "p",
                                       "pci_vendor_info": "8086:154c",
                                       "allocation": {"g": "rp2"}}
    # Without a PF named, the lowest free VF; a PF with a VF given out is not whole.
    got = pci.pick(tagged, {"0000:3b:02.0"}, [_port("b"), _port("c", "direct-physical")], {})
    assert [d["address"] for d in got] == ["0000:3b:02.1", "0000:3c:00.0"]
    # A PF given out has no VF to give; its own physnet only.
    # A server on NUMA cell 1 (the simulated NICs alternate cells: ens2 is on 1).
    [vf] = pci.pick(tagged, set(), [_port("n")], {}, {"cells": [{"host_cell": 1}]})
    assert vf["address"] == "0000:3c:02.0"
    with pytest.raises(PciDeviceRequestFailed, match="no free VF of PF ens2"):
        pci.pick(tagged, {"0000:3c:00.0"}, [_port("d")], {"d": "ens2"})
    with pytest.raises(PciDeviceRequestFailed, match="physical network q"):
        pci.pick(tagged, set(), [_port("e", physnet="q")], {})


def test_profiles_name_the_pf_of_the_allocation_and_take_the_device():
    node = "7b1c3f1e-0a65-4a3a-9d4e-000000000001"
    rp = virt_pci.provider_uuid(node, virt_pci.provider_name("h1", "ens2"))
    assert pci.pf_of_ports({"a": {"allocation": {"g": rp}}, "b": {"allocation": {"g": "x"}}},
                           {rp: "ens2"}) == {"a": "ens2"}
    merged = pci.with_devices({"a": {"allocation": {"g": rp}}}, [
        {"port_id": "a", "address": "0000:3c:02.0", "physical_network": "p",
         "vendor_id": "8086", "product_id": "154c"}, {"address": "0000:81:00.0"}])
    assert merged == {"a": {"allocation": {"g": rp}, "pci_slot": "0000:3c:02.0",
                            "physical_network": "p", "pci_vendor_info": "8086:154c"}}


def test_a_bad_device_spec_is_named_in_the_error():
    with pytest.raises(ValueError, match=r"\[pci\] device_spec '\{devname' is not JSON"):
        virt_pci.parse_device_specs(["{devname"])
    with pytest.raises(ValueError, match="a spec is a JSON object"):
        virt_pci.parse_device_specs(['["ens1"]'])
