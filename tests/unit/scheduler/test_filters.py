import pytest

from novella.scheduler import filters
from novella.scheduler.filters import _ops


def _filter(conf, name):
    (f,) = filters.load_filters(conf, [name])
    return f


def test_every_filter_is_discovered_by_class_name():
    assert {"ComputeFilter", "AvailabilityZoneFilter", "AggregateInstanceExtraSpecsFilter",
            "AggregateMultiTenancyIsolation", "ImagePropertiesFilter",
            "ServerGroupAffinityFilter", "ServerGroupAntiAffinityFilter",
            "ComputeCapabilitiesFilter"} <= set(filters.all_filters())


def test_unknown_filter_is_refused(conf):
    with pytest.raises(ValueError, match="NoSuchFilter"):
        filters.load_filters(conf, ["NoSuchFilter"])


def test_dotted_names_are_accepted(conf):
    (f,) = filters.load_filters(conf, ["nova.scheduler.filters.compute_filter.ComputeFilter"])
    assert type(f).__name__ == "ComputeFilter"


def test_compute_filter(conf, host):
    f = _filter(conf, "ComputeFilter")
    assert f.host_passes(host(), {})
    assert not f.host_passes(host(disabled=True), {})
    assert not f.host_passes(host(up=False), {})
    assert not f.host_passes(host(forced_down=True), {})


def test_availability_zone_filter(conf, host):
    f = _filter(conf, "AvailabilityZoneFilter")
    in_az1 = host(aggregates=[{"availability_zone": "az1"}])
    assert f.host_passes(in_az1, {"availability_zone": "az1"})
    assert f.host_passes(in_az1, {"availability_zone": "az1:h1"})
    assert not f.host_passes(in_az1, {"availability_zone": "nova"})
    assert f.host_passes(host(), {"availability_zone": "nova"})  # the default zone
    assert f.host_passes(in_az1, {})


def test_aggregate_instance_extra_specs_filter(conf, host):
    f = _filter(conf, "AggregateInstanceExtraSpecsFilter")
    ssd = host(aggregates=[{"disk": "ssd", "cores": "16"}])
    spec = {"flavor": {"extra_specs": {"aggregate_instance_extra_specs:disk": "ssd"}}}
    assert f.host_passes(ssd, spec)
    assert not f.host_passes(host(), spec)
    assert f.host_passes(ssd, {"flavor": {"extra_specs": {"cores": ">= 8"}}})
    assert not f.host_passes(ssd, {"flavor": {"extra_specs": {"cores": ">= 32"}}})
    # Other scopes belong to other filters or to placement.
    assert f.host_passes(host(), {"flavor": {"extra_specs": {"resources:VCPU": "1",
                                                             "capabilities:x": "y"}}})


def test_aggregate_multitenancy_isolation(conf, host):
    f = _filter(conf, "AggregateMultiTenancyIsolation")
    isolated = host(aggregates=[{"filter_tenant_id": "p1,p2"}, {"filter_tenant_id_2": "p3"}])
    assert f.host_passes(isolated, {"project_id": "p2"})
    assert f.host_passes(isolated, {"project_id": "p3"})
    assert not f.host_passes(isolated, {"project_id": "p9"})
    assert f.host_passes(host(), {"project_id": "p9"})


def test_image_properties_filter(conf, host):
    f = _filter(conf, "ImagePropertiesFilter")
    h = host()  # x86_64, hypervisor "fake" version 1.0.0
    def props(**p):
        return {"image": {"properties": p}}
    assert f.host_passes(h, props())
    assert f.host_passes(h, props(hw_architecture="x86_64", img_hv_type="FAKE", hw_vm_mode="hvm"))
    assert f.host_passes(h, props(architecture="amd64"))
    assert not f.host_passes(h, props(hw_architecture="aarch64"))
    assert not f.host_passes(h, props(img_hv_type="kvm"))
    assert not f.host_passes(h, props(hw_vm_mode="xen"))
    assert f.host_passes(h, props(img_hv_requested_version=">=1.0"))
    assert not f.host_passes(h, props(img_hv_requested_version=">= 2.1"))


def test_server_group_affinity_filter(conf, host):
    f = _filter(conf, "ServerGroupAffinityFilter")
    group = {"policy": "affinity", "hosts": ["h1"]}
    assert f.host_passes(host("h1"), {"instance_group": group})
    assert not f.host_passes(host("h2"), {"instance_group": group})
    assert f.host_passes(host("h2"), {"instance_group": {"policy": "affinity", "hosts": []}})
    assert f.host_passes(host("h2"), {"instance_group": {"policy": "anti-affinity", "hosts": ["h1"]}})


def test_server_group_anti_affinity_filter(conf, host):
    f = _filter(conf, "ServerGroupAntiAffinityFilter")
    group = {"policy": "anti-affinity", "hosts": ["h1"]}
    assert not f.host_passes(host("h1"), {"instance_group": group})
    assert f.host_passes(host("h2"), {"instance_group": group})
    two = dict(group, rules={"max_server_per_host": 2})
    assert f.host_passes(host("h1"), {"instance_group": two})
    assert not f.host_passes(host("h1"), {"instance_group": dict(two, hosts=["h1", "h1"])})
    assert f.host_passes(host("h1"), {"instance_group": {"policy": "affinity", "hosts": ["h1"]}})


def test_compute_capabilities_filter(conf, host):
    f = _filter(conf, "ComputeCapabilitiesFilter")
    h = host()
    def spec(**es):
        return {"flavor": {"extra_specs": es}}
    assert f.host_passes(h, spec(**{"capabilities:hypervisor_type": "s== fake"}))
    assert f.host_passes(h, spec(**{"capabilities:cpu_info:arch": "x86_64"}))
    assert f.host_passes(h, spec(**{"capabilities:vcpus_total": ">= 8"}))
    assert not f.host_passes(h, spec(**{"capabilities:cpu_info:arch": "aarch64"}))
    assert not f.host_passes(h, spec(**{"capabilities:no_such_thing": "1"}))
    assert f.host_passes(h, spec(**{"hw:cpu_policy": "dedicated"}))


@pytest.mark.parametrize("value,req,expected", [
    ("ssd", "ssd", True), ("ssd", "hdd", False),
    ("16", "= 8", True), ("4", "= 8", False), ("8", "== 8", True), ("8", "!= 8", False),
    ("8", "<= 8", True), ("abc", "s== abc", True), ("abc", "s< abd", True),
    ("a b c", "<in> b", True), ("a b c", "<all-in> a c", True), ("a b", "<all-in> a z", False),
    ("x", "<or> y <or> x", True), ("z", "<or> y <or> x", False), (None, "1", False),
])
def test_extra_spec_operators(value, req, expected):
    assert _ops.match(value, req) is expected


# Each filter's ``applies``: False only where host_passes would pass every host.
APPLIES = [
    ("AvailabilityZoneFilter", {}, False),
    ("AvailabilityZoneFilter", {"availability_zone": "az1"}, True),
    ("AggregateInstanceExtraSpecsFilter", {"flavor": {"extra_specs": {"hw:cpu_policy": "x"}}}, False),
    ("AggregateInstanceExtraSpecsFilter", {"flavor": {"extra_specs": {"ssd": "true"}}}, True),
    ("AggregateInstanceExtraSpecsFilter",
     {"flavor": {"extra_specs": {"aggregate_instance_extra_specs:ssd": "true"}}}, True),
    ("ComputeCapabilitiesFilter", {"flavor": {"extra_specs": {"ssd": "true"}}}, False),
    ("ComputeCapabilitiesFilter", {"flavor": {"extra_specs": {"capabilities:hypervisor_type": "x"}}}, True),
    ("ImagePropertiesFilter", {"image": {"properties": {"os_distro": "x"}}}, False),
    ("ImagePropertiesFilter", {"image": {"properties": {"hw_architecture": "aarch64"}}}, True),
    ("ServerGroupAffinityFilter", {"instance_group": {"policy": "affinity", "hosts": []}}, False),
    ("ServerGroupAffinityFilter", {"instance_group": {"policy": "affinity", "hosts": ["h1"]}}, True),
    ("ServerGroupAntiAffinityFilter", {"instance_group": {"policy": "affinity"}}, False),
    ("ServerGroupAntiAffinityFilter", {"instance_group": {"policy": "anti-affinity"}}, True),
    ("ComputeFilter", {}, True),
]


@pytest.mark.parametrize("name,spec,expected", APPLIES)
def test_filter_applies_only_when_it_can_refuse_a_host(conf, host, name, spec, expected):
    f = _filter(conf, name)
    assert f.applies(spec) is expected
    if not expected:  # skipping it must be the same as asking it
        hosts = [host(), host(aggregates=[{"availability_zone": "az9", "ssd": "false"}],
                          cpu_info={"arch": "x86_64"})]
        assert all(f.host_passes(h, spec) for h in hosts)


def test_compute_filter_in_one_pass_keeps_what_host_passes_keeps(conf, host):
    f = _filter(conf, "ComputeFilter")
    hosts = [host(f"h{i}", disabled=i % 2 == 0, up=i % 3 != 0, forced_down=i % 5 == 0)
             for i in range(30)]
    assert f.filter_all(hosts, {}) == [h for h in hosts if f.host_passes(h, {})]

    class Nothing(type(f)):
        def host_passes(self, host_state, spec):
            return False
    assert Nothing(conf).filter_all(hosts, {}) == []
