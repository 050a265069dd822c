import pytest
import sqlalchemy as sa

from novella.network import api, models

INST = "11111111-2222-4333-8444-555555555555"


@pytest.fixture
def net(db_url):
    return api.NetworkAPI(db_url)


@pytest.fixture
def private(net, admin):
    return net.ensure_default_network(admin)


def bindings(net, port_id):
    with net.db.session() as s:
        rows = s.scalars(sa.select(models.PortBinding).where(models.PortBinding.port_id == port_id)).all()
        return sorted((b.host, b.status) for b in rows)


def assert_one_active_per_port(net):
    with net.db.session() as s:
        counts = dict(s.execute(sa.select(models.Port.id, sa.func.count(models.PortBinding.host))
                                .outerjoin(models.PortBinding, sa.and_(
                                    models.PortBinding.port_id == models.Port.id,
                                    models.PortBinding.status == "ACTIVE"))
                                .group_by(models.Port.id)).all())
    assert set(counts.values()) <= {1}, counts


def test_default_network_and_subnet(net, admin, private):
    assert private["name"] == "private" and private["shared"]
    [subnet] = net.list_subnets(admin, network_id=private["id"])
    assert subnet["cidr"] == "10.0.0.0/24" and subnet["gateway_ip"] == "10.0.0.1"
    assert subnet["allocation_pools"] == [{"start": "10.0.0.2", "end": "10.0.0.254"}]
    assert net.ensure_default_network(admin)["id"] == private["id"]
    assert len(net.list_networks(admin)) == 1


def test_network_visibility(net, ctxt, admin, private):
    from novella.context import RequestContext
    net.create_network(RequestContext(project_id="p2"), "p2-net", cidr="10.1.0.0/24")
    mine = net.create_network(ctxt, "p1-net")
    assert sorted(n["name"] for n in net.list_networks(ctxt)) == ["p1-net", "private"]
    assert len(net.list_networks(admin)) == 3
    assert net.get_network(ctxt, mine["id"])["subnets"] == []
    with pytest.raises(api.NetworkNotFound):
        net.get_network(ctxt, "nope")


def test_port_create_allocates_unique_ips(net, ctxt, private):
    ports = [net.create_port(ctxt, {"network_id": private["id"]}) for _ in range(5)]
    ips = [p["fixed_ips"][0]["ip_address"] for p in ports]
    assert ips == ["10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5", "10.0.0.6"]
    assert len({p["mac_address"] for p in ports}) == 5
    p = ports[0]
    assert p["status"] == "DOWN" and p["binding:host_id"] == "" and p["binding:vif_type"] == "unbound"
    assert p["resource_request"] is None and p["project_id"] == "p1"
    net.delete_port(ctxt, ports[1]["id"])
    again = net.create_port(ctxt, {"network_id": private["id"]})
    assert again["fixed_ips"][0]["ip_address"] == "10.0.0.3"
    with net.db.session() as s:
        rows = s.execute(sa.select(models.IPAllocation.ip_address)).scalars().all()
    assert len(rows) == len(set(rows)) == 5


def test_fixed_ip_request_and_conflict(net, ctxt, private):
    p = net.create_port(ctxt, {"network_id": private["id"], "fixed_ips": [{"ip_address": "10.0.0.50"}]})
    assert p["fixed_ips"][0]["ip_address"] == "10.0.0.50"
    with pytest.raises(api.IpAddressAlreadyAllocated):
        net.create_port(ctxt, {"network_id": private["id"], "fixed_ips": [{"ip_address": "10.0.0.50"}]})
    assert len(net.list_ports(ctxt)) == 1


def test_subnet_exhaustion(net, ctxt):
    tiny = net.create_network(ctxt, "tiny", cidr="192.168.0.0/30")  # one usable address
    net.create_port(ctxt, {"network_id": tiny["id"]})
    with pytest.raises(api.IpAddressGenerationFailure):
        net.create_port(ctxt, {"network_id": tiny["id"]})
    assert len(net.list_ports(ctxt, network_id=tiny["id"])) == 1


def test_list_ports_filters(net, ctxt, private):
    a = net.create_port(ctxt, {"network_id": private["id"], "device_id": "vm-a",
                               "device_owner": "compute:nova", "binding:host_id": "h1"})
    b = net.create_port(ctxt, {"network_id": private["id"], "device_id": "vm-b"})
    assert [p["id"] for p in net.list_ports(ctxt, device_id="vm-a")] == [a["id"]]
    assert [p["id"] for p in net.list_ports(ctxt, {"binding:host_id": "h1"})] == [a["id"]]
    assert {p["id"] for p in net.list_ports(ctxt, device_id=["vm-a", "vm-b"])} == {a["id"], b["id"]}
    assert a["status"] == "ACTIVE" and a["binding:vif_type"] == "ovs"


def test_update_port_binding_fields(net, ctxt, private):
    p = net.create_port(ctxt, {"network_id": private["id"]})
    p = net.update_port(ctxt, p["id"], {"binding:host_id": "h1", "binding:profile": {"a": 1},
                                        "device_id": "vm", "device_owner": "compute:nova"})
    assert p["binding:host_id"] == "h1" and p["binding:profile"] == {"a": 1}
    assert p["status"] == "ACTIVE"
    p = net.update_port(ctxt, p["id"], {"binding:host_id": "h2"})
    assert p["binding:host_id"] == "h2" and p["binding:profile"] == {"a": 1}
    assert bindings(net, p["id"]) == [("h2", "ACTIVE")]
    with pytest.raises(api.NetworkError):
        net.update_port(ctxt, p["id"], {"mac_address": "x"})


def test_extended_bindings_exactly_one_active(net, ctxt, private):
    p = net.create_port(ctxt, {"network_id": private["id"], "binding:host_id": "src"})
    b = net.create_port_binding(ctxt, p["id"], "dst", profile={"allocation": "rp-dst"})
    assert b["status"] == "INACTIVE" and b["vif_type"] == "ovs"
    assert bindings(net, p["id"]) == [("dst", "INACTIVE"), ("src", "ACTIVE")]
    with pytest.raises(api.PortBindingAlreadyExists):
        net.create_port_binding(ctxt, p["id"], "dst")
    assert net.get_port(ctxt, p["id"])["binding:host_id"] == "src"
    net.activate_port_binding(ctxt, p["id"], "dst")
    assert bindings(net, p["id"]) == [("dst", "ACTIVE"), ("src", "INACTIVE")]
    port = net.get_port(ctxt, p["id"])
    assert port["binding:host_id"] == "dst" and port["binding:profile"] == {"allocation": "rp-dst"}
    with pytest.raises(api.PortBindingAlreadyActive):
        net.activate_port_binding(ctxt, p["id"], "dst")
    net.delete_port_binding(ctxt, p["id"], "src")
    assert bindings(net, p["id"]) == [("dst", "ACTIVE")]
    assert [x["host"] for x in net.list_port_bindings(ctxt, p["id"])] == ["dst"]
    with pytest.raises(api.PortBindingNotFound):
        net.get_port_binding(ctxt, p["id"], "src")
    net.delete_port_binding(ctxt, p["id"], "dst")
    assert bindings(net, p["id"]) == [("", "ACTIVE")]
    assert net.get_port(ctxt, p["id"])["binding:vif_type"] == "unbound"
    assert_one_active_per_port(net)


def test_binding_an_unbound_port_makes_it_active(net, ctxt, private):
    p = net.create_port(ctxt, {"network_id": private["id"]})
    assert net.create_port_binding(ctxt, p["id"], "h1")["status"] == "ACTIVE"
    assert bindings(net, p["id"]) == [("h1", "ACTIVE")]


def test_failed_binding_changes_nothing(net, ctxt, private):
    net.unbindable_hosts.add("bad")
    p = net.create_port(ctxt, {"network_id": private["id"], "binding:host_id": "h1"})
    with pytest.raises(api.PortBindingFailed):
        net.create_port_binding(ctxt, p["id"], "bad")
    assert bindings(net, p["id"]) == [("h1", "ACTIVE")]


def test_allocate_and_deallocate_for_instance(net, ctxt, admin, private):
    given = net.create_port(ctxt, {"network_id": private["id"]})
    info = net.allocate_for_instance(ctxt, INST, "p1", [{"network_id": private["id"]},
                                                        {"port_id": given["id"]}], host="h1")
    assert [v["id"] for v in info][1] == given["id"]
    vif = info[0]
    assert vif["network"]["label"] == "private" and vif["type"] == "ovs"
    assert vif["network"]["subnets"][0]["ips"][0]["address"].startswith("10.0.0.")
    assert vif["active"] and not vif["preserve_on_delete"] and info[1]["preserve_on_delete"]
    ports = net.list_ports(admin, device_id=INST)
    assert {p["binding:host_id"] for p in ports} == {"h1"}
    assert {p["device_owner"] for p in ports} == {"compute:nova"}
    by_id = lambda vifs: sorted(vifs, key=lambda v: v["id"])  # noqa: E731
    assert by_id(net.get_instance_nw_info(ctxt, INST)) == by_id(info)
    # The ports the caller names (the user's) are released, the others deleted.
    net.deallocate_for_instance(ctxt, INST, {given["id"]})
    remaining = net.list_ports(admin)
    assert [p["id"] for p in remaining] == [given["id"]]
    assert remaining[0]["device_id"] == "" and remaining[0]["binding:host_id"] == ""
    with net.db.session() as s:
        assert s.scalar(sa.select(sa.func.count()).select_from(models.IPAllocation)) == 1
    assert_one_active_per_port(net)


def test_allocate_is_all_or_nothing(net, ctxt, admin, private):
    other = net.create_port(ctxt, {"network_id": private["id"], "device_id": "someone-else"})
    with pytest.raises(api.PortInUse):
        net.allocate_for_instance(ctxt, INST, "p1", [{"network_id": private["id"]},
                                                     {"port_id": other["id"]}], host="h1")
    net.unbindable_hosts.add("bad")
    with pytest.raises(api.PortBindingFailed):
        net.allocate_for_instance(ctxt, INST, "p1", [{"uuid": private["id"]}], host="bad")
    assert [p["id"] for p in net.list_ports(admin)] == [other["id"]]


def test_auto_network_choice(net, ctxt, private):
    info = net.allocate_for_instance(ctxt, INST, "p1", None, host="h1")
    assert [v["network"]["id"] for v in info] == [private["id"]]
    assert net.allocate_for_instance(ctxt, "other", "p1", "none") == []
    net.create_network(ctxt, "second")
    with pytest.raises(api.NetworkAmbiguous):
        net.allocate_for_instance(ctxt, "third", "p1", "auto")


def test_move_with_extended_bindings(net, ctxt, private):
    net.allocate_for_instance(ctxt, INST, "p1", [{"network_id": private["id"]}] * 2, host="src")
    ports = [v["id"] for v in net.get_instance_nw_info(ctxt, INST)]
    made = net.bind_ports_to_host(ctxt, INST, "dst", port_profiles={ports[0]: {"allocation": "rp"}})
    assert {b["status"] for b in made.values()} == {"INACTIVE"}
    assert made[ports[0]]["profile"] == {"allocation": "rp"}
    # A second attempt must not half-succeed.
    with pytest.raises(api.PortBindingAlreadyExists):
        net.bind_ports_to_host(ctxt, INST, "dst")
    info = net.activate_port_bindings(ctxt, INST, "dst")
    assert {v["network"]["id"] for v in info} == {private["id"]}
    for pid in ports:
        assert bindings(net, pid) == [("dst", "ACTIVE"), ("src", "INACTIVE")]
    net.delete_port_bindings(ctxt, INST, "src")
    for pid in ports:
        assert bindings(net, pid) == [("dst", "ACTIVE")]
    assert_one_active_per_port(net)


def test_revert_drops_destination_bindings(net, ctxt, private):
    net.allocate_for_instance(ctxt, INST, "p1", None, host="src")
    net.bind_ports_to_host(ctxt, INST, "dst")
    net.delete_port_bindings(ctxt, INST, "dst")
    [vif] = net.get_instance_nw_info(ctxt, INST)
    assert bindings(net, vif["id"]) == [("src", "ACTIVE")]


def test_migrate_instance_finish(net, ctxt, private):
    net.allocate_for_instance(ctxt, INST, "p1", None, host="src")
    net.setup_networks_on_host(ctxt, INST, "dst")
    [vif] = net.migrate_instance_finish(ctxt, INST, "dst")
    assert bindings(net, vif["id"]) == [("dst", "ACTIVE")]
    assert vif["profile"] == {}
    net.bind_ports_to_host(ctxt, INST, "third")
    [vif] = net.migrate_instance_finish(ctxt, INST, "third")
    assert bindings(net, vif["id"]) == [("dst", "INACTIVE"), ("third", "ACTIVE")]


def test_setup_networks_on_host(net, ctxt, private):
    net.allocate_for_instance(ctxt, INST, "p1", None, host="src")
    net.setup_networks_on_host(ctxt, INST, "dst")
    [vif] = net.get_instance_nw_info(ctxt, INST)
    assert vif["profile"] == {"migrating_to": "dst"}
    net.bind_ports_to_host(ctxt, INST, "dst")
    net.setup_networks_on_host(ctxt, INST, "dst", teardown=True)
    [vif] = net.get_instance_nw_info(ctxt, INST)
    assert vif["profile"] == {} and bindings(net, vif["id"]) == [("src", "ACTIVE")]


def test_qos_resource_request(net, ctxt):
    policy = net.create_qos_policy(ctxt, "gold", [
        {"type": "minimum_bandwidth", "min_kbps": 1000, "direction": "egress"},
        {"type": "minimum_bandwidth", "min_kbps": 2000, "direction": "ingress"},
        {"type": "minimum_packet_rate", "min_kpps": 100, "direction": "any"}])
    phys = net.create_network(ctxt, "phys", cidr="10.9.0.0/24", physical_network="physnet0")
    p = net.create_port(ctxt, {"network_id": phys["id"], "qos_policy_id": policy["id"]})
    rr = p["resource_request"]
    bw, pps = rr["request_groups"]
    assert bw["resources"] == {"NET_BW_EGR_KILOBIT_PER_SEC": 1000, "NET_BW_IGR_KILOBIT_PER_SEC": 2000}
    assert bw["required"] == ["CUSTOM_PHYSNET_PHYSNET0", "CUSTOM_VNIC_TYPE_NORMAL"]
    assert pps == {"id": pps["id"], "required": ["CUSTOM_VNIC_TYPE_NORMAL"],
                   "resources": {"NET_PACKET_RATE_KILOPACKET_PER_SEC": 100}}
    assert rr["same_subtree"] == [bw["id"], pps["id"]]
    # Stable ids: the allocation mapping in binding:profile refers to them.
    assert net.get_port(ctxt, p["id"])["resource_request"] == rr
    net.allocate_for_instance(ctxt, INST, "p1", [{"port": p["id"]}], host="h1",
                              port_profiles={p["id"]: {"allocation": {bw["id"]: "rp1", pps["id"]: "rp2"}}})
    groups = net.get_requested_resource_groups(ctxt, instance_uuid=INST)
    assert [(g["suffix"], g["requester_id"]) for g in groups] == [(bw["id"], p["id"]), (pps["id"], p["id"])]
    assert groups[0]["required_traits"] == bw["required"]
    assert net.get_port(ctxt, p["id"])["binding:profile"]["allocation"][bw["id"]] == "rp1"


def test_delete_network_in_use(net, ctxt, private):
    net.create_port(ctxt, {"network_id": private["id"]})
    with pytest.raises(api.NetworkInUse):
        net.delete_network(ctxt, private["id"])
    empty = net.create_network(ctxt, "empty", cidr="10.5.0.0/24")
    net.delete_network(ctxt, empty["id"])
    with pytest.raises(api.NetworkNotFound):
        net.get_network(ctxt, empty["id"])


def test_other_projects_private_resources_are_not_found(net, ctxt, admin, private):
    from novella.context import RequestContext
    other = RequestContext(user_id="u2", project_id="p2")
    theirs = net.create_network(other, "theirs", cidr="10.7.0.0/24")
    port = net.create_port(other, {"network_id": theirs["id"]})
    with pytest.raises(api.NetworkNotFound):
        net.get_network(ctxt, theirs["id"])
    with pytest.raises(api.PortNotFound):
        net.get_port(ctxt, port["id"])
    assert net.get_network(ctxt, private["id"])["shared"]
    assert net.get_port(admin, port["id"])["project_id"] == "p2"


def _ips(ports):
    return [p["fixed_ips"][0]["ip_address"] for p in ports]


def test_free_addresses_past_the_first_lookup_window_lowest_first(net, ctxt):
    wide = net.create_network(ctxt, "wide", cidr="10.9.0.0/24")
    count = api.FREE_IP_WINDOW + 10
    ports = [net.create_port(ctxt, {"network_id": wide["id"]}) for _ in range(count)]
    assert _ips(ports) == [f"10.9.0.{i}" for i in range(2, 2 + count)]
    # An address asked for ahead of the search is stepped over.
    ahead = f"10.9.0.{2 + count}"
    net.create_port(ctxt, {"network_id": wide["id"], "fixed_ips": [{"ip_address": ahead}]})
    assert _ips([net.create_port(ctxt, {"network_id": wide["id"]})]) == [f"10.9.0.{3 + count}"]
    # Freed addresses go out again, lowest first.
    for p in (ports[70], ports[3]):
        net.delete_port(ctxt, p["id"])
    again = [net.create_port(ctxt, {"network_id": wide["id"]}) for _ in range(3)]
    assert _ips(again) == ["10.9.0.5", "10.9.0.72", f"10.9.0.{4 + count}"]
    with net.db.session() as s:
        rows = s.scalars(sa.select(models.IPAllocation.ip_address)).all()
    assert len(rows) == len(set(rows)) == count + 3


def test_two_services_on_one_database_never_hand_out_an_address_twice(db_url, ctxt):
    a, b = api.NetworkAPI(db_url), api.NetworkAPI(db_url)
    shared = a.create_network(ctxt, "shared", cidr="10.8.0.0/24")

    def port(svc):
        return svc.create_port(ctxt, {"network_id": shared["id"]})

    first = [port(a) for _ in range(3)] + [port(b) for _ in range(3)] + [port(a)]
    assert _ips(first) == [f"10.8.0.{i}" for i in range(2, 9)]
    b.delete_port(ctxt, first[1]["id"])     # 10.8.0.3, freed by the other service
    mine = port(a)
    a.delete_port(ctxt, mine["id"])         # a deletion here: the search starts over
    assert _ips([port(a)]) == ["10.8.0.3"]
    with a.db.session() as s:
        rows = s.scalars(sa.select(models.IPAllocation.ip_address)).all()
    assert len(rows) == len(set(rows)) == 7


def test_an_address_asked_for_is_kept_in_one_spelling(net, ctxt):
    v6 = net.create_network(ctxt, "v6", cidr="2001:db8::/64")
    p = net.create_port(ctxt, {"network_id": v6["id"],
                               "fixed_ips": [{"ip_address": "2001:DB8:0::0002"}]})
    assert _ips([p]) == ["2001:db8::2"]
    with pytest.raises(api.IpAddressAlreadyAllocated):
        net.create_port(ctxt, {"network_id": v6["id"], "fixed_ips": [{"ip_address": "2001:db8::2"}]})
    # (::1 is the gateway; the pool starts at ::2.)
    auto = [net.create_port(ctxt, {"network_id": v6["id"]}) for _ in range(2)]
    assert _ips(auto) == ["2001:db8::3", "2001:db8::4"]


def test_a_full_pool_above_the_search_start_still_finds_what_another_service_freed(db_url, ctxt):
    a, b = api.NetworkAPI(db_url), api.NetworkAPI(db_url)
    tiny = a.create_network(ctxt, "tiny", cidr="192.168.5.0/29")   # .2 - .6
    ports = [a.create_port(ctxt, {"network_id": tiny["id"]}) for _ in range(5)]
    assert _ips(ports) == [f"192.168.5.{i}" for i in range(2, 7)]
    b.delete_port(ctxt, ports[1]["id"])
    assert _ips([a.create_port(ctxt, {"network_id": tiny["id"]})]) == ["192.168.5.3"]
    with pytest.raises(api.IpAddressGenerationFailure):
        a.create_port(ctxt, {"network_id": tiny["id"]})
