"""Which provider each port's request group was given: ``scheduler.utils.port_profiles``."""
import pytest

from novella.scheduler.utils import port_profiles

EGR = "NET_BW_EGR_KILOBIT_PER_SEC"
PPS = "NET_PACKET_RATE_KILOPACKET_PER_SEC"


def _group(port, suffix, resources, traits=()):
    return {"requester_id": port, "suffix": suffix, "resources": resources,
            "required_traits": list(traits)}


GROUPS = [_group("p1", "g-bw", {EGR: 10}, ["CUSTOM_PHYSNET_A"]),
          _group("p1", "g-pps", {PPS: 5}),
          _group("p2", "g2-bw", {EGR: 20}, ["CUSTOM_PHYSNET_B"]),
          {"suffix": "1", "resources": {"VCPU": 1}}]   # a flavor's group: no port


def test_placement_mappings_name_the_providers():
    mappings = {"": ["node"], "g-bw": ["bw-a"], "g-pps": ["agent"], "g2-bw": ["bw-b"]}
    assert port_profiles(GROUPS, mappings=mappings) == {
        "p1": {"allocation": {"g-bw": "bw-a", "g-pps": "agent"}},
        "p2": {"allocation": {"g2-bw": "bw-b"}}}


def test_without_mappings_the_allocation_and_traits_decide():
    allocations = {"node": {"resources": {"VCPU": 1}},
                   "agent": {"resources": {PPS: 5}},
                   "bw-a": {"resources": {EGR: 10}},
                   "bw-b": {"resources": {EGR: 20}}}
    traits = {"bw-a": {"CUSTOM_PHYSNET_A"}, "bw-b": {"CUSTOM_PHYSNET_B"}}
    assert port_profiles(GROUPS, allocations=allocations,
                         traits_of=lambda rp: traits.get(rp, set())) == {
        "p1": {"allocation": {"g-bw": "bw-a", "g-pps": "agent"}},
        "p2": {"allocation": {"g2-bw": "bw-b"}}}


def test_a_group_no_provider_satisfies_is_an_error():
    with pytest.raises(ValueError, match="g2-bw"):
        port_profiles(GROUPS[2:3], allocations={"bw-a": {"resources": {EGR: 20}}},
                      traits_of=lambda rp: {"CUSTOM_PHYSNET_A"})


def test_no_port_groups_no_profiles():
    assert port_profiles(None) == {} and port_profiles(GROUPS[3:]) == {}
