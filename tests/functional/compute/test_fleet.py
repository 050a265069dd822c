"""Many hosts of a cell started and kept up together (novella/compute/fleet.py,
resource_tracker.update_available_resources, PlacementClient.register_providers)."""
import uuid

import pytest
import sqlalchemy as sa

from novella.allinone import AllInOne
from novella.compute import SERVICE_VERSION, resource_tracker
from novella.db import api_models as am
from novella.db import cell_models as cm
from novella.db import cells as cells_mod
from novella.placement.client import PlacementClient
from tests.functional import placement_targets as targets
from tests.functional.system.conftest import Cloud


def _hosts(aio):
    """{host: (services row, node row, inventory, traits)} from the databases and placement."""
    out = {}
    for cell in aio.cells:
        with cells_mod.cell_database(cell).session() as s:
            services = {r.host: r for r in s.scalars(sa.select(cm.Service))}
            nodes = {r.host: r for r in s.scalars(sa.select(cm.ComputeNode))}
            s.expunge_all()
        for host, node in nodes.items():
            _gen, inv = aio.placement.get_inventories(node.uuid)
            _gen, traits = aio.placement.get_traits(node.uuid)
            out[host] = (services[host], node, inv, traits)
    return out


@pytest.fixture
def aio(tmp_path):
    aio = AllInOne(str(tmp_path / "data"), cells=2, hosts_per_cell=3, log=None).start()
    yield aio
    aio.stop()


def test_hosts_started_together_are_as_a_host_started_alone(aio):
    aio.add_compute("alone", cell="cell2")  # its own init_host
    hosts = _hosts(aio)
    assert sorted(hosts) == ["alone"] + [f"cell{c}-host{h}" for c in (1, 2) for h in (1, 2, 3)]
    _svc, alone_node, alone_inv, alone_traits = hosts.pop("alone")
    for host, (svc, node, inv, traits) in hosts.items():
        assert svc.binary == "nova-compute" and svc.version == SERVICE_VERSION
        assert node.service_id == svc.id and node.hypervisor_hostname == host
        for column in ("vcpus", "memory_mb", "local_gb", "vcpus_used", "running_vms",
                       "cpu_allocation_ratio", "ram_allocation_ratio", "pci_stats"):
            assert getattr(node, column) == getattr(alone_node, column), column
        assert inv == alone_inv and inv["VCPU"]["total"] == node.vcpus
        assert traits == alone_traits and "COMPUTE_NODE" in traits
        assert aio.computes[host].rt.compute_node["uuid"] == node.uuid
    with aio.api_db.session() as s:
        mapped = sorted(s.scalars(sa.select(am.HostMapping.host)))
    assert mapped == sorted(list(hosts) + ["alone"])

def test_a_host_with_something_to_recover_goes_through_its_own_init_host(tmp_path):
    data = str(tmp_path / "data")
    first = Cloud(AllInOne(data, cells=1, hosts_per_cell=3, log=None).start())
    steady = first.boot(name="steady", networks="none")
    sid = first.boot(name="interrupted", networks="none")
    host = first.server(sid)["OS-EXT-SRV-ATTR:host"]
    steady_host = first.server(steady)["OS-EXT-SRV-ATTR:host"]
    cell = first.aio.cells[0]
    generations = {rp["name"]: rp["generation"]
                   for rp in first.aio.placement.list_resource_providers()}
    first.aio.stop()
    # The service stopped while it powered the server off.
    with cells_mod.cell_database(cell).session(write=True) as s:
        s.execute(sa.update(cm.Instance).where(cm.Instance.uuid == sid)
                  .values(task_state="powering-off"))
    second = Cloud(AllInOne(data, cells=1, hosts_per_cell=3, log=None).start())
    try:
        srv = second.server(sid)
        assert srv["OS-EXT-STS:task_state"] is None and srv["OS-EXT-STS:vm_state"] == "stopped"
        assert srv["OS-EXT-SRV-ATTR:host"] == host
        assert second.server(steady)["status"] == "ACTIVE"
        assert sum(u["VCPU"] for u in second.usages().values()) == 2
        running = {h: mgr.rt.compute_node["running_vms"] for h, mgr in second.aio.computes.items()}
        assert running == {h: [host, steady_host].count(h) for h in running}
        providers = second.aio.placement.list_resource_providers()
        assert len(providers) == 3
        # The other hosts (one with a running server and nothing to recover) found
        # their providers as they left them: nothing written.
        assert {rp["name"]: rp["generation"] for rp in providers if rp["name"] != host} == \
            {name: gen for name, gen in generations.items() if name != host}
        assert all(second.aio.computes[rp["name"]].rt._reported.get("provider") == rp["uuid"]
                   for rp in providers)

    finally:
        second.aio.stop()


def test_a_cells_resource_update_writes_only_what_changed(aio):
    cell = aio.cells[0]
    trackers = [mgr.rt for mgr in aio.computes.values() if mgr.host.startswith("cell1-")]
    db = cells_mod.cell_database(cell)
    writes = []

    def record(conn, cursor, statement, params, context, executemany):
        if statement.lstrip().upper().startswith(("UPDATE", "INSERT", "DELETE")):
            writes.append((statement.split()[1], len(params) if executemany else 1))

    sa.event.listen(db.engine, "before_cursor_execute", record)
    try:
        resource_tracker.update_available_resources(trackers)
        assert writes == []  # nothing changed since start-up
        # An instance the node row does not count yet (as after a lost update).
        target = trackers[1]
        with db.session(write=True) as s:
            s.add(cm.Instance(uuid=str(uuid.uuid4()), host=target.host, node=target.nodename,
                              vcpus=2, memory_mb=1024, root_gb=5, ephemeral_gb=0,
                              vm_state="active", project_id="p", user_id="u"))
        writes.clear()
        resource_tracker.update_available_resources(trackers)
        assert writes == [("compute_nodes", 1)]
    finally:
        sa.event.remove(db.engine, "before_cursor_execute", record)
    with db.session() as s:
        used = {r.host: (r.vcpus_used, r.memory_mb_used, r.local_gb_used, r.running_vms)
                for r in s.scalars(sa.select(cm.ComputeNode))}
    assert used == {rt.host: ((2, 1024, 5, 1) if rt is target else (0, 0, 0, 0))
                    for rt in trackers}
    assert target.compute_node["vcpus_used"] == 2


def _providers(n, prefix):
    return [{"uuid": str(uuid.uuid4()), "name": f"{prefix}{i}",
             "inventories": {"VCPU": {"total": 8, "reserved": 0, "min_unit": 1, "max_unit": 8,
                                      "step_size": 1, "allocation_ratio": 4.0},
                             "MEMORY_MB": {"total": 4096, "reserved": 512, "min_unit": 1,
                                           "max_unit": 4096, "step_size": 1,
                                           "allocation_ratio": 1.0}},
             "traits": ["COMPUTE_NODE", "HW_CPU_X86_AVX2"]} for i in range(n)]


def _state(client, uuids):
    return {u: (client.get_resource_provider(u)["generation"], client.get_inventories(u)[1],
                client.get_traits(u)[1]) for u in uuids}


def test_register_providers_in_one_transaction_as_over_http(tmp_path):
    """The embedded path writes what three requests per provider write."""
    app = targets.novella_app(f"sqlite:///{tmp_path}/placement.db")
    embedded = PlacementClient(app=app, token="admin")
    over_http = PlacementClient(app=lambda env, start: app(env, start), token="admin")
    taken = embedded.create_resource_provider(str(uuid.uuid4()), "cn-taken")
    ours, theirs = _providers(3, "cn"), _providers(3, "http-cn")
    ours.append({**ours[0], "uuid": taken["uuid"], "name": "cn-taken"})
    held = embedded.register_providers(ours)
    made = [u for u, h in held.items() if h["created"]]
    assert sorted(made) == sorted(d["uuid"] for d in ours[:3])
    # The provider that existed is reported as it is, not written.
    assert held[taken["uuid"]] == {"generation": taken["generation"], "inventories": {},
                                   "traits": [], "created": False}
    held_http = over_http.register_providers(theirs + [ours[1]])
    assert sorted(u for u, h in held_http.items() if h["created"]) == \
        sorted(d["uuid"] for d in theirs)
    assert held_http[ours[1]["uuid"]] == dict(held[ours[1]["uuid"]], created=False)
    mine = _state(embedded, made)
    http = _state(embedded, [d["uuid"] for d in theirs])
    assert all(held_http[u]["generation"] == http[u][0] for u in http)
    assert all(held_http[u]["inventories"] == http[u][1] for u in http)
    # The same inventory and traits; a generation past 0 (written after creation).
    assert {(str(i), tuple(t)) for _g, i, t in mine.values()} == \
        {(str(i), tuple(t)) for _g, i, t in http.values()}
    assert all(g >= 1 for g, _i, _t in mine.values())
    assert all(mine[u][0] == held[u]["generation"] for u in made)
    # The provider that existed is left as it was.
    assert embedded.get_inventories(taken["uuid"])[1] == {}
    # A custom trait is made first, as set_traits makes it.
    custom = _providers(1, "custom-cn")
    custom[0]["traits"] = ["CUSTOM_RACK_7", "COMPUTE_NODE"]
    assert embedded.register_providers(custom)[custom[0]["uuid"]]["created"]
    assert embedded.get_traits(custom[0]["uuid"])[1] == ["COMPUTE_NODE", "CUSTOM_RACK_7"]
    # An unknown standard trait or resource class: an error, nothing written.
    bad = _providers(2, "bad-cn")
    bad[1]["traits"] = ["HW_CPU_X86_NOT_A_TRAIT"]
    with pytest.raises(ValueError):
        app.register_providers(bad)
    bad[1]["traits"], bad[1]["inventories"] = [], {"NOT_A_CLASS": {"total": 1}}
    with pytest.raises(ValueError):
        app.register_providers(bad)
    assert embedded.get_resource_provider(bad[0]["uuid"]) is None
