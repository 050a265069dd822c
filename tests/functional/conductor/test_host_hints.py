"""The ``same_host`` and ``different_host`` scheduler hints through a whole build."""
import uuid

from novella.compute import states
from novella.db import cell_models as cm

FILTERS = ["ComputeFilter", "SameHostFilter", "DifferentHostFilter"]


def _cloud(make_cloud):
    cloud = make_cloud({("filter_scheduler", "enabled_filters"): FILTERS,
                        ("filter_scheduler", "weight_classes"): ["RAMWeigher"]})
    cloud.add_host("cell1", "a1", memory_mb=16384)
    cloud.add_host("cell1", "a2", memory_mb=8192)
    cloud.add_host("cell2", "b1", memory_mb=12288)
    return cloud


def _host(cloud, server):
    return cloud.instance(server).host


def test_same_host_follows_the_named_server(make_cloud):
    cloud = _cloud(make_cloud)
    (first,) = cloud.boot()
    assert _host(cloud, first) == "a1"  # most free RAM
    # A server on the emptiest host of the other cell; then one asked to join it.
    (other,) = cloud.boot(force_hosts=["b1"])
    assert _host(cloud, other) == "b1"
    (joined,) = cloud.boot(scheduler_hints={"same_host": other})
    assert _host(cloud, joined) == "b1" and cloud.mapping_cell(joined) == "cell2"
    assert cloud.usages("b1")["MEMORY_MB"] == 2048
    # A list naming servers on two hosts: either of them.
    (either,) = cloud.boot(scheduler_hints={"same_host": [first, other]})
    assert _host(cloud, either) == "a1"


def test_different_host_avoids_the_named_servers(make_cloud):
    cloud = _cloud(make_cloud)
    (first,) = cloud.boot()
    assert _host(cloud, first) == "a1"
    (second,) = cloud.boot(scheduler_hints={"different_host": first})
    assert _host(cloud, second) == "b1"  # a1 has more free RAM, but holds the server
    (third,) = cloud.boot(scheduler_hints={"different_host": [first, second]})
    assert _host(cloud, third) == "a2"
    assert cloud.usages("a2")["MEMORY_MB"] == 1024


def test_no_host_passes_and_the_server_goes_to_cell0(make_cloud):
    cloud = _cloud(make_cloud)
    placed = [cloud.boot(force_hosts=[h])[0] for h in ("a1", "a2", "b1")]
    (refused,) = cloud.boot(scheduler_hints={"different_host": placed})
    assert cloud.mapping_cell(refused) == "cell0"
    assert cloud.instance(refused, "cell0").vm_state == states.ERROR
    (fault,) = cloud.rows("cell0", cm.InstanceFault, instance_uuid=refused)
    assert "DifferentHostFilter" in fault.message + (fault.details or "")
    assert cloud.placement.get_allocations(refused)["allocations"] == {}
    # A server that does not exist is on no host: same_host finds none either.
    (lost,) = cloud.boot(scheduler_hints={"same_host": str(uuid.uuid4())})
    assert cloud.mapping_cell(lost) == "cell0"
    assert {h: cloud.usages(h)["MEMORY_MB"] for h in ("a1", "a2", "b1")} == {
        "a1": 1024, "a2": 1024, "b1": 1024}


def test_hints_are_not_filtered_without_the_filters(make_cloud):
    cloud = make_cloud({("filter_scheduler", "enabled_filters"): ["ComputeFilter"],
                        ("filter_scheduler", "weight_classes"): ["RAMWeigher"]})
    cloud.add_host("cell1", "a1", memory_mb=16384)
    cloud.add_host("cell1", "a2", memory_mb=8192)
    (first,) = cloud.boot()
    (second,) = cloud.boot(scheduler_hints={"different_host": first})
    assert _host(cloud, second) == "a1"
