"""The plan proves it fits before anything moves: every server of the plan
counted together in Placement's candidates, with server groups, zones, ports'
bandwidth, quotas and the cross-cell policy respected. A plan that cannot fit
names the servers and why, and nothing moves."""
import pytest

from novella.context import get_admin_context

BIG = "big"     # a flavor of which a simulated host (1000 GB of disk) holds two


def _big(cloud):
    return cloud.flavor(BIG, 1, 512, 500)


def _on(cloud, host, name, flavor="1", **extra):
    return cloud.boot(name, flavor=flavor, availability_zone=f"nova:{host}", **extra)


def _moves(cloud, plan):
    return {a["input_parameters"]["resource_id"]: a for a in cloud.actions(plan["uuid"])
            if a["action_type"] in ("migrate", "resize")}


def _nothing_happened(cloud, where):
    """No host disabled, every server where it was, no migration started."""
    for sid, host in where.items():
        assert cloud.host_of(sid) == host
        assert cloud.migrations(sid) == []
    for host in cloud.aio.computes:
        assert not cloud.service(host).disabled


def test_cell_drain_plan_fits_and_names_each_destination(dcloud):
    where = {}
    for i in range(4):
        host = f"cell1-host{1 + i % 2}"
        where[_on(dcloud, host, f"s{i}")] = host
    audit = dcloud.audit("cell_drain", source_cell="cell1", target_cells=["cell2"])
    assert audit["state"] == "SUCCEEDED", audit
    [plan] = dcloud.plan_of(audit)
    moves = _moves(dcloud, plan)
    assert set(moves) == set(where)
    for sid, action in moves.items():
        params = action["input_parameters"]
        assert params["source_node"] == where[sid]
        assert params["destination_cell"] == "cell2"
        assert params["migration_type"] == "cold"    # leaving the cell: no live migration
    _nothing_happened(dcloud, where)


def test_no_two_servers_planned_into_the_last_slot(dcloud):
    """cell2 has room for two big servers in all (one each host after a filler);
    three are on cell1: the third is named as not fitting, nothing moves."""
    _big(dcloud)
    fillers = [_on(dcloud, f"cell2-host{i}", f"filler{i}", BIG) for i in (1, 2)]
    where = {}
    for i, host in enumerate(["cell1-host1", "cell1-host1", "cell1-host2"]):
        where[_on(dcloud, host, f"big{i}", BIG)] = host
    audit = dcloud.audit("cell_drain", source_cell="cell1")
    assert audit["state"] == "FAILED"
    message = audit["status_message"]
    assert message.startswith("1 of 3 servers cannot be moved; nothing was moved.")
    unfit = [sid for sid in where if sid in message]
    assert len(unfit) == 1 and "no room left" in message
    assert dcloud.plan_of(audit) == []
    _nothing_happened(dcloud, where)
    assert {dcloud.host_of(f) for f in fillers} == {"cell2-host1", "cell2-host2"}


def test_two_that_fit_go_to_different_last_slots(dcloud):
    _big(dcloud)
    for i in (1, 2):
        _on(dcloud, f"cell2-host{i}", f"filler{i}", BIG)
    servers = [_on(dcloud, "cell1-host1", f"big{i}", BIG) for i in range(2)]
    audit = dcloud.audit("cell_drain", source_cell="cell1")
    assert audit["state"] == "SUCCEEDED", audit["status_message"]
    [plan] = dcloud.plan_of(audit)
    moves = _moves(dcloud, plan)
    assert sorted(moves[s]["input_parameters"]["destination_node"] for s in servers) == [
        "cell2-host1", "cell2-host2"]


def test_anti_affinity_holds_across_cells(dcloud):
    group = dcloud.group("apart", "anti-affinity")
    members = [dcloud.boot_in_group(f"m{i}", group, availability_zone=f"nova:cell1-host{i + 1}")
               for i in range(2)]
    audit = dcloud.audit("cell_drain", source_cell="cell1")
    assert audit["state"] == "SUCCEEDED", audit["status_message"]
    [plan] = dcloud.plan_of(audit)
    moves = _moves(dcloud, plan)
    dests = [moves[m]["input_parameters"]["destination_node"] for m in members]
    assert len(set(dests)) == 2


def test_anti_affinity_that_cannot_hold_is_named(make_dcloud):
    cloud = make_dcloud(hosts_per_cell=3)
    cloud.allow_cross_cell()
    group = cloud.group("apart", "anti-affinity")
    members = [cloud.boot_in_group(f"m{i}", group, availability_zone=f"nova:cell1-host{i + 1}")
               for i in range(3)]
    # Two of cell2's three hosts are disabled: the three members cannot stay apart.
    for host in ("cell2-host2", "cell2-host3"):
        status, body = cloud.api("PUT", f"/os-services/{cloud.service(host).uuid}",
                                 {"status": "disabled"}, version="2.53")
        assert status == 200, body
    audit = cloud.audit("cell_drain", source_cell="cell1")
    assert audit["state"] == "FAILED"
    assert "2 of 3 servers cannot be moved" in audit["status_message"]
    assert "ServerGroupAntiAffinityFilter" in audit["status_message"] or \
        "ComputeFilter" in audit["status_message"]
    assert all(cloud.host_of(m) == f"cell1-host{i + 1}" for i, m in enumerate(members))


def test_zone_is_kept(make_dcloud):
    cloud = make_dcloud(hosts_per_cell=2)
    cloud.allow_cross_cell()
    status, agg = cloud.api("POST", "/os-aggregates", {"aggregate": {
        "name": "zone-a", "availability_zone": "zone-a"}})
    assert status == 200, agg
    for host in ("cell1-host1", "cell2-host2"):
        status, body = cloud.api("POST", f"/os-aggregates/{agg['aggregate']['id']}/action",
                                 {"add_host": {"host": host}})
        assert status == 200, body
    in_zone = cloud.boot("z", availability_zone="zone-a")
    assert cloud.host_of(in_zone) == "cell1-host1"
    audit = cloud.audit("cell_drain", source_cell="cell1")
    assert audit["state"] == "SUCCEEDED", audit["status_message"]
    [plan] = cloud.plan_of(audit)
    assert _moves(cloud, plan)[in_zone]["input_parameters"]["destination_node"] == "cell2-host2"


def test_bandwidth_ports_are_counted_together(make_dcloud):
    """Each host has 10000 kbps each way on physnet0; every port asks 4000.
    cell2's hosts hold a 4000 port each: one more port fits per host, so of
    three servers leaving cell1 one is named, for its bandwidth."""
    cloud = make_dcloud(simulated={"resource_provider_bandwidths": ["physnet0:10000:10000"]})
    cloud.allow_cross_cell()
    net_api, ctxt = cloud.aio.network_api, get_admin_context()
    rules = [{"type": "minimum_bandwidth", "min_kbps": 4000, "direction": d}
             for d in ("egress", "ingress")]
    policy = net_api.create_qos_policy(ctxt, "bw4000", rules)
    net = net_api.create_network(ctxt, "phys", cidr="10.20.0.0/24", shared=True,
                                 physical_network="physnet0")

    def with_port(host, name):
        port = net_api.create_port(ctxt, {"network_id": net["id"],
                                          "qos_policy_id": policy["id"]})
        return _on(cloud, host, name, networks=[{"port": port["id"]}])
    for i in (1, 2):
        with_port(f"cell2-host{i}", f"there{i}")
    leaving = [with_port(h, f"l{i}") for i, h in enumerate(
        ["cell1-host1", "cell1-host1", "cell1-host2"])]
    audit = cloud.audit("cell_drain", source_cell="cell1")
    assert audit["state"] == "FAILED"
    assert audit["status_message"].startswith("1 of 3 servers cannot be moved")
    assert sum(sid in audit["status_message"] for sid in leaving) == 1
    # Without the third, the two left are planned onto different hosts.
    status, _ = cloud.api("DELETE", f"/servers/{leaving[2]}")
    cloud.aio.wait_idle()
    audit = cloud.audit("cell_drain", source_cell="cell1")
    assert audit["state"] == "SUCCEEDED", audit["status_message"]
    [plan] = cloud.plan_of(audit)
    moves = _moves(cloud, plan)
    assert sorted(moves[s]["input_parameters"]["destination_node"] for s in leaving[:2]) == [
        "cell2-host1", "cell2-host2"]


def test_cross_cell_needs_the_callers_policy(make_dcloud):
    cloud = make_dcloud()     # the cross-cell policy is left at its default: nobody
    sid = _on(cloud, "cell1-host1", "s")
    audit = cloud.audit("cell_drain", source_cell="cell1")
    assert audit["state"] == "FAILED"
    assert sid in audit["status_message"]
    assert cloud.plan_of(audit) == []
    # Inside its cell the same server may move: a host maintenance plans a live migration.
    audit = cloud.audit("host_maintenance", maintenance_node="cell1-host1")
    assert audit["state"] == "SUCCEEDED", audit["status_message"]
    [plan] = cloud.plan_of(audit)
    move = _moves(cloud, plan)[sid]["input_parameters"]
    assert move["migration_type"] == "live" and move["destination_node"] == "cell1-host2"


def test_host_maintenance_moves_stopped_servers_cold_to_the_backup(dcloud):
    running = _on(dcloud, "cell1-host1", "r")
    stopped = _on(dcloud, "cell1-host1", "s")
    status, _ = dcloud.action(stopped, {"os-stop": None})
    dcloud.aio.wait_idle()
    audit = dcloud.audit("host_maintenance", maintenance_node="cell1-host1",
                         backup_node="cell2-host1")
    assert audit["state"] == "SUCCEEDED", audit["status_message"]
    [plan] = dcloud.plan_of(audit)
    moves = _moves(dcloud, plan)
    assert {sid: (m["input_parameters"]["migration_type"],
                  m["input_parameters"]["destination_node"]) for sid, m in moves.items()} == {
        running: ("cold", "cell2-host1"), stopped: ("cold", "cell2-host1")}


def test_zone_migration_priority_and_pairs(dcloud):
    first = _on(dcloud, "cell1-host2", "second-host")
    other = _on(dcloud, "cell1-host1", "first-host")
    audit = dcloud.audit("zone_migration", compute_nodes=[
        {"src_node": "cell1-host1", "dst_node": "cell1-host2"},
        {"src_node": "cell1-host2", "dst_node": "cell1-host1"}],
        priority={"compute_node": ["cell1-host2", "cell1-host1"]})
    # Each source is also the other's destination, and sources receive nothing.
    assert audit["state"] == "FAILED"
    assert first in audit["status_message"] and other in audit["status_message"]
    audit = dcloud.audit("zone_migration", compute_nodes=[
        {"src_node": "cell1-host1", "dst_node": "cell2-host2"},
        {"src_node": "cell1-host2"}], priority={"compute_node": ["cell1-host2"]})
    assert audit["state"] == "SUCCEEDED", audit["status_message"]
    [plan] = dcloud.plan_of(audit)
    moves = [a for a in dcloud.actions(plan["uuid"]) if a["action_type"] == "migrate"]
    assert [m["input_parameters"]["resource_id"] for m in moves] == [first, other]
    assert moves[1]["input_parameters"]["destination_node"] == "cell2-host2"


@pytest.mark.parametrize("params, message", [
    ({"source_cell": "cell9"}, "Cell cell9 could not be found"),
    ({"source_cell": "cell1", "target_cells": ["cell7"]}, "Cell cell7 could not be found"),
    ({"source_cell": "cell1", "flavor_map": {"m1.tiny": "nope"}},
     "Flavor nope could not be found"),
    ({"source_aggregate": "nope"}, "Aggregate nope could not be found"),
])
def test_unknown_names_fail_the_audit(dcloud, params, message):
    audit = dcloud.audit("cell_drain", **params)
    assert audit["state"] == "FAILED" and message in audit["status_message"]
    assert dcloud.plan_of(audit) == []


def test_flavor_map_plans_resizes_within_quota(make_dcloud):
    cloud = make_dcloud(quota={"cores": 3})
    cloud.allow_cross_cell()
    servers = [_on(cloud, "cell1-host1", f"t{i}", flavor="1") for i in range(2)]
    cloud.flavor("gen2", 2, 512, 1)
    # Each resize to gen2 takes one more core: the project has room for one.
    audit = cloud.audit("cell_drain", source_cell="cell1", flavor_map={"m1.tiny": "gen2"})
    assert audit["state"] == "FAILED"
    assert "cores quota (3)" in audit["status_message"]
    assert sum(s in audit["status_message"] for s in servers) == 1
    status, body = cloud.api("PUT", f"/os-quota-sets/{cloud.server(servers[0])['tenant_id']}",
                             {"quota_set": {"cores": 10}})
    assert status == 200, body
    audit = cloud.audit("cell_drain", source_cell="cell1", flavor_map={"m1.tiny": "gen2"})
    assert audit["state"] == "SUCCEEDED", audit["status_message"]
    [plan] = cloud.plan_of(audit)
    moves = _moves(cloud, plan)
    assert {m["action_type"] for m in moves.values()} == {"resize"}
    assert {m["input_parameters"]["flavor"] for m in moves.values()} == {"fgen2"}
