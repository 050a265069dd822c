"""What a scheduling request costs is bounded by the candidates Placement
returned: ``[scheduler] max_placement_results`` cuts the query, host states are
made for the candidates' compute nodes only (found through an index of every
cell's nodes, kept up to date as the cells' nodes change), and the answer is the
same as without the bound for the hosts it covers."""
import uuid

from novella.placement import client as placement_client
from novella.scheduler import host_manager
from novella.scheduler.rpcapi import SchedulerAPI

FLAVOR = {"id": 1, "flavorid": "1", "name": "m1.small", "memory_mb": 1024, "vcpus": 1,
          "root_gb": 10, "ephemeral_gb": 0, "swap": 0, "extra_specs": {}}


def _spec(**kw):
    spec = {"project_id": "p1", "user_id": "u1", "flavor": FLAVOR, "image": {"properties": {}},
            "num_instances": 1, "instance_group": None, "requested_destination": None,
            "ignore_hosts": [], "force_hosts": [], "force_nodes": [], "requested_resources": []}
    spec.update(kw)
    return spec


def _counting_copies(monkeypatch):
    """The hosts whose state a request's host state maker makes, in order."""
    made = []
    real = host_manager.HostManager.host_state_maker

    def host_state_maker(self, *args, **kw):
        make = real(self, *args, **kw)

        def counted(*a):
            h = make(*a)
            if h is not None:
                made.append(h.host)
            return h
        return counted
    monkeypatch.setattr(host_manager.HostManager, "host_state_maker", host_state_maker)
    return made


def test_host_states_are_made_for_the_returned_candidates_only(make_cloud, monkeypatch):
    cloud = make_cloud({("scheduler", "max_placement_results"): 3,
                        ("filter_scheduler", "weight_classes"): ["RAMWeigher"]})
    for i in range(5):
        cloud.add_host("cell1", f"a{i}", memory_mb=4096 + 1024 * i)
        cloud.add_host("cell2", f"b{i}", memory_mb=4096)
    asked = []
    real_get = cloud.placement.get_allocation_candidates

    def get(*args, **kw):
        asked.append(kw.get("limit"))
        answer = real_get(*args, **kw)
        asked.append(len(answer))
        return answer
    monkeypatch.setattr(cloud.scheduler.placement, "get_allocation_candidates", get)
    made = _counting_copies(monkeypatch)
    consumer = str(uuid.uuid4())
    (hosts,) = SchedulerAPI(cloud.transports[0]).select_destinations(
        cloud.ctxt(), _spec(), [consumer])
    assert asked == [3, 3]  # the limit reached placement, which kept to it
    assert len(made) == 3 and len(set(made)) == 3  # one host state per candidate, of 10 hosts
    assert hosts[0]["service_host"] in made
    assert cloud.allocations(consumer)[hosts[0]["compute_node_uuid"]]["resources"]["VCPU"] == 1
    # Without the bound every host is a candidate and the roomiest one wins.
    cloud.conf.set_override("max_placement_results", 1000, group="scheduler")
    made.clear()
    (hosts,) = SchedulerAPI(cloud.transports[0]).select_destinations(
        cloud.ctxt(), _spec(), [str(uuid.uuid4())])
    assert len(made) == 10 and hosts[0]["service_host"] == "a4"


def test_node_index_follows_the_cells_and_the_requested_cell(cloud):
    cloud.add_host("cell1", "a1")
    cloud.add_host("cell2", "b1")
    hm = cloud.scheduler.host_manager
    make = hm.host_state_maker()
    a1, b1 = make(cloud.nodes["a1"]), make(cloud.nodes["b1"])
    assert (a1.host, a1.cell_uuid) == ("a1", cloud.cells["cell1"].uuid)
    assert (b1.host, b1.cell_uuid) == ("b1", cloud.cells["cell2"].uuid)
    assert make(str(uuid.uuid4())) is None
    # Each call is a copy of its own: what one request changes, the next does not see.
    a1.consume({"VCPU": 2, "MEMORY_MB": 512})
    a1.allocation_requests.append({"allocations": {}})
    again = make(cloud.nodes["a1"])
    assert again.vcpus_used == a1.vcpus_used - 2 and again.allocation_requests == []
    # Only the requested cell's nodes.
    only1 = hm.host_state_maker(cell_uuid=cloud.cells["cell1"].uuid)
    assert only1(cloud.nodes["a1"]).host == "a1" and only1(cloud.nodes["b1"]) is None
    # A node added to a cell is found at the next request.
    cloud.add_host("cell2", "b2")
    assert hm.host_state_maker()(cloud.nodes["b2"]).host == "b2"
    states = hm.get_host_states(provider_uuids=[cloud.nodes["b2"], cloud.nodes["a1"],
                                                cloud.nodes["b2"]])
    assert [h.host for h in states] == ["b2", "a1"]
    assert [h.host for h in hm.get_host_states(provider_uuids=[cloud.nodes["a1"]],
                                               hosts=["b2"])] == []


def test_provider_traits_are_read_from_the_summary(cloud):
    cloud.add_host("cell1", "a1")
    make = cloud.scheduler.host_manager.host_state_maker()
    assert make(cloud.nodes["a1"]).traits == set()
    node = cloud.nodes["a1"]
    answer = {"allocation_requests": [], "provider_summaries": {node: {
        "resources": {"VCPU": {"capacity": 8, "used": 3}, "CUSTOM_X": {"capacity": 1, "used": 0}},
        "traits": ["COMPUTE_NODE", "HW_CPU_X86_AVX2"]}}}
    summary = placement_client.AllocationCandidates(answer, "1.39").summaries[node]
    h = make(node, summary)
    assert h.traits == {"COMPUTE_NODE", "HW_CPU_X86_AVX2"}
    assert (h.vcpus_total, h.vcpus_used, h.free_vcpus) == (8, 3, 5)
