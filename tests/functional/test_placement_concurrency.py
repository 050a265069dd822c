"""Racing writers against one provider: the ledger must neither over-commit
nor lose an update.

- 8 threads race to allocate against a provider with room for exactly K
  consumers (SQLite, PostgreSQL, MariaDB; Novella embedded in-process, one
  database connection per thread), and race read-modify-write updates of
  inventory, traits and aggregates guarded by the provider generation.
- 4 processes race the same way through a 4-worker gunicorn serving Novella's
  placement on PostgreSQL, so the writes come from separate processes with
  separate database connections.

Assertions are on state only: allocations by consumer, usages, generations.
"""
import multiprocessing
import threading
import uuid

import pytest

from novella.placement import client as pc
from tests.functional import placement_targets as targets

THREADS = 8
K = 5                 # consumers that fit
ATTEMPTS = 3          # consumers each thread tries to place (24 > K)
PROCS = 4
PROC_K = 10
PROC_ATTEMPTS = 6     # 24 > PROC_K


def _db_url(request, backend, tmp_path):
    if backend == "sqlite":
        return f"sqlite:///{tmp_path}/placement.db"
    return request.getfixturevalue(f"{backend}_url")


def _claim(client, rp, consumer, project, user, resources):
    """Try to place one consumer; True if placed, False if the provider is full.

    A provider-generation race (409 concurrent_update) is retried; running
    out of capacity is a plain 409 and final.
    """
    for _ in range(200):
        try:
            client.put_allocations(consumer, {rp: resources}, project, user)
            return True
        except pc.ConcurrentUpdate as exc:
            assert not exc.consumer_generation, exc
            continue
        except pc.Conflict:
            return False
    raise AssertionError("allocation kept colliding for 200 attempts")


def _add_item(client, rp, kind, item):
    """Read-modify-write one trait or aggregate, re-reading on a generation race."""
    for _ in range(200):
        if kind == "traits":
            gen, items = client.get_traits(rp)
            setter = client.set_traits
        else:
            gen, items = client.get_aggregates(rp)
            setter = client.set_aggregates
        try:
            setter(rp, items + [item], generation=gen)
            return
        except pc.ConcurrentUpdate:
            continue
    raise AssertionError(f"{kind} update kept colliding for 200 attempts")


def _run_threads(n, fn):
    barrier = threading.Barrier(n)
    results, errors = [None] * n, []

    def body(i):
        try:
            barrier.wait(30)
            results[i] = fn(i)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads), "a racing thread hung"
    assert not errors, errors
    return results


def _provider(client, vcpu):
    rp = str(uuid.uuid4())
    client.ensure_resource_provider(rp, "race-" + rp[:8])
    client.set_inventory(rp, {"VCPU": {"total": vcpu, "allocation_ratio": 1.0},
                              "MEMORY_MB": {"total": 1024 * vcpu, "allocation_ratio": 1.0}})
    return rp


def _assert_full(client, rp, placed, refused, capacity, expected_gen, project):
    assert len(placed) == capacity
    held = client.get_provider_allocations(rp)
    assert sorted(held) == sorted(placed)
    for consumer in placed:
        assert client.get_allocations(consumer)["allocations"][rp]["resources"] == \
            {"VCPU": 1, "MEMORY_MB": 512}
    for consumer in refused:
        assert client.get_allocations(consumer)["allocations"] == {}
    gen, usages = client.get_provider_usages(rp)
    assert usages == {"VCPU": capacity, "MEMORY_MB": 512 * capacity}
    # Every successful write bumped the generation exactly once.
    assert gen == expected_gen
    assert client.get_usages(project)["INSTANCE"] == {
        "consumer_count": capacity, "VCPU": capacity, "MEMORY_MB": 512 * capacity}


def _race_in(client_factory):
    setup = client_factory()
    rp = _provider(setup, K)
    gen_before = setup.get_resource_provider(rp)["generation"]
    project, user = str(uuid.uuid4()), str(uuid.uuid4())
    clients = [client_factory() for _ in range(THREADS)]

    def place(i):
        out = []
        for _ in range(ATTEMPTS):
            consumer = str(uuid.uuid4())
            out.append((consumer, _claim(clients[i], rp, consumer, project, user,
                                         {"VCPU": 1, "MEMORY_MB": 512})))
        return out

    outcomes = [o for r in _run_threads(THREADS, place) for o in r]
    placed = [c for c, ok in outcomes if ok]
    refused = [c for c, ok in outcomes if not ok]
    assert len(outcomes) == THREADS * ATTEMPTS
    _assert_full(setup, rp, placed, refused, K, gen_before + K, project)

    # Inventory: everyone writes against the same generation; one wins.
    gen = setup.get_resource_provider(rp)["generation"]

    def write_inventory(i):
        try:
            clients[i].set_inventory(rp, {"VCPU": {"total": 100 + i, "allocation_ratio": 1.0},
                                          "MEMORY_MB": {"total": 1024 * K, "allocation_ratio": 1.0}},
                                     generation=gen)
            return i
        except pc.ConcurrentUpdate:
            return None

    winners = [i for i in _run_threads(THREADS, write_inventory) if i is not None]
    assert len(winners) == 1
    new_gen, inv = setup.get_inventories(rp)
    assert new_gen == gen + 1 and inv["VCPU"]["total"] == 100 + winners[0]
    assert setup.get_provider_usages(rp)[1]["VCPU"] == K

    # Traits and aggregates: read-modify-write with retries loses nothing.
    traits = [f"CUSTOM_RACE_{i}" for i in range(THREADS)]
    setup.ensure_traits(traits)
    aggs = [str(uuid.uuid4()) for _ in range(THREADS)]
    _run_threads(THREADS, lambda i: _add_item(clients[i], rp, "traits", traits[i]))
    _run_threads(THREADS, lambda i: _add_item(clients[i], rp, "aggregates", aggs[i]))
    t_gen, got_traits = setup.get_traits(rp)
    assert got_traits == sorted(traits)
    a_gen, got_aggs = setup.get_aggregates(rp)
    assert got_aggs == sorted(aggs)
    assert t_gen == a_gen == new_gen + 2 * THREADS
    for c in clients + [setup]:
        c.close()


@pytest.mark.parametrize("backend", [
    "sqlite",
    pytest.param("postgresql", marks=pytest.mark.postgresql),
    pytest.param("mysql", marks=pytest.mark.mysql),
])
def test_thread_race_novella(request, backend, tmp_path):
    app = targets.novella_app(_db_url(request, backend, tmp_path))
    _race_in(lambda: pc.PlacementClient(app=app, token="admin"))


def test_thread_race_live_endpoint(tmp_path):
    """Over HTTP: the endpoint in NOVELLA_PLACEMENT_TEST_URL (e.g. the reference's),
    else Novella's placement served by gunicorn on SQLite."""
    if targets.LIVE_URL:
        _race_in(targets.live_client)
        return
    with targets.NovellaServer(f"sqlite:///{tmp_path}/live.db", tmp_path, workers=1) as server:
        _race_in(lambda: pc.PlacementClient(endpoint=server.url, token="admin"))


# -- several processes through a multi-worker server ------------------------

def _process_body(url, rp, project, user, start, attempts):
    client = pc.PlacementClient(endpoint=url, token="admin")
    start.wait(60)
    out = []
    for _ in range(attempts):
        consumer = str(uuid.uuid4())
        out.append((consumer, _claim(client, rp, consumer, project, user,
                                     {"VCPU": 1, "MEMORY_MB": 512})))
    _add_item(client, rp, "traits", f"CUSTOM_PROC_{uuid.uuid4().hex[:6].upper()}")
    return out


@pytest.mark.postgresql
def test_process_race_postgresql(postgresql_url, tmp_path):
    with targets.NovellaServer(postgresql_url, tmp_path, workers=4) as server:
        setup = pc.PlacementClient(endpoint=server.url, token="admin")
        rp = _provider(setup, PROC_K)
        gen_before = setup.get_resource_provider(rp)["generation"]
        project, user = str(uuid.uuid4()), str(uuid.uuid4())
        ctx = multiprocessing.get_context("spawn")
        with ctx.Manager() as manager:
            start = manager.Barrier(PROCS)
            with ctx.Pool(PROCS) as pool:
                pending = [pool.apply_async(_process_body, (server.url, rp, project, user,
                                                            start, PROC_ATTEMPTS))
                           for _ in range(PROCS)]
                outcomes = [o for p in pending for o in p.get(180)]
        assert len(outcomes) == PROCS * PROC_ATTEMPTS
        placed = [c for c, ok in outcomes if ok]
        refused = [c for c, ok in outcomes if not ok]
        # K allocation writes and one trait write per process.
        _assert_full(setup, rp, placed, refused, PROC_K, gen_before + PROC_K + PROCS, project)
        assert len(setup.get_traits(rp)[1]) == PROCS
        setup.close()
