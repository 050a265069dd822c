"""Ports with a QoS policy, made through the network API, on `novella up`'s defaults.

One cell of two simulated hosts with what `novella up` sets (bandwidth on
physnet1 and the tunnel, packet rate) and its demo QoS data. A server booted
with a port whose policy guarantees bandwidth holds that bandwidth on its
host's provider for the port's network, and the port's binding profile names
that provider; replacing the bound port's policy changes the allocation.
"""
import json

import pytest
import webob

from novella.allinone import DEMO_PHYSNET_NETWORK, DEMO_QOS_POLICY, AllInOne
from novella.cmd import up
from novella.conf import CONF
from novella.virt import simulated
from tests.functional.system.conftest import Cloud

TINY = {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}
EGR, IGR = "NET_BW_EGR_KILOBIT_PER_SEC", "NET_BW_IGR_KILOBIT_PER_SEC"
DEMO_BW = {EGR: 100000, IGR: 100000}
TEN_GBIT = 10000000


class QosCloud(Cloud):
    def net(self, method, path, body=None, token="admin:admin"):
        req = webob.Request.blank(path, method=method)
        req.headers["X-Auth-Token"] = token
        if body is not None:
            req.body = json.dumps(body).encode()
            req.content_type = "application/json"
        resp = req.get_response(self.aio.network_api_app)
        return resp.status_int, (json.loads(resp.body) if resp.body else None)

    def names(self):
        return {rp["uuid"]: rp["name"] for rp in self.aio.placement.list_resource_providers()}

    def held(self, consumer):
        names = self.names()
        return {names[rp]: a["resources"] for rp, a in self.allocations(consumer).items()}

    def port(self, port_id):
        status, body = self.net("GET", f"/v2.0/ports/{port_id}")
        assert status == 200, body
        return body["port"]

    def profile_providers(self, port_id):
        """{group id: provider name} of the port's binding profile ``allocation``."""
        names = self.names()
        allocation = self.port(port_id)["binding:profile"].get("allocation") or {}
        return {group: names[rp] for group, rp in allocation.items()}


@pytest.fixture
def cloud(tmp_path):
    saved = {(group, name): CONF[group][name]
             for group, options in up.UP_DEFAULTS.items() for name in options}
    up.set_defaults(CONF)
    aio = AllInOne(str(tmp_path / "data"), cells=1, hosts_per_cell=2, log=None,
                   qos_demo=True).start()
    yield QosCloud(aio)
    aio.stop()
    simulated.clear_faults()
    for (group, name), value in saved.items():
        CONF.set_default(name, value, group=group)


def _policy(cloud, name, **rules):
    """A shared policy with a minimum-bandwidth rule per direction given in kbps."""
    status, body = cloud.net("POST", "/v2.0/qos/policies",
                             {"policy": {"name": name, "shared": True}})
    assert status == 201, body
    for direction, kbps in rules.items():
        status, rule = cloud.net("POST", f"/v2.0/qos/policies/{body['policy']['id']}/"
                                 "minimum_bandwidth_rules",
                                 {"minimum_bandwidth_rule": {"min_kbps": kbps,
                                                             "direction": direction}})
        assert status == 201, rule
    return body["policy"]["id"]


def _port(cloud, network_name, policy_id):
    status, nets = cloud.net("GET", f"/v2.0/networks?name={network_name}")
    status, body = cloud.net("POST", "/v2.0/ports", {"port": {
        "network_id": nets["networks"][0]["id"], "qos_policy_id": policy_id}})
    assert status == 201, body
    return body["port"]


def test_up_hosts_report_bandwidth_and_the_demo_has_qos_data(cloud):
    usages = cloud.usages()
    for host in cloud.aio.computes:
        agent = f"{host}:Open vSwitch agent"
        assert {agent, f"{agent}:physnet1", f"{agent}:tunnel"} <= set(usages)
        rp = {n: u for u, n in cloud.names().items()}
        inv = cloud.aio.placement.get_inventories(rp[f"{agent}:physnet1"])[1]
        assert {rc: i["total"] for rc, i in inv.items()} == \
            {EGR: TEN_GBIT, IGR: TEN_GBIT}
        assert cloud.aio.placement.get_traits(rp[f"{agent}:tunnel"])[1] == \
            ["CUSTOM_NETWORK_TUNNEL_PROVIDER", "CUSTOM_VNIC_TYPE_NORMAL"]
        assert cloud.aio.placement.get_inventories(rp[agent])[1][
            "NET_PACKET_RATE_KILOPACKET_PER_SEC"]["total"] == 1000
    status, body = cloud.net("GET", f"/v2.0/qos/policies?name={DEMO_QOS_POLICY}")
    [policy] = body["policies"]
    assert policy["shared"] and sorted((r["type"], r["direction"], r["min_kbps"])
                                       for r in policy["rules"]) == \
        [("minimum_bandwidth", "egress", 100000), ("minimum_bandwidth", "ingress", 100000)]
    status, body = cloud.net("GET", f"/v2.0/networks?name={DEMO_PHYSNET_NETWORK}")
    assert body["networks"][0]["provider:physical_network"] == "physnet1"


def test_a_server_with_a_qos_port_holds_its_bandwidth(cloud):
    policy = cloud.aio.demo_qos_policy["id"]
    port = _port(cloud, DEMO_PHYSNET_NETWORK, policy)
    [group] = port["resource_request"]["request_groups"]
    sid = cloud.boot(networks=[{"port": port["id"]}])
    server = cloud.server(sid)
    assert server["status"] == "ACTIVE", server
    host = server["OS-EXT-SRV-ATTR:host"]
    bw = f"{host}:Open vSwitch agent:physnet1"
    assert cloud.held(sid) == {host: TINY, bw: DEMO_BW}
    assert cloud.profile_providers(port["id"]) == {group["id"]: bw}
    assert cloud.port(port["id"])["binding:host_id"] == host
    assert cloud.usages()[bw] == DEMO_BW

    # A port on the tunnelled network takes its bandwidth from the tunnel's provider.
    tun_port = _port(cloud, "private", policy)
    sid2 = cloud.boot(name="vm2", networks=[{"port": tun_port["id"]}])
    host2 = cloud.server(sid2)["OS-EXT-SRV-ATTR:host"]
    assert cloud.held(sid2) == {host2: TINY, f"{host2}:Open vSwitch agent:tunnel": DEMO_BW}

    # Deleting the server frees the bandwidth and unbinds the port it was given.
    assert cloud.api("DELETE", f"/servers/{sid}")[0] == 204
    cloud.aio.wait_idle()
    assert cloud.allocations(sid) == {}
    assert cloud.usages()[bw] == {EGR: 0, IGR: 0}
    assert cloud.port(port["id"])["binding:profile"] == {}


def test_replacing_a_bound_ports_policy_changes_its_allocation(cloud):
    port = _port(cloud, DEMO_PHYSNET_NETWORK, cloud.aio.demo_qos_policy["id"])
    sid = cloud.boot(networks=[{"port": port["id"]}])
    host = cloud.server(sid)["OS-EXT-SRV-ATTR:host"]
    bw = f"{host}:Open vSwitch agent:physnet1"

    # The rules of a policy a bound port holds an allocation for do not change.
    policy = cloud.net("GET", f"/v2.0/qos/policies/{cloud.aio.demo_qos_policy['id']}")[1]
    rule = policy["policy"]["rules"][0]
    status, body = cloud.net("PUT", f"/v2.0/qos/policies/{rule['qos_policy_id']}/"
                             f"minimum_bandwidth_rules/{rule['id']}",
                             {"minimum_bandwidth_rule": {"min_kbps": 1}})
    assert (status, body["NeutronError"]["type"]) == (409, "QosPolicyInUse")

    # More than the provider has: refused, nothing changes.
    greedy = _policy(cloud, "greedy", egress=TEN_GBIT + 1)
    status, body = cloud.net("PUT", f"/v2.0/ports/{port['id']}",
                             {"port": {"qos_policy_id": greedy}})
    assert (status, body["NeutronError"]["type"]) == (409, "QosPlacementAllocationUpdateConflict")
    assert cloud.held(sid) == {host: TINY, bw: DEMO_BW}
    assert cloud.port(port["id"])["qos_policy_id"] == cloud.aio.demo_qos_policy["id"]

    # Egress only, and more of it: the allocation and the profile's group follow.
    gold = _policy(cloud, "gold", egress=300000)
    status, body = cloud.net("PUT", f"/v2.0/ports/{port['id']}", {"port": {"qos_policy_id": gold}})
    assert status == 200, body
    [group] = body["port"]["resource_request"]["request_groups"]
    assert cloud.held(sid) == {host: TINY, bw: {EGR: 300000}}
    assert cloud.profile_providers(port["id"]) == {group["id"]: bw}
    assert cloud.usages()[bw] == {EGR: 300000, IGR: 0}

    # No policy: the bandwidth is given back.
    status, body = cloud.net("PUT", f"/v2.0/ports/{port['id']}", {"port": {"qos_policy_id": None}})
    assert status == 200 and body["port"]["resource_request"] is None
    assert cloud.held(sid) == {host: TINY}
    assert cloud.profile_providers(port["id"]) == {}


def test_a_config_file_overrides_the_up_defaults(tmp_path):
    """`novella up --config-file`: options read as the separate services read them."""
    conf = tmp_path / "nova.conf"
    conf.write_text("[simulated]\nresource_provider_bandwidths = physnet9:5000:6000\n"
                    "sriov_nics = eth7:2:3000:3000\n"
                    "[pci]\ndevice_spec = {\"devname\": \"eth7\", \"physical_network\": \"physnet9\"}\n")
    saved = {(group, name): CONF[group][name]
             for group, options in up.UP_DEFAULTS.items() for name in options}
    up.set_defaults(CONF)
    aio = AllInOne(str(tmp_path / "data"), cells=1, hosts_per_cell=1, log=None,
                   config_files=[str(conf)]).start()
    try:
        names = {rp["name"] for rp in aio.placement.list_resource_providers()}
        assert names == {"cell1-host1", "cell1-host1:Open vSwitch agent",
                         "cell1-host1:Open vSwitch agent:physnet9",
                         "cell1-host1:NIC Switch agent", "cell1-host1:NIC Switch agent:eth7"}
    finally:
        aio.stop()
        for (group, name), value in saved.items():
            CONF.set_default(name, value, group=group)
        CONF([], project="nova", default_config_files=[])
