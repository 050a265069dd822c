import pytest

from novella.scheduler import weighers


def _order(conf, names, hosts, spec=None):
    ws = weighers.load_weighers(conf, names)
    return [h.host for _, h in weighers.weigh_hosts(ws, hosts, spec or {})]


def test_all_enables_every_weigher(conf):
    names = {type(w).__name__ for w in weighers.load_weighers(conf, ["all"])}
    assert names == {"RAMWeigher", "CPUWeigher", "DiskWeigher", "BuildFailureWeigher",
                     "ServerGroupSoftAffinityWeigher", "ServerGroupSoftAntiAffinityWeigher",
                     "CrossCellWeigher"}


def test_unknown_weigher_is_refused(conf):
    with pytest.raises(ValueError):
        weighers.load_weighers(conf, ["NoSuchWeigher"])


def test_ram_weigher_spreads_and_negative_multiplier_stacks(conf, host):
    hosts = [host("small", free_ram_mb=1024), host("big", free_ram_mb=4096)]
    assert _order(conf, ["RAMWeigher"], hosts) == ["big", "small"]
    conf.set_override("ram_weight_multiplier", -1.0, group="filter_scheduler")
    assert _order(conf, ["RAMWeigher"], hosts) == ["small", "big"]


def test_cpu_weigher(conf, host):
    hosts = [host("busy", vcpus_used=7), host("idle", vcpus_used=0)]
    assert _order(conf, ["CPUWeigher"], hosts) == ["idle", "busy"]


def test_disk_weigher(conf, host):
    hosts = [host("full", free_disk_mb=1024), host("empty", free_disk_mb=102400)]
    assert _order(conf, ["DiskWeigher"], hosts) == ["empty", "full"]


def test_build_failure_weigher_outweighs_free_ram(conf, host):
    hosts = [host("flaky", free_ram_mb=8192, failed_builds=2), host("ok", free_ram_mb=1024)]
    assert _order(conf, ["RAMWeigher", "BuildFailureWeigher"], hosts) == ["ok", "flaky"]


def test_soft_affinity_weighers(conf, host):
    hosts = [host("h1"), host("h2")]
    soft = {"instance_group": {"policy": "soft-affinity", "hosts": ["h2", "h2"]}}
    assert _order(conf, ["ServerGroupSoftAffinityWeigher"], hosts, soft) == ["h2", "h1"]
    anti = {"instance_group": {"policy": "soft-anti-affinity", "hosts": ["h1"]}}
    assert _order(conf, ["ServerGroupSoftAntiAffinityWeigher"], hosts, anti) == ["h2", "h1"]
    # Each only acts on its own policy.
    assert _order(conf, ["ServerGroupSoftAffinityWeigher"], hosts, anti) == ["h1", "h2"]


def test_aggregate_metadata_overrides_multiplier(conf, host):
    hosts = [host("h1", free_ram_mb=1024, aggregates=[{"ram_weight_multiplier": "-1.0"}]),
             host("h2", free_ram_mb=4096)]
    w = weighers.load_weighers(conf, ["RAMWeigher"])[0]
    assert w.weight_multiplier(hosts[0]) == -1.0 and w.weight_multiplier(hosts[1]) == 1.0


def test_equal_weights_keep_input_order(conf, host):
    hosts = [host(f"h{i}") for i in range(5)]
    assert _order(conf, ["all"], hosts) == [f"h{i}" for i in range(5)]


def test_cross_cell_weigher_prefers_the_source_cell_unless_negative(conf, host):
    hosts = [host("other", cell_uuid="cell-2"), host("home", cell_uuid="cell-1")]
    spec = {"requested_destination": {"allow_cross_cell_move": True,
                                      "source_cell_uuid": "cell-1"}}
    assert _order(conf, ["CrossCellWeigher"], hosts, spec) == ["home", "other"]
    # Not a move that may cross cells: no preference (placement's order kept).
    assert _order(conf, ["CrossCellWeigher"], hosts, {}) == ["other", "home"]
    conf.set_override("cross_cell_move_weight_multiplier", -1.0, group="filter_scheduler")
    try:
        assert _order(conf, ["CrossCellWeigher"], hosts, spec) == ["other", "home"]
    finally:
        conf.clear_override("cross_cell_move_weight_multiplier", group="filter_scheduler")


@pytest.mark.parametrize("name,spec,expected", [
    ("ServerGroupSoftAffinityWeigher", {}, False),
    ("ServerGroupSoftAffinityWeigher", {"instance_group": {"policy": "soft-affinity"}}, True),
    ("ServerGroupSoftAntiAffinityWeigher", {"instance_group": {"policy": "soft-affinity"}}, False),
    ("ServerGroupSoftAntiAffinityWeigher", {"instance_group": {"policy": "soft-anti-affinity"}}, True),
    ("CrossCellWeigher", {"requested_destination": {"source_cell_uuid": "c1"}}, False),
    ("CrossCellWeigher", {"requested_destination": {"source_cell_uuid": "c1",
                                                    "allow_cross_cell_move": True}}, True),
    ("RAMWeigher", {}, True),
])
def test_weigher_applies_only_when_hosts_can_differ(conf, host, name, spec, expected):
    (w,) = weighers.load_weighers(conf, [name])
    assert w.applies(spec) is expected
    if not expected:  # every host weighs the same: skipping changes nothing
        hosts = [host("a", cell_uuid="c1"), host("b", cell_uuid="c2")]
        assert len({w.weigh(h, spec) for h in hosts}) == 1


def _per_host_order(ws, hosts, spec):
    """The order the per-host loop gives: weigh for each host, normalised,
    summed, sorted on the negated totals (stable)."""
    totals = [0.0] * len(hosts)
    for w in ws:
        if not w.applies(spec):
            continue
        values = [float(w.weigh(h, spec)) for h in hosts]
        lo, hi = min(values), max(values)
        if hi == lo:
            continue
        for i, h in enumerate(hosts):
            m = w.weight_multiplier(h)
            totals[i] += m * ((values[i] - lo) / (hi - lo))
    return [hosts[i] for i in sorted(range(len(hosts)), key=lambda i: -totals[i])]


def test_one_pass_weighing_orders_as_the_per_host_loop(conf, host):
    import random
    rng = random.Random(7)
    ws = weighers.load_weighers(conf, ["all"])
    for trial in range(30):
        hosts = [host(f"h{i}", free_ram_mb=rng.choice([512, 1024, 4096]),
                      free_disk_mb=rng.choice([1024, 2048]),
                      vcpus_used=rng.choice([0, 1, 7]),
                      cpu_allocation_ratio=rng.choice([1.0, 4.0]),
                      failed_builds=rng.choice([0, 0, 0, 2]) if trial % 2 else 0,
                      aggregates=[{"ram_weight_multiplier": "-1.0"}] if rng.random() < 0.2
                      else ())
                 for i in range(rng.randint(1, 12))]
        expected = _per_host_order(ws, hosts, {})
        assert weighers.weighed_hosts(ws, hosts, {}) == expected
        assert [h for _, h in weighers.weigh_hosts(ws, hosts, {})] == expected


def test_a_subclass_overriding_weigh_is_asked_per_host(conf, host):
    from novella.scheduler.weighers.ram import RAMWeigher

    class Inverse(RAMWeigher):
        def weigh(self, host_state, spec):
            return -host_state.free_ram_mb
    hosts = [host("small", free_ram_mb=1024), host("big", free_ram_mb=4096)]
    assert [h.host for h in weighers.weighed_hosts([Inverse(conf)], hosts, {})] == [
        "small", "big"]
