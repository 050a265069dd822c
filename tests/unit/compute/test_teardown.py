"""What a host made for a server, given back (novella/compute/teardown.py): each
part named goes, a part that fails leaves the others to go (unless strict),
and what was not named stays."""
import json
import uuid

import pytest
import sqlalchemy as sa

from novella.compute import connections
from novella.compute import guest
from novella.compute import manager as manager_mod
from novella.compute import states
from novella.compute import teardown
from novella.conf import CONF
from novella.context import RequestContext
from novella.db import cell_models as m
from novella.db import cells
from novella.db.engine import Database
from novella.network import models as net_models
from novella.network.api import NetworkAPI
from novella.placement.client import PlacementClient
from novella.virt import simulated
from novella.volume.api import VolumeAPI
from tests.functional.compute.conftest import placement_app
from tests.schemas import synced

FLAVOR = {"flavorid": "1", "name": "numa", "memory_mb": 512, "vcpus": 2, "root_gb": 1,
          "ephemeral_gb": 0, "swap": 0, "extra_specs": {"hw:numa_nodes": "1"}}
CTXT = RequestContext(user_id="u1", project_id="p1")
ADMIN = RequestContext(user_id="admin", project_id="admin", roles=["admin"], is_admin=True)


@pytest.fixture
def host(tmp_path):
    services = synced(f"sqlite:///{tmp_path}/services.db", "network", "volume")
    cell_db = Database(f"sqlite:///{tmp_path}/cell.db")
    cells.create_schema(cell_db, m)
    name = "td-" + uuid.uuid4().hex[:6]
    driver = simulated.SimulatedDriver(name, conf=CONF, instances_path=str(tmp_path / "i"),
                                       numa_cells=2)
    mgr = manager_mod.ComputeManager(
        CONF, name, cell_db, PlacementClient(app=placement_app(tmp_path), token="admin"),
        driver, network_api=NetworkAPI(services), volume_api=VolumeAPI(services))
    mgr.start_service()
    mgr.network_api.ensure_default_network(ADMIN)
    yield mgr
    mgr.stop_service()
    simulated.clear_faults(name)


def built_here(mgr):
    """A server as a build leaves it on ``mgr``'s host: (row, what was made)."""
    uuid_ = str(uuid.uuid4())
    with mgr.cell_db.session(write=True) as s:
        s.add(m.Instance(uuid=uuid_, project_id="p1", user_id="u1", display_name="vm",
                         vm_state=states.BUILDING, task_state=states.task_states.SCHEDULING,
                         vcpus=2, memory_mb=512, root_gb=1, ephemeral_gb=0))
        s.add(m.InstanceExtra(instance_uuid=uuid_,
                              flavor=json.dumps({"cur": FLAVOR, "old": None, "new": None})))
    mgr.placement.put_allocations(uuid_, {mgr.rt.provider_uuid: {"resources": {
        "VCPU": 2, "MEMORY_MB": 512, "DISK_GB": 1}}}, "p1", "u1")
    inst = guest.get(mgr, uuid_)
    claim = mgr.rt.instance_claim(CTXT, inst, FLAVOR,
                                  expected_task_state=states.task_states.SCHEDULING)
    network_info = connections.allocate_network(mgr, CTXT, inst, None)
    volume = mgr.volume_api.create(CTXT, 1)
    attachment = mgr.volume_api.attachment_create(CTXT, volume["id"], uuid_)["id"]
    mgr.driver.spawn(CTXT, guest.instance_dict(inst), {"id": None, "properties": {}},
                     network_info=network_info)
    return guest.get(mgr, uuid_), {"claim": claim, "volume": volume["id"],
                                    "attachments": [attachment]}


def left(mgr, inst, made):
    """Which parts of what was made are still there."""
    uuid_ = inst.uuid
    parts = set()
    if mgr.driver.instance_exists({"uuid": uuid_}):
        parts.add("guest")
    if mgr.network_api.list_ports(ADMIN, device_id=uuid_):
        parts.add("ports")
    if mgr.volume_api.attachment_list(CTXT, volume_id=made["volume"]):
        parts.add("attachments")
    row = guest.get(mgr, uuid_)
    if row.extra.numa_topology or row.host == mgr.host:
        parts.add("claim")
    if mgr.placement.get_allocations(uuid_)["allocations"]:
        parts.add("allocation")
    return parts


def give_back_all(mgr, inst, made, **kw):
    teardown.give_back(mgr, CTXT, inst, guest=(teardown.GUEST,),
                       attachments=made["attachments"], ports=teardown.DEALLOCATE,
                       claim=made["claim"], allocation=inst.uuid, **kw)


def test_each_part_named_is_given_back(host):
    inst, made = built_here(host)
    assert left(host, inst, made) == {"guest", "ports", "attachments", "claim", "allocation"}
    teardown.give_back(host, CTXT, inst, ports=teardown.DEALLOCATE, allocation=inst.uuid)
    assert left(host, inst, made) == {"guest", "attachments", "claim"}
    give_back_all(host, inst, made)
    assert left(host, inst, made) == set()


def _fail(mgr, part, made, monkeypatch):
    """Make giving back ``part`` fail."""
    def refuse(*args, **kwargs):
        raise RuntimeError(f"{part} refused")
    if part == "guest":
        mgr.driver.inject_fault("destroy")
    elif part == "ports":
        monkeypatch.setattr(mgr.network_api, "deallocate_for_instance", refuse)
    elif part == "attachments":
        monkeypatch.setattr(mgr.volume_api, "attachment_delete", refuse)
    elif part == "claim":
        monkeypatch.setattr(made["claim"], "abort", refuse)
    else:
        monkeypatch.setattr(mgr.placement, "delete_allocations", refuse)


@pytest.mark.parametrize("part", ["guest", "attachments", "ports", "claim", "allocation"])
def test_a_part_that_fails_leaves_the_others_to_go(host, part, monkeypatch):
    inst, made = built_here(host)
    _fail(host, part, made, monkeypatch)
    give_back_all(host, inst, made)  # logged, not raised
    assert left(host, inst, made) == {part}


def test_strict_stops_at_the_first_failure(host, monkeypatch):
    inst, made = built_here(host)
    _fail(host, "ports", made, monkeypatch)
    with pytest.raises(RuntimeError, match="ports refused"):
        give_back_all(host, inst, made, strict=True)
    # The guest and the attachment went before; the claim and allocation after stay.
    assert left(host, inst, made) == {"ports", "claim", "allocation"}


def _bindings(mgr, uuid_):
    with mgr.network_api.db.session() as s:
        return sorted(s.execute(sa.select(net_models.PortBinding.host,
                                          net_models.PortBinding.status)
                                .join(net_models.Port)
                                .where(net_models.Port.device_id == uuid_)).all())


def test_a_move_destination_gives_back_its_bindings_volumes_and_claim(host):
    inst, made = built_here(host)
    teardown.give_back(host, CTXT, inst, claim=made["claim"])
    # As a move from "src" takes it in here: a move claim, bindings, the volume attached.
    host.network_api.migrate_instance_finish(CTXT, inst.uuid, "src")
    host.rt.resize_claim(CTXT, inst.uuid, FLAVOR, {"uuid": str(uuid.uuid4()),
                                                  "source_compute": "src",
                                                  "source_node": "src"})
    host.network_api.bind_ports_to_host(CTXT, inst.uuid, host.host)
    with host.cell_db.session(write=True) as s:
        s.add(m.BlockDeviceMapping(uuid=str(uuid.uuid4()), instance_uuid=inst.uuid,
                                   source_type="volume", destination_type="volume",
                                   volume_id=made["volume"], boot_index=1,
                                   device_name="/dev/vdb", attachment_id=made["attachments"][0]))
    assert _bindings(host, inst.uuid) == [("src", "ACTIVE"), (host.host, "INACTIVE")]
    assert guest.get(host, inst.uuid).extra.migration_context

    teardown.give_back(host, CTXT, inst.uuid, guest=(teardown.GUEST,), bindings=True,
                       volumes=teardown.DETACH, claim=teardown.MOVE_CLAIM)
    assert _bindings(host, inst.uuid) == [("src", "ACTIVE")]
    assert host.volume_api.attachment_list(CTXT, volume_id=made["volume"]) == []
    [bdm] = guest.bdms_of(host, inst.uuid)
    assert bdm.attachment_id is None
    assert guest.get(host, inst.uuid).extra.migration_context is None
    assert not host.driver.instance_exists({"uuid": inst.uuid})
    # Not named, so kept: the ports and the server's allocation.
    assert host.network_api.list_ports(ADMIN, device_id=inst.uuid)
    assert host.placement.get_allocations(inst.uuid)["allocations"]


def test_an_offload_parks_the_ports_and_volumes(host):
    inst, made = built_here(host)
    with host.cell_db.session(write=True) as s:
        s.add(m.BlockDeviceMapping(uuid=str(uuid.uuid4()), instance_uuid=inst.uuid,
                                   source_type="volume", destination_type="volume",
                                   volume_id=made["volume"], boot_index=1,
                                   device_name="/dev/vdb", attachment_id=made["attachments"][0],
                                   connection_info="{}"))
    teardown.give_back(host, CTXT, inst, guest=(teardown.GUEST,), ports=teardown.UNBIND,
                       volumes=teardown.PARK, allocation=inst.uuid, strict=True)
    assert left(host, inst, made) == {"ports", "attachments", "claim"}
    assert _bindings(host, inst.uuid) == [("", "ACTIVE")]  # kept, bound to no host
    [parked] = host.volume_api.attachment_list(CTXT, volume_id=made["volume"])
    assert parked["status"] == "reserved"
    [bdm] = guest.bdms_of(host, inst.uuid)
    assert (bdm.attachment_id, bdm.connection_info) == (parked["id"], None)
    assert parked["id"] != made["attachments"][0]
