"""Crashes in the disk copy of a real guest's move (QEMU driver, TCG): the compute
service killed while shelving copies the root disk into its image, or while a resize
copies the disks to the destination; after recovery one copy of the guest (none
running while offloaded, one after unshelve), its disk intact, the books exact. The
harness of tests/functional/moves (a dead thread never runs another statement; a
fresh service starts on the same databases and disks)."""
import os
import shutil
import threading

import pytest

from novella.compute import teardown
from novella.context import get_admin_context
from novella.virt.qemu import driver as qemu_driver
from tests.functional.moves import test_compute_crash_recovery as harness
from tests.real_guest.test_live_migration import books, migrations, qemu_processes
from tests.real_guest.test_moves import (TINY, delete, evacuate, force_down, host_back,
                                         read_mark, resources, write_mark)

pytestmark = pytest.mark.real_guest


@pytest.fixture(autouse=True)
def own_methods(qemu_cloud):
    """After each test the compute services' methods are their own again (the
    harness wraps them)."""
    yield
    for compute in qemu_cloud.aio.computes.values():
        for name in harness.COMPUTE_METHODS:
            compute.__dict__.pop(name, None)


def used(cloud):
    """{host: usages} of every provider something is used on."""
    return {host: u for host, u in cloud.usages().items() if any(u.values())}


def image_status(cloud, image):
    return cloud.aio.image_api.get(get_admin_context(), image["id"],
                                   include_deleted=True)["status"]


def snapshot_leftovers(driver):
    root = driver.hypervisor.instances_path
    return [name for name in os.listdir(root) if name.startswith(".snapshot-")]


def die(death, host):
    """``host``'s service dies in the running thread: it never runs another statement."""
    death.dead, death.dead_thread = host, death.thread
    death.reached.set()
    threading.Event().wait()


def dies_once_copied(cloud, monkeypatch, host):
    """The compute services of ``cloud`` may die (the harness's HostDeath, returned);
    ``host``'s dies once it has copied a disk (``qemu-img convert``)."""
    death = harness.arm_host_deaths(cloud, monkeypatch)
    copy = qemu_driver.qemu_img

    def dies(*args):
        out = copy(*args)
        if args[0] == "convert" and threading.current_thread() is death.thread:
            die(death, host)
        return out
    monkeypatch.setattr(qemu_driver, "qemu_img", dies)
    return death


def test_compute_killed_copying_the_root_disk_while_shelving(qemu_cloud, monkeypatch):
    cloud = qemu_cloud
    server_id = cloud.boot(name="vm-shelve-crash")
    boot_id = cloud.wait_boot(server_id)
    write_mark(cloud, server_id)
    source = cloud.host_of(server_id)

    death = dies_once_copied(cloud, monkeypatch, source)

    cloud.action(server_id, {"shelve": None})
    assert death.reached.is_set(), "the disk copy never ran"
    server = cloud.server(server_id)
    assert server["OS-EXT-STS:task_state"] == "shelving"
    assert snapshot_leftovers(cloud.aio.computes[source].driver)  # the copy, half-way

    harness._restart(cloud, death, source)  # init_host: the shelve done again, offloaded
    cloud.aio.wait_idle()
    server = cloud.server(server_id)
    assert (server["status"], server["OS-EXT-STS:task_state"]) == ("SHELVED_OFFLOADED", None)
    source_driver = cloud.aio.computes[source].driver
    assert qemu_processes(server_id) == 0
    assert source_driver.list_disks() == [] and snapshot_leftovers(source_driver) == []
    assert cloud.allocations(server_id) == {}
    (image,) = cloud.aio.image_api.list(get_admin_context(),
                                        {"name": "vm-shelve-crash-shelved"})
    assert image["status"] == "active"

    status, body = cloud.api("POST", f"/servers/{server_id}/action", {"unshelve": None})
    assert status == 202, body
    cloud.aio.wait_idle()
    server = cloud.server(server_id)
    assert server["status"] == "ACTIVE", server.get("fault")
    cloud.wait_boot(server_id, seen={boot_id})
    assert read_mark(cloud, server_id) == "before-the-move"  # the disk intact
    assert qemu_processes(server_id) == 1
    assert resources(cloud, server_id) == {server["OS-EXT-SRV-ATTR:host"]: TINY}
    delete(cloud, server_id)
    assert qemu_processes(server_id) == 0


def test_source_killed_copying_the_disks_while_resizing(qemu_cloud, monkeypatch):
    """The source's compute service dies half-way through copying the root disk to the
    destination, the guest powered off. The conductor undoes the move; the restarted
    source finds its step unfinished and puts the guest back as it was (running, from
    its kept disks): one running copy, its file, no half-made copy on the destination,
    the books the source's alone."""
    cloud = qemu_cloud
    server_id = cloud.boot(name="vm-resize-crash")
    boot_id = cloud.wait_boot(server_id)
    write_mark(cloud, server_id)
    source = cloud.host_of(server_id)
    dest = next(h for h in cloud.aio.computes if h != source)
    dest_driver = cloud.aio.computes[dest].driver
    landing = os.path.join(dest_driver.hypervisor.instances_path, server_id)

    death = harness.arm_host_deaths(cloud, monkeypatch)
    copy = shutil.copyfile

    def dies_half_way(src, dst, *args, **kwargs):
        if (threading.current_thread() is death.thread and dst.startswith(landing)
                and os.path.basename(src) == qemu_driver.DISK_FILES["root"]):
            with open(src, "rb") as whole, open(dst, "wb") as half:
                half.write(whole.read(os.path.getsize(src) // 2))
            die(death, source)
        return copy(src, dst, *args, **kwargs)
    monkeypatch.setattr(shutil, "copyfile", dies_half_way)

    status, body = cloud.api("POST", f"/servers/{server_id}/action",
                             {"resize": {"flavorRef": "2"}})
    assert status == 202, body
    cloud.aio.wait_idle()  # the conductor's undo, the source not answering
    assert death.reached.is_set(), "the disk copy never ran"
    assert qemu_processes(server_id) == 0  # powered off for the copy
    (migration,) = migrations(cloud, server_id)

    harness._restart(cloud, death, source)  # init_host: the step undone
    cloud.aio.wait_idle()
    server = cloud.server(server_id)
    assert (server["status"], server["OS-EXT-STS:task_state"],
            server["OS-EXT-SRV-ATTR:host"]) == ("ACTIVE", None, source), server.get("fault")
    (migration,) = migrations(cloud, server_id)
    assert migration["status"] in ("error", "failed"), migration
    cloud.wait_boot(server_id, seen={boot_id})
    assert qemu_processes(server_id) == 1
    assert read_mark(cloud, server_id) == "before-the-move"  # the disk intact
    assert dest_driver.list_disks() == [] and not os.path.exists(landing)
    assert books(cloud, server_id, migration["uuid"]) == {"instance": [source], "migration": []}
    assert resources(cloud, server_id) == {source: TINY} and used(cloud) == {source: TINY}
    delete(cloud, server_id)
    assert qemu_processes(server_id) == 0


def dies_once_started(death, driver, host):
    """``host``'s service dies once its ``driver`` has started a guest's QEMU, the
    first time (the spawn not returned yet)."""
    start = driver._start

    def dies(domain):
        out = start(domain)
        if threading.current_thread() is death.thread and not death.reached.is_set():
            die(death, host)
        return out
    driver._start = dies


def test_destination_killed_spawning_an_evacuated_guest(qemu_cloud, monkeypatch):
    """The destination's compute service dies once it has started the evacuated guest's
    QEMU, before the server's row names it. The conductor, without an answer, undoes
    the evacuation (the server its down host's, where its QEMU runs on); the
    destination, started again, removes the QEMU it had started. Evacuated again, the
    guest runs on the destination, and the source destroys its own when it is back:
    one running copy each time, the books exact."""
    cloud = qemu_cloud
    server_id = cloud.boot(name="vm-evacuate-crash")
    boot_id = cloud.wait_boot(server_id)
    write_mark(cloud, server_id)
    source = cloud.host_of(server_id)
    dest = next(h for h in cloud.aio.computes if h != source)
    source_guest = cloud.guest(server_id)
    force_down(cloud, source)  # cut off: its QEMU runs on

    death = harness.arm_host_deaths(cloud, monkeypatch)
    dies_once_started(death, cloud.aio.computes[dest].driver, dest)
    server = evacuate(cloud, server_id)
    assert death.reached.is_set(), "the destination never started the guest"
    assert (server["status"], server["OS-EXT-STS:task_state"],
            server["OS-EXT-SRV-ATTR:host"]) == ("ACTIVE", None, source)
    assert qemu_processes(server_id) == 2  # the destination's, until its service is back
    (undone,) = migrations(cloud, server_id)
    assert undone["status"] == "error"
    assert books(cloud, server_id, undone["uuid"]) == {"instance": [source], "migration": []}

    harness._restart(cloud, death, dest)  # init_host: the guest of another host's server
    cloud.aio.wait_idle()
    assert qemu_processes(server_id) == 1 and source_guest.pid() is not None
    assert cloud.aio.computes[dest].driver.list_disks() == []
    assert read_mark(cloud, server_id) == "before-the-move"  # the source's guest, untouched
    assert cloud.count(server_id)[0] == boot_id
    assert books(cloud, server_id, undone["uuid"]) == {"instance": [source], "migration": []}
    assert used(cloud) == {source: TINY}

    server = evacuate(cloud, server_id)  # the source still down: evacuated this time
    assert (server["status"], server["OS-EXT-SRV-ATTR:host"]) == ("ACTIVE", dest), \
        server.get("fault")
    cloud.wait_boot(server_id, seen={boot_id})
    host_back(cloud, source)  # its guest destroyed
    assert source_guest.pid() is None and not os.path.exists(source_guest.dir)
    assert qemu_processes(server_id) == 1
    (migration,) = [m for m in migrations(cloud, server_id) if m["uuid"] != undone["uuid"]]
    assert migration["status"] == "completed"
    assert books(cloud, server_id, migration["uuid"]) == {"instance": [dest], "migration": []}
    assert used(cloud) == {dest: TINY}
    delete(cloud, server_id)
    assert qemu_processes(server_id) == 0


def test_compute_killed_spawning_an_unshelved_guest(qemu_cloud, monkeypatch):
    """The compute service the scheduler picked dies once it has started the unshelved
    guest's QEMU. The conductor, without an answer, undoes the unshelve: the server
    SHELVED_OFFLOADED, nothing held; that host, started again, gives its part back (the
    QEMU and its files). Unshelved again, the guest runs once, with its file."""
    cloud = qemu_cloud
    server_id = cloud.boot(name="vm-unshelve-crash")
    boot_id = cloud.wait_boot(server_id)
    write_mark(cloud, server_id)
    cloud.action(server_id, {"shelve": None})  # offloaded at once
    assert cloud.server(server_id)["status"] == "SHELVED_OFFLOADED"

    death = harness.arm_host_deaths(cloud, monkeypatch)
    for host, compute in cloud.aio.computes.items():
        dies_once_started(death, compute.driver, host)
    cloud.action(server_id, {"unshelve": None})
    assert death.reached.is_set(), "no host started the guest"
    host = death.dead
    assert qemu_processes(server_id) == 1  # the dead service's, until it is back
    server = cloud.server(server_id)
    assert (server["status"], server["OS-EXT-STS:task_state"]) == ("SHELVED_OFFLOADED", None)
    assert cloud.allocations(server_id) == {} and used(cloud) == {}

    harness._restart(cloud, death, host)  # init_host: its part of the unshelve given back
    cloud.aio.wait_idle()
    assert qemu_processes(server_id) == 0
    assert all(c.driver.list_disks() == [] for c in cloud.aio.computes.values())
    server = cloud.server(server_id)
    assert (server["status"], server["OS-EXT-STS:task_state"],
            server["OS-EXT-SRV-ATTR:host"]) == ("SHELVED_OFFLOADED", None, None)
    assert cloud.allocations(server_id) == {} and used(cloud) == {}

    cloud.action(server_id, {"unshelve": None})
    server = cloud.server(server_id)
    assert server["status"] == "ACTIVE", server.get("fault")
    cloud.wait_boot(server_id, seen={boot_id})
    assert read_mark(cloud, server_id) == "before-the-move"  # the shelved disk intact
    assert qemu_processes(server_id) == 1
    assert resources(cloud, server_id) == {server["OS-EXT-SRV-ATTR:host"]: TINY}
    assert used(cloud) == {server["OS-EXT-SRV-ATTR:host"]: TINY}
    delete(cloud, server_id)
    assert qemu_processes(server_id) == 0


def test_destination_killed_once_it_took_the_evacuated_server(qemu_cloud, monkeypatch):
    """The destination's compute service dies once the server's row names it (its guest
    running: the point of no return), before it gave back its claim. The conductor
    ends the evacuation forward; the destination, started again, finishes its part,
    and the source destroys its guest when it is back: one running copy, on the
    destination, the books its alone."""
    cloud = qemu_cloud
    server_id = cloud.boot(name="vm-evacuate-forward")
    boot_id = cloud.wait_boot(server_id)
    source = cloud.host_of(server_id)
    dest = next(h for h in cloud.aio.computes if h != source)
    source_guest = cloud.guest(server_id)
    force_down(cloud, source)

    death = harness.arm_host_deaths(cloud, monkeypatch)
    give_back = teardown.give_back

    def dies_giving_back_its_claim(compute, *args, **kwargs):
        if compute.host == dest and kwargs.get("claim") == teardown.MOVE_CLAIM:
            die(death, dest)
        return give_back(compute, *args, **kwargs)
    monkeypatch.setattr(teardown, "give_back", dies_giving_back_its_claim)
    server = evacuate(cloud, server_id)
    assert death.reached.is_set(), "the destination never took the server"
    monkeypatch.setattr(teardown, "give_back", give_back)
    assert (server["status"], server["OS-EXT-STS:task_state"],
            server["OS-EXT-SRV-ATTR:host"]) == ("ACTIVE", None, dest), server.get("fault")
    assert qemu_processes(server_id) == 2  # the source's, until its service is back

    harness._restart(cloud, death, dest)  # init_host: the rebuild's last part finished
    cloud.aio.wait_idle()
    (migration,) = migrations(cloud, server_id)
    assert migration["status"] == "done"
    assert books(cloud, server_id, migration["uuid"]) == {"instance": [dest],
                                                          "migration": [source]}
    cloud.wait_boot(server_id, seen={boot_id})

    host_back(cloud, source)  # its guest destroyed
    assert source_guest.pid() is None and not os.path.exists(source_guest.dir)
    assert qemu_processes(server_id) == 1
    (migration,) = migrations(cloud, server_id)
    assert migration["status"] == "completed"
    assert books(cloud, server_id, migration["uuid"]) == {"instance": [dest], "migration": []}
    assert used(cloud) == {dest: TINY}
    delete(cloud, server_id)
    assert qemu_processes(server_id) == 0


def test_compute_killed_once_the_unshelved_guest_runs(qemu_cloud, monkeypatch):
    """The compute service dies once the server's row says the unshelved guest runs
    (the point of no return), before it deleted the shelved image. The conductor, its
    call unanswered, ends the unshelve forward; the host, started again, deletes the
    image: one running copy, with its file, the books that host's."""
    cloud = qemu_cloud
    server_id = cloud.boot(name="vm-unshelve-forward")
    boot_id = cloud.wait_boot(server_id)
    write_mark(cloud, server_id)
    cloud.action(server_id, {"shelve": None})
    (image,) = cloud.aio.image_api.list(get_admin_context(),
                                        {"name": "vm-unshelve-forward-shelved"})

    death = harness.arm_host_deaths(cloud, monkeypatch)
    images = type(cloud.aio.image_api)
    delete_image = images.delete

    def dies_deleting_it(api, ctxt, image_id, *args, **kwargs):
        if threading.current_thread() is death.thread and not death.reached.is_set():
            die(death, cloud.host_of(server_id))
        return delete_image(api, ctxt, image_id, *args, **kwargs)
    monkeypatch.setattr(images, "delete", dies_deleting_it)
    cloud.action(server_id, {"unshelve": None})
    assert death.reached.is_set(), "the shelved image was never deleted"
    host = death.dead
    server = cloud.server(server_id)
    assert (server["status"], server["OS-EXT-STS:task_state"],
            server["OS-EXT-SRV-ATTR:host"]) == ("ACTIVE", None, host), server.get("fault")
    assert qemu_processes(server_id) == 1
    assert resources(cloud, server_id) == {host: TINY} and used(cloud) == {host: TINY}

    assert image_status(cloud, image) == "active"

    harness._restart(cloud, death, host)  # init_host: the shelved image deleted
    cloud.aio.wait_idle()
    server = cloud.server(server_id)
    assert (server["status"], server["OS-EXT-STS:task_state"],
            server["OS-EXT-SRV-ATTR:host"]) == ("ACTIVE", None, host), server.get("fault")
    unshelved = cloud.wait_boot(server_id, seen={boot_id})
    assert qemu_processes(server_id) == 1 and cloud.count(server_id)[0] == unshelved
    assert read_mark(cloud, server_id) == "before-the-move"
    assert image_status(cloud, image) == "deleted"
    assert resources(cloud, server_id) == {host: TINY} and used(cloud) == {host: TINY}
    assert all(c.driver.list_disks() == [] for h, c in cloud.aio.computes.items() if h != host)
    delete(cloud, server_id)
    assert qemu_processes(server_id) == 0
