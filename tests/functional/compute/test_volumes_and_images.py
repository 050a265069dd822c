"""The compute service with the embedded volume and image services."""
import json
import os
import uuid

import pytest

from novella.compute import exceptions
from novella.compute import guest
from novella.compute import manager as manager_mod
from novella.conf import CONF
from novella.db import cell_models as m
from novella.image.api import ImageAPI
from novella.virt import simulated
from novella.volume.api import VolumeAPI

from tests.functional.compute.conftest import FLAVOR
from tests.schemas import synced


def _host(env, volume_api=None, image_api=None):
    host = "vh-" + uuid.uuid4().hex[:6]
    driver = simulated.SimulatedDriver(host, conf=CONF, instances_path=env.instances_path)
    mgr = manager_mod.ComputeManager(CONF, host, env.cell_db, env.placement, driver,
                                     volume_api=volume_api, image_api=image_api,
                                     notifier=env.notifier, transport=env.transport)
    mgr.start_service()
    env.managers[host] = mgr
    return host


def test_boot_from_volume_attaches_and_delete_releases(env, tmp_path):
    volumes = VolumeAPI(synced(f"sqlite:///{tmp_path}/volume.db", "volume"))
    host = _host(env, volume_api=volumes)
    vol = volumes.create(env.ctxt, 10)
    inst_uuid = env.make_instance()
    with env.cell_db.session(write=True) as s:
        s.add(m.BlockDeviceMapping(uuid=str(uuid.uuid4()), instance_uuid=inst_uuid,
                                   source_type="volume", destination_type="volume",
                                   volume_id=vol["id"], boot_index=0, device_name="/dev/vda",
                                   delete_on_termination=True))
    env.build(host, inst_uuid)
    vol = volumes.get(env.ctxt, vol["id"])
    assert vol["status"] == "in-use" and vol["attachments"][0]["host_name"] == host
    [bdm] = guest.bdms_of(env.managers[host], inst_uuid)
    assert bdm.attachment_id == vol["attachments"][0]["id"]
    assert json.loads(bdm.connection_info)["volume_id"] == vol["id"]
    files = sorted(os.listdir(os.path.join(env.instances_path, host, inst_uuid)))
    assert "disk" not in files  # the root disk is the volume
    domain = json.load(open(os.path.join(env.instances_path, host, inst_uuid, "domain.json")))
    assert domain["volumes"] == {vol["id"]: "/dev/vda"}

    env.set_task_state(inst_uuid, "deleting")
    env.compute.terminate_instance(env.ctxt, host, inst_uuid)
    env.transport.wait_idle()
    assert env.instance(inst_uuid).deleted
    assert volumes.list(env.ctxt) == []  # delete_on_termination
    assert guest.bdms_of(env.managers[host], inst_uuid) == []


def test_spawn_failure_deletes_the_volume_attachment(env, tmp_path):
    volumes = VolumeAPI(synced(f"sqlite:///{tmp_path}/volume.db", "volume"))
    host = _host(env, volume_api=volumes)
    vol = volumes.create(env.ctxt, 10)
    inst_uuid = env.make_instance()
    with env.cell_db.session(write=True) as s:
        s.add(m.BlockDeviceMapping(uuid=str(uuid.uuid4()), instance_uuid=inst_uuid,
                                   source_type="volume", destination_type="volume",
                                   volume_id=vol["id"], boot_index=1, device_name="/dev/vdb"))
    simulated.inject_fault(host, "spawn")
    with pytest.raises(exceptions.RescheduledException):
        env.build(host, inst_uuid)
    vol = volumes.get(env.ctxt, vol["id"])
    assert vol["status"] == "available" and vol["attachments"] == []
    assert not os.path.exists(os.path.join(env.instances_path, host, inst_uuid))


def test_root_disk_from_image_and_snapshot_to_image(env, tmp_path):
    images = ImageAPI(synced(f"sqlite:///{tmp_path}/image.db", "image"), str(tmp_path / "images"))
    host = _host(env, image_api=images)
    image = images.create(env.ctxt, name="cirros")
    images.upload(env.ctxt, image["id"], b"bootable bytes")
    inst_uuid = env.make_instance(image_ref=image["id"])
    env.compute.build_and_run_instance(env.ctxt, host, inst_uuid,
                                       {"flavor": FLAVOR, "image": {"id": image["id"]}})
    root = os.path.join(env.instances_path, host, inst_uuid, "disk")
    assert simulated.read_disk(root)[1] == b"bootable bytes"
    snap = images.create(env.ctxt, name="snap")
    driver = env.managers[host].driver
    driver.snapshot(env.ctxt, {"uuid": inst_uuid}, snap["id"])
    assert images.download(env.ctxt, snap["id"]) == b"bootable bytes"
    assert images.get(env.ctxt, snap["id"])["status"] == "active"


def _network_host(env, tmp_path):
    from novella.network.api import NetworkAPI
    network = NetworkAPI(synced(f"sqlite:///{tmp_path}/network.db", "network"))
    host = "nh-" + uuid.uuid4().hex[:6]
    driver = simulated.SimulatedDriver(host, conf=CONF, instances_path=env.instances_path)
    mgr = manager_mod.ComputeManager(CONF, host, env.cell_db, env.placement, driver,
                                     network_api=network, notifier=env.notifier,
                                     transport=env.transport)
    mgr.start_service()
    env.managers[host] = mgr
    return host, network


def test_network_allocated_on_build_and_released_on_delete(env, tmp_path):
    host, network = _network_host(env, tmp_path)
    net = network.create_network(env.ctxt, name="private", cidr="10.0.0.0/24", shared=True)
    inst_uuid = env.make_instance()
    env.claim(inst_uuid, host)
    env.compute.build_and_run_instance(env.ctxt, host, inst_uuid, {"flavor": FLAVOR},
                                       requested_networks=[{"network_id": net["id"]}])
    [vif] = json.loads(env.instance(inst_uuid).info_cache.network_info)
    port = network.get_port(env.ctxt, vif["id"])
    assert port["device_id"] == inst_uuid and port["binding:host_id"] == host
    assert len(network.list_ports(env.ctxt, device_id=inst_uuid)) == 1
    env.set_task_state(inst_uuid, "deleting")
    env.compute.terminate_instance(env.ctxt, host, inst_uuid)
    env.transport.wait_idle()
    assert network.list_ports(env.ctxt, device_id=inst_uuid) == []


def test_spawn_failure_releases_the_ports(env, tmp_path):
    host, network = _network_host(env, tmp_path)
    net = network.create_network(env.ctxt, name="private", cidr="10.0.0.0/24", shared=True)
    inst_uuid = env.make_instance()
    simulated.inject_fault(host, "spawn")
    with pytest.raises(exceptions.RescheduledException):
        env.compute.build_and_run_instance(env.ctxt, host, inst_uuid, {"flavor": FLAVOR},
                                           requested_networks=[{"network_id": net["id"]}])
    assert network.list_ports(env.ctxt, device_id=inst_uuid) == []
