"""A real guest whose port asks for minimum bandwidth, moved through the Compute API
(QEMU driver, TCG): each QEMU host's network agent reports 10000 kbps each way on
physnet0 ([ovs] resource_provider_bandwidths), and the port's 1000 kbps follow the
guest through a live migration, a cold migration confirmed, and a shelve and an
unshelve on another host: after each, the instance holds the bandwidth of its host's
provider and nothing else does, the port's binding profile names that provider, and
the guest runs there with its file."""
import pytest

from tests.functional.moves.test_bandwidth import (BW, _bandwidth_used, _bound, _bw, _held,
                                                   _port)
from tests.real_guest.conftest import qemu_all_in_one
from tests.real_guest.test_live_migration import counts_on
from tests.real_guest.test_moves import TINY, read_mark, write_mark

pytestmark = pytest.mark.real_guest

IDLE = {rc: 0 for rc in BW}


@pytest.fixture(scope="module")
def cloud(tmp_path_factory, built_guest):
    with qemu_all_in_one(tmp_path_factory, built_guest, cells=1, hosts_per_cell=2,
                         ovs={"resource_provider_bandwidths": ["physnet0:10000:10000"]}) as c:
        yield c


def running_on(cloud, server_id, port, host):
    """The server, its bandwidth, its port's binding and its guest are on ``host`` alone."""
    other = next(h for h in cloud.aio.computes if h != host)
    server = cloud.server(server_id)
    assert (server["status"], server["OS-EXT-SRV-ATTR:host"],
            server["OS-EXT-STS:task_state"]) == ("ACTIVE", host, None), server.get("fault")
    assert _held(cloud, server_id) == {host: TINY, _bw(host): BW}
    assert _bandwidth_used(cloud) == {_bw(host): BW, _bw(other): IDLE}
    assert _bound(cloud, port) == (host, [_bw(host)])
    assert cloud.guest(server_id).status() == "running"
    assert read_mark(cloud, server_id) == "before-the-moves"
    assert cloud.guest(server_id).dir.startswith(
        cloud.aio.computes[host].driver.hypervisor.instances_path)
    assert cloud.aio.computes[other].driver.list_disks() == []


def latest_migration(cloud, server_id):
    return sorted(cloud.migrations(server_id), key=lambda m: m["created_at"])[-1]


def test_bandwidth_follows_a_real_guest_through_live_and_cold_migration_and_shelve(cloud):
    port = _port(cloud)
    server_id = cloud.boot(name="vm-bandwidth", networks=[{"port": port["id"]}])
    boot_id = cloud.wait_boot(server_id)
    boots = {boot_id}
    write_mark(cloud, server_id, "before-the-moves")
    first = cloud.host_of(server_id)
    second = next(h for h in cloud.aio.computes if h != first)
    running_on(cloud, server_id, port, first)

    # Live migration: the same boot counts on at the other host, with the bandwidth.
    _, before = cloud.count(server_id)
    status, body = cloud.api("POST", f"/servers/{server_id}/action",
                             {"os-migrateLive": {"host": None, "block_migration": "auto"}})
    assert status == 202, body
    cloud.aio.wait_idle()
    migration = latest_migration(cloud, server_id)
    assert (migration["migration_type"], migration["status"]) == ("live-migration",
                                                                  "completed")
    running_on(cloud, server_id, port, second)
    assert cloud.allocations(migration["uuid"]) == {}
    assert counts_on(cloud, server_id, boot_id, before) == {boot_id}

    # Cold migration: while it awaits confirmation the migration holds the source's
    # bandwidth; once confirmed, nothing.
    cloud.action(server_id, {"migrate": None})
    server = cloud.server(server_id)
    assert (server["status"], server["OS-EXT-SRV-ATTR:host"]) == ("VERIFY_RESIZE", first), \
        server.get("fault")
    migration = latest_migration(cloud, server_id)
    assert _held(cloud, migration["uuid"]) == {second: TINY, _bw(second): BW}
    assert _held(cloud, server_id) == {first: TINY, _bw(first): BW}
    boots.add(cloud.wait_boot(server_id, seen=boots))
    cloud.action(server_id, {"confirmResize": None}, expect=204)
    running_on(cloud, server_id, port, first)
    assert cloud.allocations(migration["uuid"]) == {}

    # Shelved (offloaded at once): no bandwidth held, the port unbound; unshelved on
    # the other host, which gives it its bandwidth.
    cloud.action(server_id, {"shelve": None})
    server = cloud.server(server_id)
    assert (server["status"], server["OS-EXT-SRV-ATTR:host"]) == ("SHELVED_OFFLOADED", None)
    assert _held(cloud, server_id) == {}
    assert _bandwidth_used(cloud) == {_bw(h): IDLE for h in cloud.aio.computes}
    assert _bound(cloud, port) == ("", [])
    status, body = cloud.api("POST", f"/servers/{server_id}/action",
                             {"unshelve": {"host": second}}, version="2.91")
    assert status == 202, body
    cloud.aio.wait_idle()
    boots.add(cloud.wait_boot(server_id, seen=boots))
    running_on(cloud, server_id, port, second)

    assert cloud.api("DELETE", f"/servers/{server_id}")[0] == 204
    cloud.aio.wait_idle()
    assert _held(cloud, server_id) == {}
    assert _bandwidth_used(cloud) == {_bw(h): IDLE for h in cloud.aio.computes}
