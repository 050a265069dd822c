"""The unmodified `openstack` CLI makes ports with guaranteed bandwidth against `novella up`
and moves their server through every kind of move a user asks for.

A QoS policy with minimum-bandwidth rules each way, a `normal` port and a
`direct` (SR-IOV) port with it, on the demo's physnet1 network; one server
with both ports is live-migrated, resized (and confirmed), shelved and
unshelved. After each step `openstack resource provider usage show` of every
provider of the server's host and of the host it left agrees with what
Placement's API says, and the bandwidth is where the server is: the normal
port's on the host's Open vSwitch physnet1 provider, the direct port's on one
of its `NIC Switch agent` PF providers, whose VF the port's binding names.
"""
from tests.e2e import test_openstack_cli as cli
from tests.e2e.test_openstack_cli import _flavor_name, _server_status, _wait

cloud = cli.cloud  # a `novella up` of this module's own

BW = 100000  # kbps each way
TINY = {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}


def _usages(conn, rp):
    resp = conn.placement.get(f"/resource_providers/{rp}/usages", microversion="1.9")
    assert resp.status_code == 200, resp.text
    return resp.json()["usages"]


def _check(cloud, conn, sid, ports, rps, hosts):
    """The CLI's usages of every provider of ``hosts`` against placement's; the
    server's allocation on its host and its ports' providers; the direct port's VF
    on the PF its bandwidth comes from. Returns the server's host."""
    host = conn.compute.get_server(sid).compute_host
    watched = [(name, rp) for name, rp in rps.items()
               if name.partition(":")[0] in set(hosts) | {host}
               and not name.endswith(("agent", ":tunnel"))]
    shown = cloud.parallel(*[("resource", "provider", "usage", "show", rp) for _, rp in watched],
                           ("resource", "provider", "allocation", "show", sid),
                           *[("port", "show", p) for p in ports])
    for (name, rp), usage in zip(watched, shown):
        assert {u["resource_class"]: u["usage"] for u in usage} == _usages(conn, rp), name
    allocs = {a["resource_provider"]: a["resources"] for a in shown[len(watched)]}
    normal, direct = shown[-2:]
    ovs = rps[f"{host}:Open vSwitch agent:physnet1"]
    [pf_rp] = direct["binding_profile"]["allocation"].values()
    pf_name = next(n for n, u in rps.items() if u == pf_rp)
    assert pf_name.startswith(f"{host}:NIC Switch agent:"), pf_name
    both = {"NET_BW_EGR_KILOBIT_PER_SEC": BW, "NET_BW_IGR_KILOBIT_PER_SEC": BW}
    assert allocs[ovs] == both and allocs[pf_rp] == both
    assert set(allocs) == {rps[host], ovs, pf_rp}
    assert list(normal["binding_profile"]["allocation"].values()) == [ovs]
    assert normal["binding_host_id"] == direct["binding_host_id"] == host
    assert direct["binding_vif_type"] == "hw_veb"
    assert direct["binding_profile"]["physical_network"] == "physnet1"
    # The VF's PF (the simulated NICs: ens1 on bus 3b, ens2 on bus 3c) is the provider's.
    pf = {"0000:3b": "ens1", "0000:3c": "ens2"}[direct["binding_profile"]["pci_slot"][:7]]
    assert pf_name == f"{host}:NIC Switch agent:{pf}"
    return host


def test_bandwidth_ports_through_the_moves_with_the_openstack_cli(cloud):
    osc, conn = cloud.osc, cloud.connect()
    osc("network", "qos", "policy", "create", "--share", "e2e-min-bw")
    for direction in ("--egress", "--ingress"):
        osc("network", "qos", "rule", "create", "--type", "minimum-bandwidth",
            "--min-kbps", str(BW), direction, "e2e-min-bw")
    ports = [osc("port", "create", "--network", "physnet1-net", "--qos-policy", "e2e-min-bw",
                 "--vnic-type", vnic, f"e2e-{vnic}")["id"] for vnic in ("normal", "direct")]
    direct = osc("port", "show", ports[1])
    assert direct["binding_vnic_type"] == "direct"
    assert direct["resource_request"]["request_groups"][0]["required"] == [
        "CUSTOM_PHYSNET_PHYSNET1", "CUSTOM_VNIC_TYPE_DIRECT"]

    sid = osc("--os-compute-api-version", "2.72", "server", "create", "--image", "cirros",
              "--flavor", "m1.tiny", "--nic", f"port-id={ports[0]}",
              "--nic", f"port-id={ports[1]}", "e2e-sriov-vm")["id"]
    _server_status(conn, sid, "ACTIVE")
    rps = {p["name"]: p["uuid"] for p in osc("resource", "provider", "list")}
    host = _check(cloud, conn, sid, ports, rps, [])

    osc("--os-compute-api-version", "2.30", "server", "migrate", "--live-migration", sid,
        fmt=False)
    _wait("live migration", lambda: conn.compute.get_server(sid).compute_host != host
          and not conn.compute.get_server(sid).task_state)
    moved = _check(cloud, conn, sid, ports, rps, [host])

    osc("server", "resize", "--flavor", "m1.small", sid, fmt=False)
    _server_status(conn, sid, "VERIFY_RESIZE")
    osc("server", "resize", "confirm", sid, fmt=False)
    _server_status(conn, sid, "ACTIVE")
    resized = _check(cloud, conn, sid, ports, rps, [moved])
    assert _flavor_name(osc("server", "show", sid)) == "m1.small"

    osc("server", "shelve", sid, fmt=False)
    _server_status(conn, sid, "SHELVED_OFFLOADED")
    assert [a for a in osc("resource", "provider", "allocation", "show", sid)] == []
    left = [rp for name, rp in rps.items() if name.partition(":")[0] == resized
            and not name.endswith(("agent", ":tunnel"))]
    for rp, usage in zip(left, cloud.parallel(*[("resource", "provider", "usage", "show", rp)
                                                for rp in left])):
        assert {u["resource_class"]: u["usage"] for u in usage} == _usages(conn, rp)
        assert not any(u["usage"] for u in usage), rp
    osc("server", "unshelve", sid, fmt=False)
    _server_status(conn, sid, "ACTIVE")
    _check(cloud, conn, sid, ports, rps, [resized])

    osc("server", "delete", sid, fmt=False)
    _wait("server deleted", lambda: conn.compute.find_server(sid) is None)
    for rp in rps.values():
        assert not any(_usages(conn, rp).values())
    for port in ports:
        osc("port", "delete", port, fmt=False)
    osc("network", "qos", "policy", "delete", "e2e-min-bw", fmt=False)
