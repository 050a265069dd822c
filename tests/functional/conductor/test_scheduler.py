"""select_destinations against real placement and cell databases."""
import uuid

import pytest

from novella.placement import client as placement_client
from novella.scheduler.errors import NoValidHost
from novella.scheduler.rpcapi import SchedulerAPI

FLAVOR = {"id": 1, "flavorid": "1", "name": "m1.small", "memory_mb": 1024, "vcpus": 1,
          "root_gb": 10, "ephemeral_gb": 0, "swap": 0, "extra_specs": {}}


def _spec(**kw):
    spec = {"project_id": "p1", "user_id": "u1", "flavor": FLAVOR, "image": {"properties": {}},
            "num_instances": 1, "instance_group": None, "requested_destination": None,
            "ignore_hosts": [], "force_hosts": [], "force_nodes": [], "requested_resources": []}
    spec.update(kw)
    return spec


def _select(cloud, n=1, **kw):
    uuids = [str(uuid.uuid4()) for _ in range(n)]
    return uuids, SchedulerAPI(cloud.transports[0]).select_destinations(
        cloud.ctxt(), _spec(**kw), uuids)


@pytest.fixture
def four_hosts(cloud):
    cloud.add_host("cell1", "a1", memory_mb=16384)
    cloud.add_host("cell1", "a2", memory_mb=8192)
    cloud.add_host("cell1", "a3", memory_mb=6144)
    cloud.add_host("cell2", "b1", memory_mb=12288)
    return cloud


def test_selection_claims_first_host_only_and_alternates_share_its_cell(four_hosts):
    cloud = four_hosts
    (consumer,), (hosts,) = _select(cloud)
    assert [h["service_host"] for h in hosts] == ["a1", "a2", "a3"]  # max_attempts=3
    assert {h["cell_uuid"] for h in hosts} == {cloud.cells["cell1"].uuid}
    chosen = hosts[0]
    assert chosen["compute_node_uuid"] == cloud.nodes["a1"] and chosen["nodename"] == "a1"
    assert chosen["allocation_request"]["allocations"] == {
        cloud.nodes["a1"]: {"resources": {"VCPU": 1, "MEMORY_MB": 1024, "DISK_GB": 10}}}
    assert cloud.allocations(consumer)[cloud.nodes["a1"]]["resources"]["VCPU"] == 1
    assert cloud.placement.get_allocations(consumer)["project_id"] == "p1"
    for alt in ("a2", "a3", "b1"):
        assert cloud.usages(alt)["VCPU"] == 0


def test_without_alternates(four_hosts):
    uuids = [str(uuid.uuid4())]
    (hosts,) = four_hosts.scheduler.select_destinations(four_hosts.ctxt(), _spec(), uuids,
                                                        return_alternates=False)
    assert [h["service_host"] for h in hosts] == ["a1"]


def test_several_instances_are_each_claimed(make_cloud):
    cloud = make_cloud({("filter_scheduler", "weight_classes"): ["RAMWeigher"],
                        ("filter_scheduler", "ram_weight_multiplier"): -1.0})  # stack
    cloud.add_host("cell1", "a1", memory_mb=16384)
    cloud.add_host("cell1", "a2", memory_mb=3072)
    uuids, lists = _select(cloud, n=4)
    # a2 fills up after three; the fourth goes to a1.
    assert [hl[0]["service_host"] for hl in lists] == ["a2", "a2", "a2", "a1"]
    assert cloud.usages("a2")["MEMORY_MB"] == 3072 and cloud.usages("a1")["MEMORY_MB"] == 1024
    for u, hl in zip(uuids, lists):
        assert cloud.allocations(u).keys() == {cloud.nodes[hl[0]["service_host"]]}


def test_claim_refused_by_a_race_moves_to_next_candidate(four_hosts, monkeypatch):
    cloud = four_hosts
    real = cloud.placement.put_allocations
    refused = []

    def racing(consumer, allocations, *a, **kw):
        if not refused:
            refused.append(list(allocations))
            raise placement_client.Conflict("PUT", "/allocations", 409, None, "taken")
        return real(consumer, allocations, *a, **kw)

    monkeypatch.setattr(cloud.placement, "put_allocations", racing)
    (consumer,), (hosts,) = _select(cloud)
    assert refused == [[cloud.nodes["a1"]]]
    assert hosts[0]["service_host"] == "b1"  # next best by weight
    assert cloud.allocations(consumer).keys() == {cloud.nodes["b1"]}


def test_ignore_and_force_hosts(four_hosts):
    cloud = four_hosts
    _, (hosts,) = _select(cloud, ignore_hosts=["a1", "b1"])
    assert hosts[0]["service_host"] == "a2"
    _, (hosts,) = _select(cloud, force_hosts=["a3"])
    assert [h["service_host"] for h in hosts] == ["a3"]
    with pytest.raises(NoValidHost, match="forced hosts"):
        _select(cloud, force_hosts=["nope"])


def test_forced_host_bypasses_filters(four_hosts):
    cloud = four_hosts
    _, (hosts,) = _select(cloud, force_hosts=["a2"], availability_zone="elsewhere")
    assert hosts[0]["service_host"] == "a2"
    with pytest.raises(NoValidHost, match="AvailabilityZoneFilter"):
        _select(cloud, availability_zone="elsewhere")


def test_requested_node_uses_in_tree_and_unknown_node_fails(four_hosts):
    cloud = four_hosts
    _, (hosts,) = _select(cloud, requested_destination={"host": "a3", "node": "a3"})
    assert hosts[0]["service_host"] == "a3"
    with pytest.raises(NoValidHost, match="could not be found"):
        _select(cloud, requested_destination={"host": "ghost", "node": None})


def test_no_candidates_claims_nothing(four_hosts):
    cloud = four_hosts
    big = dict(FLAVOR, memory_mb=10 ** 6)
    with pytest.raises(NoValidHost, match="No valid host was found"):
        _select(cloud, flavor=big)
    uuids = [str(uuid.uuid4()) for _ in range(5)]
    with pytest.raises(NoValidHost):  # room for four of these only (one per host)
        cloud.scheduler.select_destinations(cloud.ctxt(), _spec(flavor=dict(FLAVOR, vcpus=4)), uuids)
    for u in uuids:
        assert cloud.allocations(u) == {}
    for h in ("a1", "a2", "a3", "b1"):
        assert cloud.usages(h)["VCPU"] == 0


def test_unknown_trait_is_no_valid_host(four_hosts):
    flavor = dict(FLAVOR, extra_specs={"trait:CUSTOM_NOT_THERE": "required"})
    with pytest.raises(NoValidHost):
        _select(four_hosts, flavor=flavor)


def test_tenant_isolation_through_placement_aggregates(make_cloud):
    cloud = make_cloud({("scheduler", "limit_tenants_to_placement_aggregate"): True,
                        ("scheduler", "placement_aggregate_required_for_tenants"): True})
    cloud.add_host("cell1", "shared", memory_mb=16384)
    cloud.add_host("cell2", "mine")
    cloud.add_aggregate("p1-only", ["mine"], {"filter_tenant_id": "p1"})
    _, (hosts,) = _select(cloud)
    assert hosts[0]["service_host"] == "mine"
    with pytest.raises(NoValidHost, match="project p2"):
        _select(cloud, project_id="p2")


def test_aggregate_extra_specs_and_multitenancy_filters(make_cloud):
    cloud = make_cloud({("filter_scheduler", "enabled_filters"): [
        "ComputeFilter", "AggregateInstanceExtraSpecsFilter", "AggregateMultiTenancyIsolation"]})
    cloud.add_host("cell1", "plain", memory_mb=16384)
    cloud.add_host("cell1", "ssd")
    cloud.add_host("cell2", "private", memory_mb=32768)
    cloud.add_aggregate("ssd", ["ssd"], {"disk": "ssd"})
    cloud.add_aggregate("priv", ["private"], {"filter_tenant_id": "other"})
    _, (hosts,) = _select(cloud, flavor=dict(FLAVOR, extra_specs={"disk": "ssd"}))
    assert [h["service_host"] for h in hosts] == ["ssd"]
    _, (hosts,) = _select(cloud)
    assert hosts[0]["service_host"] == "plain"


def test_requested_cell_without_candidates_says_so(four_hosts):
    cloud = four_hosts
    _, (hosts,) = _select(cloud, requested_destination={"cell_uuid": cloud.cells["cell2"].uuid})
    assert [h["service_host"] for h in hosts] == ["b1"]
    with pytest.raises(NoValidHost, match="requested destination"):
        _select(cloud, requested_destination={"cell_uuid": cloud.cells["cell2"].uuid},
                ignore_hosts=["b1"])
