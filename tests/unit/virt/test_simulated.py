import os
import uuid

import pytest

from novella.compute.states import power_state
from novella.conf import CONF
from novella.virt import driver as driver_mod
from novella.virt import simulated

FLAVOR = {"flavorid": "1", "name": "m1.small", "memory_mb": 512, "vcpus": 2,
          "root_gb": 10, "ephemeral_gb": 5, "swap": 256, "extra_specs": {}}


@pytest.fixture
def drv(tmp_path):
    host = "sim-" + uuid.uuid4().hex[:8]
    d = simulated.SimulatedDriver(host, conf=CONF, instances_path=str(tmp_path),
                                  vcpus=8, memory_mb=4096, local_gb=100, numa_cells=2,
                                  pci_devices=["8086:1520:3"])
    d.init_host(host)
    yield d
    simulated.clear_faults(host)


def _instance(flavor=FLAVOR):
    return {"uuid": str(uuid.uuid4()), "name": "vm", "flavor": dict(flavor), "image_ref": None}


def test_load_driver_uses_host_overrides(tmp_path):
    d = driver_mod.load_compute_driver(CONF, "h-load", instances_path=str(tmp_path), vcpus=3)
    assert isinstance(d, simulated.SimulatedDriver)
    res = d.get_available_resource("h-load")
    assert (res["vcpus"], res["memory_mb"]) == (3, CONF.simulated.memory_mb)
    assert simulated.driver_for("h-load") is d


def test_node_resources_numa_and_pci(drv):
    res = drv.get_available_resource(drv.nodename)
    assert (res["vcpus"], res["memory_mb"], res["local_gb"]) == (8, 4096, 100)
    cells = res["numa_topology"]["cells"]
    assert [c["cpus"] for c in cells] == [[0, 2, 4, 6], [1, 3, 5, 7]]
    assert [c["memory_mb"] for c in cells] == [2048, 2048]
    devs = res["pci_passthrough_devices"]
    assert len(devs) == 3 and len({d["address"] for d in devs}) == 3
    assert [d["numa_node"] for d in devs] == [0, 1, 0]
    assert "COMPUTE_NODE" in drv.get_traits(drv.nodename)


def test_spawn_writes_real_disks_and_destroy_removes_them(drv):
    inst = _instance()
    drv.spawn(None, inst, {"id": None})
    d = drv.instance_dir(inst["uuid"])
    assert sorted(os.listdir(d)) == ["console.log", "disk", "disk.local", "disk.swap",
                                     "domain.json"]
    head, content = simulated.read_disk(os.path.join(d, "disk"))
    assert head["size_gb"] == 10 and head["kind"] == "root"
    assert len(content) == CONF.simulated.disk_content_kb * 1024
    assert drv.get_info(inst)["state"] == power_state.RUNNING
    assert drv.list_instances() == [inst["uuid"]]
    assert drv.get_available_resource()["vcpus_used"] == 2
    drv.destroy(None, inst)
    assert not os.path.exists(d)
    assert drv.get_info(inst)["state"] == power_state.NOSTATE
    drv.destroy(None, inst)  # already gone: not an error


def test_boot_from_volume_has_no_root_disk(drv):
    inst = _instance()
    bdi = {"block_device_mapping": [{"volume_id": "v1", "boot_index": 0, "mount_device": "/dev/vda"}]}
    drv.spawn(None, inst, {"id": None}, block_device_info=bdi)
    assert "disk" not in os.listdir(drv.instance_dir(inst["uuid"]))


def _volume(volume_id, host, mount):
    return {"volume_id": volume_id, "boot_index": None, "mount_device": mount,
            "connection_info": {"driver_volume_type": "simulated",
                                "data": {"volume_id": volume_id, "target_host": host}}}


def test_volumes_exported_to_another_host_are_refused(drv, tmp_path):
    other = simulated.SimulatedDriver(drv.host + "-b", conf=CONF, instances_path=str(tmp_path))
    inst = _instance()
    theirs = {"block_device_mapping": [_volume("v1", other.host, "/dev/vdb")]}
    with pytest.raises(simulated.VolumeNotExported, match=other.host):
        drv.spawn(None, inst, {"id": None}, block_device_info=theirs)
    ours = {"block_device_mapping": [_volume("v1", drv.host, "/dev/vdb")]}
    drv.spawn(None, inst, {"id": None}, block_device_info=ours)
    assert drv._load(inst["uuid"])["volumes"] == {"v1": "/dev/vdb"}
    drv.migrate_disk_and_power_off(None, inst, other.host, FLAVOR)
    with pytest.raises(simulated.VolumeNotExported):
        other.finish_migration(None, {}, inst, [], [], {"id": None}, False,
                               block_device_info=ours)
    with pytest.raises(simulated.VolumeNotExported):
        drv.finish_revert_migration(None, inst, block_device_info=theirs)
    # The old guest comes back with the volumes it is given now (v1 was detached meanwhile).
    drv.finish_revert_migration(None, inst, network_info=[{"id": "p1"}],
                                block_device_info={"block_device_mapping": [
                                    _volume("v2", drv.host, "/dev/vdc")]})
    domain = drv._load(inst["uuid"])
    assert (domain["volumes"], domain["network_info"]) == ({"v2": "/dev/vdc"}, [{"id": "p1"}])
    assert domain["power_state"] == power_state.RUNNING


def test_power_states(drv):
    inst = _instance()
    drv.spawn(None, inst, {"id": None})
    drv.power_off(inst)
    assert drv.get_info(inst)["state"] == power_state.SHUTDOWN
    with pytest.raises(simulated.SimulatedFault):
        drv.reboot(None, inst, reboot_type="SOFT")
    drv.reboot(None, inst, reboot_type="HARD")
    assert drv.get_info(inst)["state"] == power_state.RUNNING
    drv.power_off(inst)
    drv.power_on(None, inst)
    assert drv.get_info(inst)["state"] == power_state.RUNNING


def test_state_survives_a_new_driver_object(drv, tmp_path):
    inst = _instance()
    drv.spawn(None, inst, {"id": None})
    drv.power_off(inst)
    again = simulated.SimulatedDriver(drv.host, conf=CONF, instances_path=str(tmp_path))
    assert again.list_instances() == [inst["uuid"]]
    assert again.get_info(inst)["state"] == power_state.SHUTDOWN


def test_fault_injection_by_method_and_instance(drv):
    a, b = _instance(), _instance()
    drv.inject_fault("spawn", instance_uuid=a["uuid"], exc=RuntimeError("boom"))
    with pytest.raises(RuntimeError, match="boom"):
        drv.spawn(None, a, {"id": None})
    # the failed spawn left its disks: the caller cleans up
    assert os.path.exists(os.path.join(drv.instance_dir(a["uuid"]), "disk"))
    assert drv.get_info(a)["state"] == power_state.NOSTATE
    drv.spawn(None, b, {"id": None})           # another instance is not affected
    drv.spawn(None, a, {"id": None})           # times=1: consumed
    simulated.inject_fault(drv.host, "power_off", times=2)
    for inst in (a, b):
        with pytest.raises(simulated.SimulatedFault):
            drv.power_off(inst)
    drv.power_off(a)
    assert simulated.pending_faults(drv.host) == []
    simulated.inject_fault(drv.host, "reboot", exc=ValueError, times=None)
    for _ in range(3):
        with pytest.raises(ValueError):
            drv.reboot(None, a, reboot_type="HARD")
    simulated.clear_faults(drv.host)
    drv.reboot(None, a, reboot_type="HARD")


def test_fault_for_any_host_hits_the_first_caller_once(drv, tmp_path):
    other = simulated.SimulatedDriver(drv.host + "-b", conf=CONF, instances_path=str(tmp_path))
    inst = _instance()
    simulated.inject_fault(None, "prep_resize", instance_uuid=inst["uuid"])
    other.prep_resize(None, _instance(), FLAVOR, {})   # another instance: not this fault
    with pytest.raises(simulated.SimulatedFault, match=other.host):
        other.prep_resize(None, inst, FLAVOR, {})
    assert simulated.pending_faults(None) == []
    drv.prep_resize(None, inst, FLAVOR, {})            # consumed: the next host accepts
    # A host's own fault is taken before an any-host one.
    simulated.inject_fault(None, "prep_resize", exc=ValueError)
    simulated.inject_fault(drv.host, "prep_resize", exc=KeyError)
    with pytest.raises(KeyError):
        drv.prep_resize(None, inst, FLAVOR, {})
    with pytest.raises(ValueError):
        drv.prep_resize(None, inst, FLAVOR, {})
    assert simulated.pending_faults(None) == simulated.pending_faults(drv.host) == []


def test_cold_move_copies_real_bytes_confirm_and_revert(drv, tmp_path):
    dest = simulated.SimulatedDriver(drv.host + "-b", conf=CONF, instances_path=str(tmp_path))
    inst = _instance()
    drv.spawn(None, inst, {"id": None})
    _, root = simulated.read_disk(os.path.join(drv.instance_dir(inst["uuid"]), "disk"))
    bigger = dict(FLAVOR, root_gb=20, swap=512)
    info = drv.migrate_disk_and_power_off(None, inst, dest.host, bigger)
    assert {d["kind"] for d in info} == {"root", "ephemeral"}
    assert drv.list_instances() == []  # the kept copy is not a guest
    assert os.path.isdir(drv.instance_dir(inst["uuid"]) + "_resize")
    moved = dict(inst, flavor=bigger)
    dest.finish_migration(None, {}, moved, info, [], {"id": None}, True)
    head, copied = simulated.read_disk(os.path.join(dest.instance_dir(inst["uuid"]), "disk"))
    assert copied == root and head["size_gb"] == 20
    assert simulated.read_disk(os.path.join(dest.instance_dir(inst["uuid"]), "disk.swap"))[0]["size_gb"] == 512
    assert dest.get_info(inst)["state"] == power_state.RUNNING
    # revert: destination forgets it, source gets its copy back
    dest.destroy(None, moved)
    drv.finish_revert_migration(None, inst)
    assert drv.get_info(inst)["state"] == power_state.RUNNING
    assert not os.path.exists(drv.instance_dir(inst["uuid"]) + "_resize")
    # move again and confirm: the source's kept copy goes
    drv.migrate_disk_and_power_off(None, inst, dest.host, bigger)
    drv.confirm_migration(None, {}, inst)
    assert not os.path.exists(drv.instance_dir(inst["uuid"]))
    assert not os.path.exists(drv.instance_dir(inst["uuid"]) + "_resize")


def test_resize_down_root_disk_is_refused(drv):
    inst = _instance()
    drv.spawn(None, inst, {"id": None})
    with pytest.raises(simulated.ResizeError):
        drv.migrate_disk_and_power_off(None, inst, drv.host, dict(FLAVOR, root_gb=1))
    assert drv.get_info(inst)["state"] == power_state.RUNNING


def test_snapshot_then_spawn_from_it(drv):
    inst = _instance()
    drv.spawn(None, inst, {"id": None})
    _, root = simulated.read_disk(os.path.join(drv.instance_dir(inst["uuid"]), "disk"))
    snap = drv.snapshot(None, inst, "img-1")
    assert snap["size"] == len(root)
    other = _instance()
    drv.spawn(None, other, {"id": "img-1"})
    _, content = simulated.read_disk(os.path.join(drv.instance_dir(other["uuid"]), "disk"))
    assert content == root


class _Images:
    """An image service holding two images, counting downloads."""

    def __init__(self):
        self.data = {"img-a": b"A" * 64, "img-b": b"B" * 64}
        self.downloads = []

    def download(self, ctxt, image_id):
        self.downloads.append(image_id)
        return self.data[image_id]


def test_host_image_cache_downloads_each_image_once(tmp_path, monkeypatch):
    images = _Images()
    d = simulated.SimulatedDriver("sim-cache", conf=CONF, instances_path=str(tmp_path),
                                  image_api=images)
    monkeypatch.setattr(simulated, "IMAGE_CACHE_SIZE", 1)
    roots = []
    for image_id in ("img-a", "img-a", "img-b", "img-a"):
        inst = _instance()
        d.spawn(None, inst, {"id": image_id})
        roots.append(simulated.read_disk(os.path.join(d.instance_dir(inst["uuid"]), "disk"))[1])
    assert roots == [b"A" * 64, b"A" * 64, b"B" * 64, b"A" * 64]
    # The second boot of img-a came from the cache; with room for one image,
    # img-b pushed it out, so the last boot downloaded it again.
    assert images.downloads == ["img-a", "img-b", "img-a"]


def test_guest_power_states_and_console(drv):
    inst = _instance()
    drv.spawn(None, inst, {"id": None})
    drv.pause(inst)
    drv.pause(inst)  # again (a restarted host runs a step again): no error
    assert drv.get_info(inst)["state"] == power_state.PAUSED
    drv.unpause(inst)
    drv.suspend(None, inst)
    assert drv.get_info(inst)["state"] == power_state.SUSPENDED
    drv.resume(None, inst)
    assert drv.get_info(inst)["state"] == power_state.RUNNING
    drv.power_off(inst)
    with pytest.raises(simulated.GuestStateError):
        drv.pause(inst)  # a guest that is shut down cannot be paused
    with pytest.raises(simulated.GuestStateError):
        drv.inject_nmi(inst)
    drv.power_on(None, inst)
    drv.inject_nmi(inst)
    log = drv.get_console_output(None, inst)
    assert "PM: suspending system" in log and log.rstrip().endswith("NMI: Not continuing")
    drv.inject_fault("pause", inst["uuid"])
    with pytest.raises(simulated.SimulatedFault):
        drv.pause(inst)
    assert drv.get_info(inst)["state"] == power_state.RUNNING


def test_rescue_rebuild_and_password(drv):
    inst = _instance()
    drv.spawn(None, inst, {"id": None})
    d = drv.instance_dir(inst["uuid"])
    ephemeral = simulated.read_disk(os.path.join(d, "disk.local"))[1]
    root = simulated.read_disk(os.path.join(d, "disk"))[1]
    drv.rescue(None, inst, [], {"id": None}, "pw")
    assert os.path.exists(os.path.join(d, simulated.RESCUE_DISK))
    drv.unrescue(None, inst)
    assert not os.path.exists(os.path.join(d, simulated.RESCUE_DISK))
    drv.rebuild(None, inst, {"id": None}, preserve_ephemeral=True)
    assert simulated.read_disk(os.path.join(d, "disk.local"))[1] == ephemeral
    assert simulated.read_disk(os.path.join(d, "disk"))[1] != root  # made anew
    drv.rebuild(None, inst, {"id": None}, power_on=False)
    assert simulated.read_disk(os.path.join(d, "disk.local"))[1] != ephemeral
    assert drv.get_info(inst)["state"] == power_state.SHUTDOWN
    with pytest.raises(simulated.GuestStateError):
        drv.set_admin_password(inst, "pw")  # no agent answers a guest that is off
    drv.power_on(None, inst)
    drv.set_admin_password(inst, "pw")
    assert drv._load(inst["uuid"])["admin_password"] == simulated._password_digest("pw")
