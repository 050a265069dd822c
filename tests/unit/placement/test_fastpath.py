"""The candidates fast path answers exactly as the general search does."""
import json
import random
import uuid

import pytest
import webob

from novella.placement import conf, fastpath, ledger, wsgi

CLASSES = ["VCPU", "MEMORY_MB", "DISK_GB", "CUSTOM_GPU"]
TRAITS = ["HW_CPU_X86_AVX", "HW_CPU_X86_SSE", "CUSTOM_FAST", "CUSTOM_GOLD"]
AGGS = [str(uuid.UUID(int=0xA000 + i)) for i in range(3)]
VERSIONS = ["1.10", "1.12", "1.17", "1.21", "1.27", "1.29", "1.34", "1.39"]


def _app(**placement):
    overrides = {"placement_database": {"connection": "sqlite://"},
                 "api": {"auth_strategy": "noauth2"}}
    if placement:
        overrides["placement"] = placement
    return wsgi.make_app(conf.make_conf(overrides=overrides))


def _call(app, path, method="GET", body=None, version="1.39", ok=True):
    r = webob.Request.blank(path, method=method)
    r.headers.update({"x-auth-token": "admin", "Accept": "application/json",
                      "OpenStack-API-Version": "placement " + version})
    if body is not None:
        r.body, r.content_type = json.dumps(body).encode(), "application/json"
    resp = r.get_response(app)
    assert resp.status_int < 300 or not ok, resp.body
    return resp


def _random_inventory(rng):
    out = {}
    for rc in rng.sample(CLASSES, rng.randint(1, len(CLASSES))):
        total = rng.choice([1, 4, 16, 64, 1000])
        step = rng.choice([1, 1, 1, 2, 4])
        out[rc] = ledger.Inventory((total, rng.choice([0, 0, 1, 3]),
                                    rng.choice([1, 1, 2]), rng.choice([total, max(1, total // 2)]),
                                    step, rng.choice([1.0, 1.5, 16.0, 0.5])))
    return out


def _flat_ledger(app, rng, n):
    led = app.ledger
    with led.write() as t:
        for name in TRAITS:
            if name.startswith("CUSTOM_"):
                t.create_trait(name)
        t.create_class("CUSTOM_GPU")
    with led.write() as t:
        providers = []
        for i in range(n):
            p = t.create_provider(str(uuid.UUID(int=i + 1)), "rp%d" % i, None)
            t.set_inventories(p, _random_inventory(rng))
            t.set_traits(p, set(rng.sample(TRAITS, rng.randint(0, 3))))
            t.set_aggregates(p, set(rng.sample(AGGS, rng.randint(0, 2))))
            providers.append(p)
    return providers


def _allocate(app, rng, providers, count):
    consumers = []
    for _ in range(count):
        p = rng.choice(providers)
        rc, inv = rng.choice(sorted(p.inv.items()))
        amount = inv[2] * inv[4]
        if amount > inv[3]:
            continue
        c = str(uuid.uuid4())
        r = webob.Request.blank("/allocations/" + c, method="PUT")
        r.headers.update({"x-auth-token": "admin", "OpenStack-API-Version": "placement 1.39"})
        r.body = json.dumps({"allocations": {p.uuid: {"resources": {rc: amount}}},
                             "project_id": "p", "user_id": "u", "consumer_generation": None,
                             "consumer_type": "INSTANCE"}).encode()
        r.content_type = "application/json"
        if r.get_response(app).status_int == 204:
            consumers.append(c)
    return consumers


def _random_query(rng, providers):
    res = {rc: rng.choice([1, 1, 2, 3, 8, 40]) for rc in rng.sample(CLASSES, rng.randint(1, 3))}
    q = ["resources=" + ",".join("%s:%d" % kv for kv in res.items())]
    if rng.random() < 0.4:
        picks = rng.sample(TRAITS, rng.randint(1, 2))
        q.append("required=" + ",".join(("!" if rng.random() < 0.3 else "") + t
                                        for t in picks))
    if rng.random() < 0.2:
        q.append("required=in:" + ",".join(rng.sample(TRAITS, 2)))
    if rng.random() < 0.4:
        q.append("member_of=" + ("in:" + ",".join(rng.sample(AGGS, 2))
                                 if rng.random() < 0.5 else rng.choice(AGGS)))
    if rng.random() < 0.2:
        q.append("member_of=!" + rng.choice(AGGS))
    if rng.random() < 0.2:
        q.append("root_required=" + rng.choice(TRAITS))
    if rng.random() < 0.15:
        q.append("in_tree=" + rng.choice(providers).uuid)
    if rng.random() < 0.3:
        q.append("limit=%d" % rng.randint(1, 5))
    return "&".join(q)


def _both(app, monkeypatch, query, version):
    used = []
    real = fastpath.applies

    def spy(*args):
        used.append(real(*args))
        return used[-1]

    monkeypatch.setattr(fastpath, "applies", spy)
    fast = _call(app, "/allocation_candidates?" + query, version=version, ok=False)
    monkeypatch.setattr(fastpath, "applies", lambda *a: False)
    general = _call(app, "/allocation_candidates?" + query, version=version, ok=False)
    monkeypatch.setattr(fastpath, "applies", real)
    if fast.status_int != 200:  # refused before the search: nothing to compare
        assert general.status_int == fast.status_int and not used
        return None, None, used
    return fast.body, general.body, used


@pytest.mark.parametrize("seed", range(6))
def test_fast_path_matches_general_search_on_random_flat_trees(monkeypatch, seed):
    rng = random.Random(seed)
    app = _app()
    providers = _flat_ledger(app, rng, rng.randint(5, 40))
    consumers = _allocate(app, rng, providers, 30)
    fast_used = 0
    for round_ in range(3):
        for _ in range(40):
            version = rng.choice(VERSIONS)
            query = _random_query(rng, providers)
            fast, general, used = _both(app, monkeypatch, query, version)
            assert fast == general, (version, query)
            fast_used += used == [True]
        # Change the ledger between rounds: the index must follow.
        for c in consumers[:5]:
            _call(app, "/allocations/" + c, method="DELETE")
        consumers = consumers[5:] + _allocate(app, rng, providers, 5)
        idle = [p for p in providers if not p.used] or [None]
        with app.ledger.write() as t:
            t.set_traits(rng.choice(providers), {rng.choice(TRAITS)})
            t.set_inventories(rng.choice(providers), _random_inventory(rng))
            t.set_aggregates(rng.choice(providers), set())
            gone = rng.choice(idle)
            if gone is not None and len(providers) > 3:
                t.set_inventories(gone, _random_inventory(rng))
                t.delete_provider(gone)
                providers.remove(gone)
    assert fast_used > 20


def test_usage_change_without_generation_bump_is_seen(monkeypatch):
    app = _app()
    rng = random.Random(7)
    providers = _flat_ledger(app, rng, 3)
    consumers = _allocate(app, rng, providers, 10)
    assert consumers
    query = "resources=VCPU:1"
    _both(app, monkeypatch, query, "1.39")  # both renderings cache their summaries
    for c in consumers:
        _call(app, "/allocations/" + c, method="DELETE")  # moves no generation
    fast, general, _used = _both(app, monkeypatch, query, "1.39")
    assert fast == general
    summaries = json.loads(fast)["provider_summaries"].values()
    assert [r["used"] for s in summaries for r in s["resources"].values()] == [0] * sum(
        len(s["resources"]) for s in summaries)


def test_nested_or_sharing_ledger_stays_on_the_fast_path(monkeypatch):
    app = _app()
    rng = random.Random(3)
    providers = _flat_ledger(app, rng, 4)
    _fast, _general, used = _both(app, monkeypatch, "resources=VCPU:1", "1.39")
    assert used == [True]
    with app.ledger.write() as t:
        child = t.create_provider(str(uuid.uuid4()), "child", providers[0])
        t.set_inventories(child, {"VCPU": ledger.Inventory((4, 0, 1, 4, 1, 1.0))})
    fast, general, used = _both(app, monkeypatch, "resources=VCPU:1", "1.39")
    assert used == [True] and fast == general
    with app.ledger.write() as t:
        t.delete_provider(child)
        t.set_traits(providers[1], {"MISC_SHARES_VIA_AGGREGATE"})
    fast, general, used = _both(app, monkeypatch, "resources=VCPU:1", "1.39")
    assert used == [True] and fast == general
    with app.ledger.write() as t:
        t.set_traits(providers[1], set())
    _fast, _general, used = _both(app, monkeypatch, "resources=VCPU:1", "1.39")
    assert used == [True]


def test_randomized_limit_picks_from_all_candidates():
    app = _app(randomize_allocation_candidates=True)
    with app.ledger.write() as t:
        for i in range(20):
            p = t.create_provider(str(uuid.UUID(int=i + 1)), "rp%d" % i, None)
            t.set_inventories(p, {"VCPU": ledger.Inventory((4, 0, 1, 4, 1, 1.0))})
    seen = set()
    for _ in range(30):
        body = json.loads(_call(app, "/allocation_candidates?resources=VCPU:1&limit=2").body)
        assert len(body["allocation_requests"]) == 2
        assert len(body["provider_summaries"]) == 2
        for ar in body["allocation_requests"]:
            seen.update(ar["allocations"])
    assert len(seen) > 5


def test_limit_walks_only_as_many_plain_roots_as_it_returns(monkeypatch):
    """With a limit, a request only plain roots can serve stops at the limit:
    the roots past it are never looked at, and the answer is the general
    search's. A nested provider with one of the classes asked for sends the
    request back to the whole search."""
    app = _app()
    with app.ledger.write() as t:
        t.create_trait("CUSTOM_FAST")
        roots = []
        for i in range(30):
            p = t.create_provider(str(uuid.UUID(int=i + 1)), "rp%d" % i, None)
            t.set_inventories(p, {"VCPU": ledger.Inventory((4, 0, 1, 4, 1, 1.0)),
                                  "MEMORY_MB": ledger.Inventory((1024, 0, 1, 1024, 1, 1.0))})
            if i % 3:
                t.set_traits(p, {"CUSTOM_FAST"})
            roots.append(p)
        # Bandwidth-like children: classes the queries below do not ask for.
        for p in roots[:5]:
            child = t.create_provider(str(uuid.uuid4()), p.name + ":bw", p)
            t.set_inventories(child, {"DISK_GB": ledger.Inventory((10, 0, 1, 10, 1, 1.0))})
    looked = []
    real_plain = fastpath.Index.plain

    def plain(self):
        order = real_plain(self)

        class Counting(list):
            def __getitem__(inner, key):
                part = list.__getitem__(inner, key)
                looked.extend(part if isinstance(key, slice) else [part])
                return part
        return Counting(order)

    monkeypatch.setattr(fastpath.Index, "plain", plain)
    monkeypatch.setattr(fastpath, "_MIN_STEP", 1)
    walked = []
    real_first = fastpath._first_plain_roots

    def first(*args):
        walked.append(real_first(*args))
        return walked[-1]

    monkeypatch.setattr(fastpath, "_first_plain_roots", first)
    for query, expect_looked in (("resources=VCPU:1,MEMORY_MB:512&limit=4", 4),
                                 ("resources=VCPU:1&required=CUSTOM_FAST&limit=4", 6),
                                 ("resources=VCPU:1&required=!CUSTOM_FAST&limit=3", 7)):
        looked.clear()
        walked.clear()
        fast, general, used = _both(app, monkeypatch, query, "1.39")
        assert used == [True] and fast == general, query
        assert walked and walked[0] is not None and looked == [r.id for r in roots][:expect_looked]
        assert len(json.loads(fast)["allocation_requests"]) == int(query.rsplit("=", 1)[1])
    # A child holding VCPU may serve the root's request: the whole search answers.
    with app.ledger.write() as t:
        child = t.create_provider(str(uuid.uuid4()), "vcpu-child", roots[0])
        t.set_inventories(child, {"VCPU": ledger.Inventory((8, 0, 1, 8, 1, 1.0))})
    walked.clear()
    fast, general, used = _both(app, monkeypatch, "resources=VCPU:1,MEMORY_MB:512&limit=4", "1.39")
    assert used == [True] and fast == general and walked == [None]
    # Full roots are passed over, and the walk goes on to the next ones.
    with app.ledger.write() as t:
        t.delete_provider(child)
    for c, p in enumerate(roots[:3]):
        _call(app, "/allocations/" + str(uuid.UUID(int=0xC000 + c)), method="PUT",
              body={"allocations": {p.uuid: {"resources": {"VCPU": 4}}}, "project_id": "p",
                    "user_id": "u", "consumer_generation": None, "consumer_type": "INSTANCE"})
    walked.clear()
    fast, general, used = _both(app, monkeypatch, "resources=VCPU:1&limit=2", "1.39")
    assert fast == general and walked[0] is not None
    assert [list(ar["allocations"]) for ar in json.loads(fast)["allocation_requests"]] == [
        [roots[3].uuid], [roots[4].uuid]]
