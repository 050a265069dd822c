"""The scheduler's grouping of placement's allocation requests by compute node."""
import types

from novella.placement.client import AllocationCandidates
from novella.scheduler.manager import SchedulerManager


def _ar(*providers):
    return {"allocations": {rp: {"resources": {"VCPU": 1}} for rp in providers}}


def _summary(root, parent=None):
    return {"resources": {}, "traits": [], "root_provider_uuid": root,
            "parent_provider_uuid": parent}


def _scheduler(known, made):
    """A scheduler whose host state maker knows the compute nodes ``known`` and
    notes each call in ``made``."""
    def host_state_maker(cell_uuid=None):
        def make(uuid, summary=None, request=None):
            made.append((uuid, summary.root_provider_uuid, request.decoded()))
            if uuid not in known:
                return None
            return types.SimpleNamespace(host=uuid, nodename=uuid,
                                         allocation_requests=[request])
        return make
    return types.SimpleNamespace(
        host_manager=types.SimpleNamespace(host_state_maker=host_state_maker))


def _grouped(answer, known, made=None):
    """(host, allocation requests as placement sent them) of each HostState."""
    candidates = AllocationCandidates(answer, "1.39")
    made = [] if made is None else made
    hosts = SchedulerManager._candidate_hosts(_scheduler(known, made), candidates, {})
    return [(h.host, [r.decoded() for r in h.allocation_requests]) for h in hosts]


def test_each_request_goes_to_its_roots_host_in_placements_order():
    # cn1 twice (its own inventory, then a child's), a sharing provider first in
    # cn2's request, and a root that is no compute node (nothing is made for it).
    first, second = _ar("cn1"), _ar("child1")
    shared, stranger = _ar("ss", "cn2"), _ar("other")
    answer = {"allocation_requests": [first, shared, second, stranger],
              "provider_summaries": {"cn1": _summary("cn1"), "child1": _summary("cn1", "cn1"),
                                     "cn2": _summary("cn2"), "ss": _summary("ss"),
                                     "other": _summary("other")}}
    assert _grouped(answer, {"cn1", "cn2"}) == [("cn1", [first, second]), ("cn2", [shared])]


def test_a_host_gets_its_own_summary_whichever_provider_came_first():
    child_first = dict(_ar("child1"), mappings={"": ["child1"]})
    answer = {"allocation_requests": [child_first],
              "provider_summaries": {"cn1": _summary("cn1"), "child1": _summary("cn1", "cn1")}}
    made = []
    assert _grouped(answer, {"cn1"}, made) == [("cn1", [child_first])]
    assert made == [("cn1", "cn1", child_first)]
