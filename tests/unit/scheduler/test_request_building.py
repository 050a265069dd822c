from novella.scheduler.utils import ResourceRequest, flavor_disk_gb


def _flavor(**extra_specs):
    return {"vcpus": 2, "memory_mb": 2048, "root_gb": 20, "ephemeral_gb": 5, "swap": 1536,
            "extra_specs": extra_specs}


def _params(spec, **kw):
    return ResourceRequest.from_request_spec(spec, **kw).query_params()


def test_flavor_gives_standard_resources():
    assert _params({"flavor": _flavor()}, limit=1000) == [
        ("resources", "DISK_GB:27,MEMORY_MB:2048,VCPU:2"), ("limit", "1000")]


def test_boot_from_volume_drops_root_disk_only():
    assert flavor_disk_gb(_flavor(), is_bfv=True) == 7
    spec = {"flavor": {"vcpus": 1, "memory_mb": 512, "root_gb": 10}, "is_bfv": True}
    assert _params(spec) == [("resources", "MEMORY_MB:512,VCPU:1")]


def test_resources_extra_specs_override_add_and_remove():
    spec = {"flavor": _flavor(**{"resources:VCPU": "0", "resources:PCPU": "2",
                                 "resources:DISK_GB": "0", "resources:CUSTOM_GPU": "1"})}
    assert _params(spec) == [("resources", "CUSTOM_GPU:1,MEMORY_MB:2048,PCPU:2")]


def test_traits_required_and_forbidden_from_flavor_and_image():
    spec = {"flavor": _flavor(**{"trait:HW_CPU_X86_AVX2": "required",
                                 "trait:CUSTOM_SLOW": "forbidden",
                                 "trait:CUSTOM_IGNORED": "maybe"}),
            "image": {"properties": {"trait:CUSTOM_IMG": "required", "hw_disk_bus": "scsi"}}}
    params = dict(_params(spec))
    assert params["required"] == "!CUSTOM_SLOW,HW_CPU_X86_AVX2,CUSTOM_IMG"


def test_granular_groups_and_group_policy():
    spec = {"flavor": _flavor(**{"resources1:CUSTOM_FPGA": "1", "trait1:CUSTOM_FAST": "required",
                                 "resources2:CUSTOM_FPGA": "1", "group_policy": "isolate"})}
    assert _params(spec)[1:] == [
        ("resources1", "CUSTOM_FPGA:1"), ("required1", "CUSTOM_FAST"),
        ("resources2", "CUSTOM_FPGA:1"), ("group_policy", "isolate")]


def test_group_policy_defaults_to_none_with_several_groups():
    spec = {"flavor": _flavor(),
            "requested_resources": [
                {"suffix": "_p1", "resources": {"NET_BW_EGR_KILOBIT_PER_SEC": 1000},
                 "required_traits": ["CUSTOM_PHYSNET_A"], "forbidden_traits": ["CUSTOM_X"]},
                {"suffix": "_p2", "resources": {"NET_BW_IGR_KILOBIT_PER_SEC": 10},
                 "member_of": [["agg-a", "agg-b"]]}]}
    assert _params(spec)[1:] == [
        ("resources_p1", "NET_BW_EGR_KILOBIT_PER_SEC:1000"), ("required_p1", "CUSTOM_PHYSNET_A,!CUSTOM_X"),
        ("resources_p2", "NET_BW_IGR_KILOBIT_PER_SEC:10"), ("member_of_p2", "in:agg-a,agg-b"),
        ("group_policy", "none")]


def test_one_granular_group_needs_no_policy():
    spec = {"flavor": _flavor(),
            "requested_resources": [{"suffix": "1", "resources": {"CUSTOM_X": 1}}]}
    assert "group_policy" not in dict(_params(spec))


def test_member_of_and_in_tree_from_destination():
    spec = {"flavor": {"vcpus": 1, "memory_mb": 512}}
    params = _params(spec, member_of=[["a1", "a2"], ["a3"]], in_tree="node-uuid")
    assert params == [("resources", "MEMORY_MB:512,VCPU:1"), ("member_of", "in:a1,a2"),
                      ("member_of", "a3"), ("in_tree", "node-uuid")]


def test_total_resources_sums_groups():
    spec = {"flavor": _flavor(**{"resources1:VCPU": "1"})}
    assert ResourceRequest.from_request_spec(spec).total_resources() == {
        "VCPU": 3, "MEMORY_MB": 2048, "DISK_GB": 27}


def test_a_ports_groups_share_a_subtree():
    both = ["g-bw", "g-pps"]
    spec = {"flavor": _flavor(), "requested_resources": [
        {"suffix": "g-bw", "requester_id": "p1", "resources": {"NET_BW_EGR_KILOBIT_PER_SEC": 10},
         "same_subtree": both},
        {"suffix": "g-pps", "requester_id": "p1",
         "resources": {"NET_PACKET_RATE_KILOPACKET_PER_SEC": 5}, "same_subtree": both},
        {"suffix": "g2", "requester_id": "p2", "resources": {"NET_BW_EGR_KILOBIT_PER_SEC": 1},
         "same_subtree": ["g2"]}]}
    params = _params(spec)
    assert params.count(("same_subtree", "g-bw,g-pps")) == 1
    assert [p for p in params if p[0] == "same_subtree"] == [("same_subtree", "g-bw,g-pps")]
