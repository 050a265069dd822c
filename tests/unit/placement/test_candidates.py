"""Unit tests of the candidate search over a hand-built read model."""
from novella.placement import candidates, ledger


def _provider(st, pid, name, parent=None, inv=None, traits=(), aggs=()):
    p = ledger.Provider(pid, "%032x" % pid, name, 0, None, None)
    if parent is not None:
        p.parent, p.root = parent, parent.root
        parent.children.append(p)
    p.inv = {rc: ledger.Inventory((t, 0, 1, t, 1, 1.0)) for rc, t in (inv or {}).items()}
    p.traits, p.aggs = set(traits), set(aggs)
    st.by_id[pid] = st.by_uuid[p.uuid] = st.by_name[name] = p
    return p


def _group(suffix, resources, **kw):
    g = candidates.Group(suffix)
    g.resources = resources
    for k, v in kw.items():
        setattr(g, k, v)
    return g


def test_single_provider_and_capacity():
    st = ledger.State()
    a = _provider(st, 1, "a", inv={"VCPU": 4})
    b = _provider(st, 2, "b", inv={"VCPU": 1})
    found = candidates.Search(st, [_group("", {"VCPU": 2})]).run()
    assert [list(allocs) for allocs, _m in found] == [[a]]
    b.used["VCPU"] = 0
    assert len(candidates.Search(st, [_group("", {"VCPU": 1})]).run()) == 2


def test_nested_tree_splits_unsuffixed_group_and_isolates_granular():
    st = ledger.State()
    cn = _provider(st, 1, "cn", inv={"VCPU": 8})
    pf1 = _provider(st, 2, "pf1", cn, inv={"SRIOV_NET_VF": 4})
    pf2 = _provider(st, 3, "pf2", cn, inv={"SRIOV_NET_VF": 4})
    found = candidates.Search(st, [_group("", {"VCPU": 1, "SRIOV_NET_VF": 1})]).run()
    assert sorted(p.name for allocs, _m in found for p in allocs if p is not cn) == [
        "pf1", "pf2"]
    groups = [_group("1", {"SRIOV_NET_VF": 1}), _group("2", {"SRIOV_NET_VF": 1})]
    isolated = candidates.Search(st, groups, group_policy="isolate").run()
    assert {tuple(m["1"] + m["2"]) for _a, m in isolated} == {(pf1, pf2), (pf2, pf1)}
    assert len(candidates.Search(st, groups, group_policy="none").run()) == 4


def test_sharing_provider_serves_trees_in_its_aggregate():
    st = ledger.State()
    cn = _provider(st, 1, "cn", inv={"VCPU": 8}, aggs={"agg"})
    ss = _provider(st, 2, "ss", inv={"DISK_GB": 100}, aggs={"agg"},
                   traits={candidates.SHARING_TRAIT})
    found = candidates.Search(st, [_group("", {"VCPU": 1, "DISK_GB": 10})]).run()
    assert found == [({cn: {"VCPU": 1}, ss: {"DISK_GB": 10}}, {"": [cn, ss]})]
