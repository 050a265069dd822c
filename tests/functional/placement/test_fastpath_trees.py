"""The candidates fast path gives the general search's answer, byte for byte,
on generated nested and sharing trees (traits, aggregates, granular groups,
group_policy, root_required, in_tree, limit), and after writes between
queries."""
import json
import uuid

import webob
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from novella.placement import conf, fastpath, ledger, wsgi

CLASSES = ["VCPU", "MEMORY_MB", "DISK_GB", "NET_BW_EGR_KILOBIT_PER_SEC", "CUSTOM_GPU"]
TRAITS = ["HW_CPU_X86_AVX", "CUSTOM_PHYSNET1", "CUSTOM_FAST", "MISC_SHARES_VIA_AGGREGATE"]
QUERY_TRAITS = TRAITS[:3]
AGGS = [str(uuid.UUID(int=0xA000 + i)) for i in range(3)]
VERSIONS = ["1.10", "1.17", "1.25", "1.27", "1.29", "1.34", "1.39", "1.39", "1.39"]

inventories = st.dictionaries(
    st.sampled_from(CLASSES),
    st.tuples(st.sampled_from([1, 4, 16, 16, 1000]), st.sampled_from([0, 0, 1]),
              st.sampled_from([1, 1, 2]), st.sampled_from([1.0, 1.0, 2.0, 0.5]),
              st.sampled_from([1, 1, 2])),
    min_size=1, max_size=3)

provider = st.fixed_dictionaries({
    # index of the parent among the providers before it (modulo), or None for a root
    "parent": st.one_of(st.none(), st.integers(0, 1000)),
    "inv": inventories,
    "traits": st.sets(st.sampled_from(TRAITS), max_size=2),
    "aggs": st.sets(st.sampled_from(AGGS), max_size=2),
    "used": st.sampled_from([0, 0, 1, 2]),
})

group = st.fixed_dictionaries({
    "resources": st.dictionaries(st.sampled_from(CLASSES[:2] + CLASSES),
                                 st.sampled_from([1, 1, 2, 4]),
                                 min_size=1, max_size=2),
    "required": st.lists(st.tuples(st.booleans(), st.sampled_from(QUERY_TRAITS)), max_size=1),
    "member_of": st.one_of(st.none(), st.sampled_from(AGGS[:2]),
                           st.just("in:" + ",".join(AGGS[:2])), st.just("!" + AGGS[2])),
    "in_tree": st.one_of(st.none(), st.integers(0, 1000)),
})

query = st.fixed_dictionaries({
    "unsuffixed": st.one_of(st.none(), group),
    "granular": st.lists(group, max_size=2),
    "policy": st.sampled_from(["none", "isolate"]),
    "root_required": st.one_of(st.none(), st.sampled_from(
        ["CUSTOM_FAST", "!CUSTOM_FAST", "HW_CPU_X86_AVX"])),
    "limit": st.one_of(st.none(), st.integers(1, 4)),
    "version": st.sampled_from(VERSIONS),
})


def _app():
    return wsgi.make_app(conf.make_conf(overrides={
        "placement_database": {"connection": "sqlite://"},
        "api": {"auth_strategy": "noauth2"}}))


def _get(app, path, version):
    r = webob.Request.blank(path)
    r.headers.update({"x-auth-token": "admin", "Accept": "application/json",
                      "OpenStack-API-Version": "placement " + version})
    return r.get_response(app)


def _build(app, specs):
    providers = []
    with app.ledger.write() as t:
        t.create_class("CUSTOM_GPU")
        t.create_trait("CUSTOM_PHYSNET1")
        t.create_trait("CUSTOM_FAST")
    with app.ledger.write() as t:
        for i, spec in enumerate(specs):
            parent = None
            if spec["parent"] is not None and providers:
                parent = providers[spec["parent"] % len(providers)]
            p = t.create_provider(str(uuid.UUID(int=i + 1)), "rp%d" % i, parent)
            t.set_inventories(p, {rc: ledger.Inventory((total, reserved, min(_m, total), total,
                                                          step, ratio))
                                  for rc, (total, reserved, _m, ratio, step)
                                  in spec["inv"].items()})
            t.set_traits(p, set(spec["traits"]))
            t.set_aggregates(p, set(spec["aggs"]))
            providers.append(p)
    return providers


def _use(app, providers, specs):
    """Allocate a little of some providers (usage differs between them)."""
    for p, spec in zip(providers, specs):
        if not spec["used"] or not p.inv:
            continue
        rc, inv = sorted(p.inv.items())[0]
        amount = spec["used"] * inv[4]
        r = webob.Request.blank("/allocations/" + str(uuid.uuid4()), method="PUT")
        r.headers.update({"x-auth-token": "admin", "OpenStack-API-Version": "placement 1.39"})
        r.body = json.dumps({"allocations": {p.uuid: {"resources": {rc: amount}}},
                             "project_id": "p", "user_id": "u", "consumer_generation": None,
                             "consumer_type": "INSTANCE"}).encode()
        r.content_type = "application/json"
        r.get_response(app)


def _query_string(q, providers):
    """The query, keeping only what its microversion accepts."""
    v = tuple(int(x) for x in q["version"].split("."))
    parts = []
    numbered = [("", q["unsuffixed"])] if q["unsuffixed"] else []
    if v >= (1, 25):
        numbered += [(str(i + 1), g) for i, g in enumerate(q["granular"])]
    if not numbered:
        numbered = [("", q["granular"][0] if q["granular"] else
                     {"resources": {"VCPU": 1}, "required": [], "member_of": None,
                      "in_tree": None})]
    for suffix, g in numbered:
        parts.append("resources%s=%s" % (suffix, ",".join(
            "%s:%d" % kv for kv in sorted(g["resources"].items()))))
        required = {t: neg and v >= (1, 22) for neg, t in g["required"]}
        if required and v >= (1, 17):
            parts.append("required%s=%s" % (suffix, ",".join(
                ("!" if neg else "") + t for t, neg in required.items())))
        member_of = g["member_of"]
        if member_of and (v >= (1, 32) or not member_of.startswith("!")) and (
                v >= (1, 24) or not member_of.startswith("in:")) and v >= (1, 21):
            parts.append("member_of%s=%s" % (suffix, member_of))
        if g["in_tree"] is not None and v >= (1, 31):
            parts.append("in_tree%s=%s" % (suffix, providers[g["in_tree"] % len(providers)].uuid))
    if len(numbered) > 2 or (len(numbered) == 2 and numbered[0][0]):
        parts.append("group_policy=" + q["policy"])
    if q["root_required"] and v >= (1, 35):
        parts.append("root_required=" + q["root_required"])
    if q["limit"] and v >= (1, 16):
        parts.append("limit=%d" % q["limit"])
    return "&".join(parts)


def _compare(app, monkeypatch, qs, version):
    calls = []
    real = fastpath.applies

    def spy(*args):
        calls.append(real(*args))
        return calls[-1]

    with monkeypatch.context() as m:
        m.setattr(fastpath, "applies", spy)
        fast = _get(app, "/allocation_candidates?" + qs, version)
    with monkeypatch.context() as m:
        m.setattr(fastpath, "applies", lambda *a: False)
        general = _get(app, "/allocation_candidates?" + qs, version)
    assert fast.status_int == general.status_int, (qs, version, fast.body, general.body)
    if fast.status_int == 200:
        assert calls == [True], qs
        assert fast.body == general.body, (qs, version)
        return True
    return False


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow, HealthCheck.data_too_large])
@given(specs=st.lists(provider, min_size=1, max_size=14),
       queries=st.lists(query, min_size=1, max_size=6))
def test_fast_path_equals_general_search_on_trees(monkeypatch, specs, queries):
    app = _app()
    providers = _build(app, specs)
    _use(app, providers, specs)
    for q in queries:
        _compare(app, monkeypatch, _query_string(q, providers), q["version"])
    # Writes between queries: the index follows them.
    with app.ledger.write() as t:
        p = providers[-1]
        t.set_traits(p, set(p.traits) ^ {"MISC_SHARES_VIA_AGGREGATE"})
        t.set_aggregates(providers[0], {AGGS[0]})
        if len(providers) > 2 and providers[1].root is not providers[2].root:
            t.update_provider(providers[1], providers[1].name,
                              providers[2] if providers[1].parent is None else None)
    for q in queries:
        _compare(app, monkeypatch, _query_string(q, providers), q["version"])


def _bandwidth_fleet(app, roots):
    with app.ledger.write() as t:
        t.create_trait("CUSTOM_PHYSNET1")
    with app.ledger.write() as t:
        for i in range(roots):
            r = t.create_provider(str(uuid.UUID(int=2 * i + 1)), "cn%d" % i, None)
            t.set_inventories(r, {"VCPU": ledger.Inventory((8, 0, 1, 8, 1, 1.0)),
                                  "MEMORY_MB": ledger.Inventory((4096, 0, 1, 4096, 1, 1.0))})
            c = t.create_provider(str(uuid.UUID(int=2 * i + 2)), "cn%d:nic" % i, r)
            t.set_inventories(c, {"NET_BW_EGR_KILOBIT_PER_SEC":
                                  ledger.Inventory((10000, 0, 1, 10000, 1, 1.0))})
            t.set_traits(c, {"CUSTOM_PHYSNET1"})


def test_bandwidth_children_stay_on_the_fast_path(monkeypatch):
    app = _app()
    _bandwidth_fleet(app, 30)
    for version in ("1.29", "1.34", "1.39", "1.25"):
        for qs in ("resources=VCPU:1,MEMORY_MB:512",
                   "resources=VCPU:1&resources1=NET_BW_EGR_KILOBIT_PER_SEC:1000"
                   "&required1=CUSTOM_PHYSNET1",
                   "resources=VCPU:1&resources1=NET_BW_EGR_KILOBIT_PER_SEC:1000&limit=5"):
            assert _compare(app, monkeypatch, qs, version)
    body = json.loads(_get(app, "/allocation_candidates?resources=VCPU:1&resources1="
                           "NET_BW_EGR_KILOBIT_PER_SEC:1000", "1.34").body)
    assert len(body["allocation_requests"]) == 30
    first = body["allocation_requests"][0]
    root, child = str(uuid.UUID(int=1)), str(uuid.UUID(int=2))
    assert first["allocations"] == {root: {"resources": {"VCPU": 1}},
                                    child: {"resources": {"NET_BW_EGR_KILOBIT_PER_SEC": 1000}}}
    assert first["mappings"] == {"": [root], "1": [child]}
    assert len(body["provider_summaries"]) == 60


def test_shared_storage_stays_on_the_fast_path(monkeypatch):
    app = _app()
    with app.ledger.write() as t:
        shared = t.create_provider(str(uuid.UUID(int=999)), "nfs", None)
        t.set_inventories(shared, {"DISK_GB": ledger.Inventory((100, 0, 1, 100, 1, 1.0))})
        t.set_traits(shared, {"MISC_SHARES_VIA_AGGREGATE"})
        t.set_aggregates(shared, {AGGS[0]})
        for i in range(6):
            r = t.create_provider(str(uuid.UUID(int=i + 1)), "cn%d" % i, None)
            t.set_inventories(r, {"VCPU": ledger.Inventory((8, 0, 1, 8, 1, 1.0))})
            t.set_aggregates(r, {AGGS[0]} if i % 2 else set())
    for version in ("1.10", "1.29", "1.39"):
        assert _compare(app, monkeypatch, "resources=VCPU:1,DISK_GB:10", version)
        assert _compare(app, monkeypatch, "resources=DISK_GB:10", version)
    body = json.loads(_get(app, "/allocation_candidates?resources=VCPU:1,DISK_GB:10",
                           "1.39").body)
    assert [sorted(a["allocations"]) for a in body["allocation_requests"]] == [
        sorted([str(uuid.UUID(int=i + 1)), str(uuid.UUID(int=999))]) for i in (1, 3, 5)]
    # Sharing only: one candidate, whichever tree it is reached from.
    body = json.loads(_get(app, "/allocation_candidates?resources=DISK_GB:10", "1.39").body)
    assert len(body["allocation_requests"]) == 1


def test_unsuffixed_group_takes_aggregates_from_the_root(monkeypatch):
    app = _app()
    with app.ledger.write() as t:
        r = t.create_provider(str(uuid.UUID(int=1)), "r", None)
        t.set_inventories(r, {"VCPU": ledger.Inventory((8, 0, 1, 8, 1, 1.0))})
        t.set_aggregates(r, {AGGS[0]})
        c = t.create_provider(str(uuid.UUID(int=2)), "c", r)
        t.set_inventories(c, {"VCPU": ledger.Inventory((8, 0, 1, 8, 1, 1.0))})
    for qs, expected in (("resources=VCPU:1&member_of=" + AGGS[0], 2),
                         ("resources=VCPU:1&member_of=!" + AGGS[0], 0),
                         ("resources1=VCPU:1&member_of1=" + AGGS[0], 1)):
        assert _compare(app, monkeypatch, qs, "1.39")
        body = json.loads(_get(app, "/allocation_candidates?" + qs, "1.39").body)
        assert len(body["allocation_requests"]) == expected, qs
