import json
import uuid

import pytest
import sqlalchemy as sa

from novella.compute import resource_tracker
from novella.compute.exceptions import ComputeResourcesUnavailable
from novella.conf import CONF
from novella.db import cell_models as m, records
from novella.db import cells
from novella.db.engine import Database
from novella.virt import simulated

FLAVOR = {"vcpus": 2, "memory_mb": 1024, "root_gb": 10, "ephemeral_gb": 0, "swap": 0,
          "extra_specs": {"hw:numa_nodes": "1", "pci_passthrough:alias": "nic:1"}}


class FakePlacement:
    """Records what the tracker tells placement."""

    def __init__(self):
        self.providers, self.inventories, self.traits, self.puts = {}, {}, {}, 0

    def ensure_resource_provider(self, rp_uuid, name=None, parent_provider_uuid=None):
        self.providers[rp_uuid] = name

    def set_inventory(self, rp_uuid, inventories, generation=None, retries=None):
        self.puts += 1
        self.inventories[rp_uuid] = inventories

    def get_traits(self, rp_uuid):
        return 0, sorted(self.traits.get(rp_uuid, []))

    def set_traits(self, rp_uuid, traits, generation=None, retries=None):
        self.traits[rp_uuid] = set(traits)


@pytest.fixture
def conf():
    CONF.set_override("alias", ['{"name": "nic", "vendor_id": "8086", "product_id": "1520"}'],
                      group="pci")
    CONF.set_override("cpu_allocation_ratio", 2.0)
    CONF.set_override("reserved_host_disk_mb", 1500)
    CONF.set_override("reserved_host_cpus", 1)
    yield CONF
    for name in ("cpu_allocation_ratio", "reserved_host_disk_mb", "reserved_host_cpus"):
        CONF.clear_override(name)
    CONF.clear_override("alias", group="pci")


@pytest.fixture
def rt(tmp_path, conf):
    db = Database(f"sqlite:///{tmp_path}/cell.db")
    cells.create_schema(db, m)
    host = "rt-" + uuid.uuid4().hex[:6]
    drv = simulated.SimulatedDriver(host, conf=conf, instances_path=str(tmp_path), vcpus=8,
                                    memory_mb=4096, local_gb=50, numa_cells=2,
                                    pci_devices=["8086:1520:2"])
    tracker = resource_tracker.ResourceTracker(host, drv, db, FakePlacement(), conf)
    tracker.update_available_resource()
    return tracker


def _instance(rt, flavor=FLAVOR, host=None):
    inst_uuid = str(uuid.uuid4())
    with rt.cell_db.session(write=True) as s:
        s.add(m.Instance(uuid=inst_uuid, project_id="p", user_id="u", vm_state="building", host=host))
        s.add(m.InstanceExtra(instance_uuid=inst_uuid,
                              flavor=json.dumps({"cur": flavor, "old": None, "new": None})))
    return inst_uuid


def _claim(rt, inst_uuid, flavor=FLAVOR):
    with rt.cell_db.read_session() as s:
        return rt.instance_claim(None, records.get_instance(s, inst_uuid), flavor)


def test_inventory_uses_ratios_and_reserved(rt):
    inv = rt.placement.inventories[rt.provider_uuid]
    assert inv["VCPU"] == {"total": 8, "reserved": 1, "min_unit": 1, "max_unit": 8,
                           "step_size": 1, "allocation_ratio": 2.0}
    assert inv["MEMORY_MB"]["reserved"] == 512 and inv["MEMORY_MB"]["allocation_ratio"] == 1.0
    assert inv["DISK_GB"]["total"] == 50 and inv["DISK_GB"]["reserved"] == 2
    assert rt.placement.providers == {rt.provider_uuid: rt.host}
    # an unchanged node is not re-sent
    rt.update_available_resource()
    assert rt.placement.puts == 1


def test_traits_follow_the_driver_and_the_disabled_flag_keeping_custom_ones(rt):
    rp = rt.provider_uuid
    assert "COMPUTE_NODE" in rt.placement.traits[rp]
    rt.placement.traits[rp].add("CUSTOM_GOLD")  # an operator's trait
    rt.set_traits(disabled=True)
    assert {"COMPUTE_STATUS_DISABLED", "CUSTOM_GOLD", "COMPUTE_NODE"} <= rt.placement.traits[rp]
    rt.set_traits(disabled=False)
    assert "COMPUTE_STATUS_DISABLED" not in rt.placement.traits[rp]
    assert "CUSTOM_GOLD" in rt.placement.traits[rp]


def test_instance_claim_and_abort(rt):
    inst = _instance(rt)
    claim = _claim(rt, inst)
    assert claim.numa_topology["cells"][0]["host_cell"] in (0, 1)
    [dev] = claim.pci_devices
    assert dev["numa_node"] == claim.numa_topology["cells"][0]["host_cell"]
    usage = rt.usage()
    assert usage["pci"] == [dev["address"]] and usage["vcpus"] == 2
    with rt.cell_db.session() as s:
        node = s.get(m.ComputeNode, rt.compute_node["id"])
        pools = json.loads(node.pci_stats)
        assert sum(p["free"] for p in pools) == 1
        assert sum(c["cpu_usage"] for c in json.loads(node.numa_topology)["cells"]) == 2
    claim.abort()
    usage = rt.usage()
    assert usage["pci"] == [] and usage["running_vms"] == 0


def test_claim_as_context_manager_aborts_on_error(rt):
    inst = _instance(rt)
    with pytest.raises(RuntimeError):
        with _claim(rt, inst):
            raise RuntimeError("spawn failed")
    assert rt.usage()["pci"] == []


def test_claims_run_out_of_devices(rt):
    for _ in range(2):
        _claim(rt, _instance(rt))
    with pytest.raises(ComputeResourcesUnavailable):
        _claim(rt, _instance(rt))
    assert len(rt.usage()["pci"]) == 2


def test_usage_is_rebuilt_from_the_database(rt, conf):
    inst = _instance(rt)
    _claim(rt, inst)
    fresh = resource_tracker.ResourceTracker(rt.host, rt.driver, rt.cell_db, rt.placement, conf)
    fresh.update_available_resource()
    assert fresh.provider_uuid == rt.provider_uuid
    assert fresh.usage()["pci"] == rt.usage()["pci"] != []


def test_resize_claim_lifecycle_on_the_same_host(rt):
    inst = _instance(rt)
    _claim(rt, inst)
    bigger = dict(FLAVOR, vcpus=4)
    with rt.cell_db.session(write=True) as s:
        extra = s.query(m.InstanceExtra).filter_by(instance_uuid=inst).one()
        extra.flavor = json.dumps({"cur": FLAVOR, "old": FLAVOR, "new": bigger})
    migration = {"uuid": str(uuid.uuid4()), "source_compute": rt.host, "source_node": rt.nodename}
    new = rt.resize_claim(None, inst, bigger, migration)
    usage = rt.usage()
    assert len(usage["pci"]) == 2 and usage["vcpus"] == 6       # old + new on one host
    rt.apply_migration_context(None, inst)
    with rt.cell_db.session(write=True) as s:                  # finish_resize's part
        extra = s.query(m.InstanceExtra).filter_by(instance_uuid=inst).one()
        extra.flavor = json.dumps({"cur": bigger, "old": FLAVOR, "new": bigger})
    assert len(rt.usage()["pci"]) == 2                         # new current + old held
    assert rt.usage()["vcpus"] == 6
    rt.drop_move_claim(None, inst)                             # confirm
    usage = rt.usage()
    assert usage["pci"] == [new.pci_devices[0]["address"]] and usage["vcpus"] == 4


def test_a_move_claim_is_counted_by_the_host_its_context_names(rt):
    """The destination counts a move's claim until it is applied, then the source:
    the host ``move_claim_host`` names, by which usage finds it."""
    inst = _instance(rt, host="source-host")
    claim = rt.resize_claim(None, inst, FLAVOR, {"uuid": "m1", "source_compute": "source-host",
                                                 "source_node": "source-node"})

    def move_claim_host():
        with rt.cell_db.session() as s:
            return s.scalar(sa.select(m.InstanceExtra.move_claim_host).where(
                m.InstanceExtra.instance_uuid == inst))

    assert move_claim_host() == rt.host
    assert rt.usage()["pci"] == [claim.pci_devices[0]["address"]]
    rt.apply_migration_context(None, inst)
    assert move_claim_host() == "source-host"
    assert rt.usage()["pci"] == []  # the server is still the source's: no claim here
    rt.drop_move_claim(None, inst)
    assert move_claim_host() is None


def test_resize_claim_failure_and_revert_give_back(rt):
    inst = _instance(rt)
    original = _claim(rt, inst).pci_devices[0]["address"]
    other = _instance(rt)
    _claim(rt, other)
    with pytest.raises(ComputeResourcesUnavailable):
        rt.resize_claim(None, inst, FLAVOR, {"uuid": "m1"})
    rt.drop_move_claim(None, other)  # nothing to drop: harmless
    rt.abort_instance_claim(None, other)
    claim = rt.resize_claim(None, inst, FLAVOR, {"uuid": "m2"})
    assert claim.pci_devices[0]["address"] != original
    assert len(rt.usage()["pci"]) == 2
    rt.apply_migration_context(None, inst)
    rt.revert_migration_context(None, inst)
    assert rt.usage()["pci"] == [original]


def _node_usage(rt):
    with rt.cell_db.session() as s:
        node = s.get(m.ComputeNode, rt.compute_node["id"])
        return {c: getattr(node, c) for c in ("vcpus_used", "memory_mb_used", "local_gb_used",
                                              "running_vms", "pci_stats", "numa_topology")}


def test_a_plain_claim_adds_to_the_node_row_as_a_full_recount_would(rt):
    plain = {"vcpus": 3, "memory_mb": 512, "root_gb": 4, "ephemeral_gb": 2, "swap": 0,
             "extra_specs": {}}
    _claim(rt, _instance(rt))                 # NUMA and PCI: the node row is recounted
    for _ in range(2):
        _claim(rt, _instance(rt, plain), plain)   # neither: added to the sums
    added = _node_usage(rt)
    assert (added["vcpus_used"], added["memory_mb_used"], added["local_gb_used"],
            added["running_vms"]) == (2 + 3 * 2, 1024 + 512 * 2, 10 + 6 * 2, 3)
    rt.refresh_usage()                        # the full recount from the instances
    assert _node_usage(rt) == added
    with rt.cell_db.session() as s:           # nothing recorded as claimed for the plain ones
        plain_extras = [x for x in s.scalars(sa.select(m.InstanceExtra))
                        if json.loads(x.flavor)["cur"] == plain]
        assert len(plain_extras) == 2
        assert all(x.numa_topology is None and x.pci_devices is None for x in plain_extras)


def test_a_removed_instance_leaves_the_node_row_as_a_full_recount_would(rt):
    plain = {"vcpus": 3, "memory_mb": 512, "root_gb": 4, "ephemeral_gb": 2, "swap": 0,
             "extra_specs": {}}
    pinned, simple = _instance(rt), _instance(rt, plain)
    _claim(rt, pinned)
    _claim(rt, simple, plain)
    for gone in (simple, pinned):   # the plain one by subtraction, the other by a recount
        with rt.cell_db.session(write=True) as s:
            inst = records.get_instance(s, gone)
            inst.deleted = inst.id
        with rt.cell_db.read_session() as s:
            before = records.get_instance(s, gone, read_deleted=True)
        rt.instance_removed(before)
        removed = _node_usage(rt)
        rt.refresh_usage()
        assert _node_usage(rt) == removed
    assert (removed["vcpus_used"], removed["memory_mb_used"], removed["running_vms"]) == (0, 0, 0)
