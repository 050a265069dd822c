"""Moves of real guests through the Compute API (QEMU driver, TCG): shelve, offload
and unshelve, evacuation, booting from a volume. Each checks the guest from inside
(a file written before the move is there after) and the books."""
import os
import signal
import subprocess

import pytest

from novella.context import get_admin_context
from tests.real_guest.test_driver import wait_for
from tests.real_guest.test_live_migration import qemu_processes

pytestmark = pytest.mark.real_guest

TINY = {"VCPU": 1, "MEMORY_MB": 256, "DISK_GB": 1}


def resources(cloud, consumer):
    """{provider name: resources} of a consumer's allocations."""
    names = {rp["uuid"]: rp["name"] for rp in cloud.aio.placement.list_resource_providers()}
    return {names[rp]: a["resources"] for rp, a in cloud.allocations(consumer).items()}


def write_mark(cloud, server_id, text="before-the-move"):
    cloud.probe(server_id).check(f"echo {text} > /root/mark && sync")


def read_mark(cloud, server_id):
    return cloud.probe(server_id).check("cat /root/mark").strip()


def unshelve_elsewhere(cloud, server_id, source, boot_id):
    """Unshelve on the host that is not ``source`` (2.91 ``host``); -> that host, once
    the guest booted there."""
    dest = next(h for h in cloud.aio.computes if h != source)
    status, body = cloud.api("POST", f"/servers/{server_id}/action",
                             {"unshelve": {"host": dest}}, version="2.91")
    assert status == 202, body
    cloud.aio.wait_idle()
    server = cloud.server(server_id)
    assert (server["status"], server["OS-EXT-SRV-ATTR:host"]) == ("ACTIVE", dest), \
        server.get("fault")
    cloud.wait_boot(server_id, seen={boot_id})
    return dest


def delete(cloud, server_id):
    guest = cloud.guest(server_id)
    status, _ = cloud.api("DELETE", f"/servers/{server_id}")
    assert status == 204
    cloud.aio.wait_idle()
    assert guest.pid() is None and not os.path.exists(guest.dir)
    assert cloud.allocations(server_id) == {}


def test_shelve_offload_unshelve_on_another_host(qemu_cloud, tmp_path):
    cloud = qemu_cloud
    server_id = cloud.boot(name="vm-shelve")
    boot_id = cloud.wait_boot(server_id)
    write_mark(cloud, server_id)
    source = cloud.host_of(server_id)
    source_guest = cloud.guest(server_id)

    cloud.action(server_id, {"shelve": None})  # offloaded at once (shelved_offload_time 0)
    server = cloud.server(server_id)
    assert server["status"] == "SHELVED_OFFLOADED", server.get("fault")
    assert server["OS-EXT-SRV-ATTR:host"] is None
    assert source_guest.pid() is None and not os.path.exists(source_guest.dir)
    assert cloud.aio.computes[source].driver.list_disks() == []
    assert cloud.allocations(server_id) == {}
    (image,) = cloud.aio.image_api.list(get_admin_context(),
                                        {"name": "vm-shelve-shelved"})
    assert image["status"] == "active" and image["disk_format"] == "qcow2"
    raw = tmp_path / "shelved.raw"
    subprocess.run(["qemu-img", "convert", "-O", "raw",
                    cloud.aio.image_api.data_path(image["id"]), str(raw)], check=True)
    assert b"before-the-move" in raw.read_bytes()  # the guest's root disk, flattened

    dest = unshelve_elsewhere(cloud, server_id, source, boot_id)
    assert read_mark(cloud, server_id) == "before-the-move"
    assert resources(cloud, server_id) == {dest: TINY}
    # The shelved image is gone; the guest stands on this host's cache of it.
    assert cloud.aio.image_api.get(get_admin_context(), image["id"],
                                   include_deleted=True)["status"] == "deleted"
    assert cloud.aio.computes[source].driver.list_disks() == []
    delete(cloud, server_id)


def force_down(cloud, host, down=True):
    status, body = cloud.api("GET", f"/os-services?host={host}&binary=nova-compute",
                             version="2.53")
    (service,) = body["services"]
    status, body = cloud.api("PUT", f"/os-services/{service['id']}", {"forced_down": down},
                             version="2.53")
    assert status == 200, body


def evacuate(cloud, server_id):
    """-> the server once evacuated (its host is down), or not."""
    status, body = cloud.api("POST", f"/servers/{server_id}/action", {"evacuate": {}})
    assert status == 200, body
    cloud.aio.wait_idle()
    return cloud.server(server_id)


def host_back(cloud, host):
    """The host's compute service starts again, and is no longer forced down."""
    cloud.aio.computes[host].init_host()
    force_down(cloud, host, down=False)


def test_evacuate_rebuilds_from_the_image_and_the_source_destroys_its_guest_when_back(
        qemu_cloud):
    cloud = qemu_cloud
    server_id = cloud.boot(name="vm-evacuate")
    boot_id = cloud.wait_boot(server_id)
    write_mark(cloud, server_id)
    source = cloud.host_of(server_id)
    dest = next(h for h in cloud.aio.computes if h != source)
    source_guest = cloud.guest(server_id)
    # The compute service is down; its QEMU runs on (a host cut off, not powered off).
    force_down(cloud, source)

    server = evacuate(cloud, server_id)
    assert (server["status"], server["OS-EXT-SRV-ATTR:host"]) == ("ACTIVE", dest), \
        server.get("fault")
    cloud.wait_boot(server_id, seen={boot_id})
    # Rebuilt from the image: the hosts share no storage, the disk is a new one.
    assert cloud.probe(server_id).run("cat /root/mark")[0] != 0
    (migration,) = cloud.migrations(server_id)
    assert resources(cloud, server_id) == {dest: TINY}
    assert resources(cloud, migration["uuid"]) == {source: TINY}  # until the source is back

    host_back(cloud, source)
    assert source_guest.pid() is None and not os.path.exists(source_guest.dir)
    assert cloud.aio.computes[source].driver.list_disks() == []
    (migration,) = cloud.migrations(server_id)
    assert migration["status"] == "completed"
    assert cloud.allocations(migration["uuid"]) == {}
    assert resources(cloud, server_id) == {dest: TINY}
    assert cloud.guest(server_id).pid() is not None  # the one running copy
    delete(cloud, server_id)


def boot_from_volume(cloud, name, delete_on_termination=True):
    """A server booted from a 2 GiB volume made from the guest image."""
    status, body = cloud.api("POST", "/servers", {"server": {
        "name": name, "flavorRef": "1", "networks": "auto",
        "block_device_mapping_v2": [{
            "source_type": "image", "destination_type": "volume", "boot_index": 0,
            "uuid": cloud.aio.demo_image["id"], "volume_size": 2,
            "delete_on_termination": delete_on_termination}]}})
    assert status == 202, body
    cloud.aio.wait_idle()
    server = cloud.server(body["server"]["id"])
    assert server["status"] == "ACTIVE", server.get("fault")
    return server["id"]


def test_boot_from_a_volume_made_from_the_image_shelved_and_unshelved_elsewhere(qemu_cloud):
    cloud = qemu_cloud
    server_id = boot_from_volume(cloud, "vm-volume", delete_on_termination=False)
    server = cloud.server(server_id)
    (attached,) = server["os-extended-volumes:volumes_attached"]
    cloud.wait_boot(server_id)
    # The guest's root disk is the volume: its size, and what is written there.
    probe = cloud.probe(server_id)
    assert probe.check("cat /sys/block/vda/size").strip() == str((2 << 30) // 512)
    write_mark(cloud, server_id, "on-the-volume")
    with open(os.path.join(cloud.aio.volume_api.volumes_dir, attached["id"]), "rb") as f:
        assert b"on-the-volume" in f.read()
    assert not os.path.exists(os.path.join(cloud.guest(server_id).dir, "disk"))
    source = cloud.host_of(server_id)
    assert resources(cloud, server_id) == {source: {"VCPU": 1, "MEMORY_MB": 256}}

    # Shelved (no image: the volume is the disk), unshelved on the other host.
    boot_id = cloud.count(server_id)[0]
    cloud.action(server_id, {"shelve": None})
    assert cloud.server(server_id)["status"] == "SHELVED_OFFLOADED"
    assert cloud.aio.computes[source].driver.list_disks() == []
    dest = unshelve_elsewhere(cloud, server_id, source, boot_id)
    assert read_mark(cloud, server_id) == "on-the-volume"
    assert resources(cloud, server_id) == {dest: {"VCPU": 1, "MEMORY_MB": 256}}

    # Resized to a flavor of a smaller root disk (the volume is the root: it stays).
    boots = {boot_id, cloud.count(server_id)[0]}
    status, body = cloud.api("POST", "/flavors", {"flavor": {
        "name": "m1.volume", "ram": 512, "vcpus": 1, "disk": 0}})
    assert status == 200, body
    cloud.action(server_id, {"resize": {"flavorRef": body["flavor"]["id"]}})
    server = cloud.server(server_id)
    assert (server["status"], server["OS-EXT-SRV-ATTR:host"]) == ("VERIFY_RESIZE", source), \
        server.get("fault")
    boots.add(cloud.wait_boot(server_id, seen=boots))
    assert read_mark(cloud, server_id) == "on-the-volume"
    cloud.action(server_id, {"confirmResize": None}, expect=204)
    assert cloud.aio.computes[dest].driver.list_disks() == []
    assert resources(cloud, server_id) == {source: {"VCPU": 1, "MEMORY_MB": 512}}

    # Rebuilt with its volume's image, the volume is kept; with another (2.93), the
    # volume is written with that image's bytes: the file is gone.
    cloud.action(server_id, {"rebuild": {"imageRef": cloud.aio.demo_image["id"]}})
    boots.add(cloud.wait_boot(server_id, seen=boots))
    assert read_mark(cloud, server_id) == "on-the-volume"
    ctxt = get_admin_context()
    demo = cloud.aio.image_api.get(ctxt, cloud.aio.demo_image["id"])
    other = cloud.aio.image_api.create(ctxt, name="novella-guest-2", visibility="public",
                                       disk_format="qcow2", container_format="bare",
                                       properties=demo["properties"])
    cloud.aio.image_api.upload(ctxt, other["id"], cloud.aio.image_api.data_path(demo["id"]))
    status, body = cloud.api("POST", f"/servers/{server_id}/action",
                             {"rebuild": {"imageRef": other["id"]}}, version="2.93")
    assert status == 202, body
    cloud.aio.wait_idle()
    assert cloud.server(server_id)["status"] == "ACTIVE", cloud.server(server_id).get("fault")
    cloud.wait_boot(server_id, seen=boots)
    assert cloud.probe(server_id).run("cat /root/mark")[0] != 0
    assert cloud.probe(server_id).check("cat /sys/block/vda/size").strip() == \
        str((2 << 30) // 512)
    delete(cloud, server_id)
    volume = cloud.aio.volume_api.get(get_admin_context(), attached["id"])
    assert volume["status"] == "available" and volume["bootable"]
    cloud.aio.volume_api.delete(get_admin_context(), attached["id"])


def test_evacuate_a_server_booted_from_a_volume_once_its_host_is_fenced(qemu_cloud):
    """The volume is the one disk of both hosts: while the source's QEMU runs, the
    destination's cannot open it (QEMU's lock on the file) and the evacuation fails,
    the server staying where it is; once the source is fenced (its QEMU killed, as
    a powered-off host), the guest boots on the destination from its volume, the
    file there."""
    cloud = qemu_cloud
    server_id = boot_from_volume(cloud, "vm-volume-evacuate")
    boot_id = cloud.wait_boot(server_id)
    write_mark(cloud, server_id, "on-the-volume")
    source = cloud.host_of(server_id)
    dest = next(h for h in cloud.aio.computes if h != source)
    source_guest = cloud.guest(server_id)
    force_down(cloud, source)

    server = evacuate(cloud, server_id)
    assert (server["status"], server["OS-EXT-SRV-ATTR:host"]) == ("ACTIVE", source)
    assert [m["status"] for m in cloud.migrations(server_id)] == ["error"]
    assert "exited 1: qemu-system-x86_64: -device virtio-b" in cloud.fault(server_id)  # locked
    assert qemu_processes(server_id) == 1 and source_guest.pid() is not None
    assert cloud.aio.computes[dest].driver.list_disks() == []

    os.kill(source_guest.pid(), signal.SIGKILL)  # fenced
    wait_for(lambda: qemu_processes(server_id) == 0, "the source's QEMU did not end")
    server = evacuate(cloud, server_id)
    assert (server["status"], server["OS-EXT-SRV-ATTR:host"]) == ("ACTIVE", dest), \
        server.get("fault")
    cloud.wait_boot(server_id, seen={boot_id})
    assert read_mark(cloud, server_id) == "on-the-volume"  # its own disk
    host_back(cloud, source)
    assert not os.path.exists(source_guest.dir) and qemu_processes(server_id) == 1
    assert resources(cloud, server_id) == {dest: {"VCPU": 1, "MEMORY_MB": 256}}
    assert all(cloud.allocations(m["uuid"]) == {} for m in cloud.migrations(server_id))
    delete(cloud, server_id)
