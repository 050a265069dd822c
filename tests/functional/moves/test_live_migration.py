"""Live migration inside a cell of a server with a bandwidth port and a data volume.

Two hosts, each reporting 10000 kbps each way on physnet0. At the end of a
live migration, and after a failure at each step, the tests check placement
(allocations by consumer, bandwidth usage by provider), the port's bindings
and the provider its profile names, the volume's attachments and BDM, what
each host's hypervisor holds, and the migration record.
"""
import pytest

from novella.context import get_admin_context
from novella.virt import simulated
from tests.functional.moves.test_bandwidth import BW, NONE, TINY, _bandwidth_used, _bound, _bw, _held, _port
from tests.functional.moves.test_volumes_and_ports import _attached_on, _guest

IDLE = {rc: 0 for rc in BW}


@pytest.fixture
def cloud(make_cloud):
    return make_cloud(hosts=2, simulated={"resource_provider_bandwidths": ["physnet0:10000:10000"]})


def _server(cloud):
    """A server on a bandwidth port, with a data volume attached."""
    port = _port(cloud)
    sid = cloud.boot(networks=[{"port": port["id"]}])
    vol = cloud.aio.volume_api.create(get_admin_context(), 1, name="data")
    status, body = cloud.api("POST", f"/servers/{sid}/os-volume_attachments",
                             {"volumeAttachment": {"volumeId": vol["id"]}})
    assert status == 200, body
    cloud.aio.wait_idle()
    return sid, port, [vol["id"]]


def _live_migrate(cloud, sid, host=None, version="2.79", expect=202, token="admin:admin"):
    status, body = cloud.api("POST", f"/servers/{sid}/action",
                             {"os-migrateLive": {"host": host, "block_migration": "auto"}},
                             version=version, token=token)
    assert status == expect, body
    cloud.aio.wait_idle()
    return body


def _on(cloud, sid, port, volumes, host, other):
    """Everything of the server is on ``host`` and nothing on ``other``."""
    srv = cloud.server(sid)
    assert (srv["status"], srv["OS-EXT-SRV-ATTR:host"], srv["OS-EXT-STS:task_state"]) == (
        "ACTIVE", host, None)
    assert _held(cloud, sid) == {host: TINY, _bw(host): BW}
    assert _bandwidth_used(cloud) == {_bw(host): BW, _bw(other): IDLE}
    assert _bound(cloud, port) == (host, [_bw(host)])
    bindings = cloud.aio.network_api.list_port_bindings(get_admin_context(), port["id"])
    assert {b["host"]: b["status"] for b in bindings} == {host: "ACTIVE"}
    _attached_on(cloud, sid, volumes, host)
    assert _guest(host, sid) == (sorted(volumes), [port["id"]])
    assert simulated.driver_for(host).get_info({"uuid": sid})["state"] == 1  # running
    assert _guest(other, sid) is None
    usages = cloud.usages()
    assert usages[host]["VCPU"] == 1 and usages[other]["VCPU"] == 0


def test_live_migration_moves_everything_and_frees_the_source(cloud):
    sid, port, volumes = _server(cloud)
    src = cloud.host_of(sid)
    dest = next(h for h in cloud.aio.computes if h != src)
    _on(cloud, sid, port, volumes, src, dest)

    _live_migrate(cloud, sid)
    _on(cloud, sid, port, volumes, dest, src)
    (mig,) = cloud.migrations(sid)
    assert (mig["migration_type"], mig["status"], mig["source_compute"], mig["dest_compute"]) \
        == ("live-migration", "completed", src, dest)
    assert _held(cloud, mig["uuid"]) == NONE
    assert cloud.events(sid, "live-migration") == {
        "conductor_live_migrate_instance": "Success",
        "compute_check_can_live_migrate_destination": "Success",
        "compute_live_migration": "Success",
        "compute_post_live_migration_at_destination": "Success",
        "compute_post_live_migration_at_source": "Success"}

    # And back again, to the host named (2.30+ forms).
    _live_migrate(cloud, sid, host=src, version="2.30")
    _on(cloud, sid, port, volumes, src, dest)


@pytest.mark.parametrize("side,method", [
    ("dest", "pre_live_migration"),
    ("source", "live_migration"),
    ("dest", "post_live_migration_at_destination"),
])
def test_a_failure_at_each_step_leaves_the_server_running_on_the_source(cloud, side, method):
    sid, port, volumes = _server(cloud)
    src = cloud.host_of(sid)
    dest = next(h for h in cloud.aio.computes if h != src)
    simulated.inject_fault(src if side == "source" else dest, method, instance_uuid=sid)
    _live_migrate(cloud, sid)
    assert not simulated.pending_faults(src if side == "source" else dest)
    _on(cloud, sid, port, volumes, src, dest)
    (mig,) = cloud.migrations(sid)
    assert mig["status"] == "error"
    assert _held(cloud, mig["uuid"]) == NONE
    assert "injected fault" in cloud.fault(sid) or "Exhausted all hosts" in cloud.fault(sid)
    # The host is fine again: the next attempt goes through.
    _live_migrate(cloud, sid)
    _on(cloud, sid, port, volumes, dest, src)


def test_bad_requests_change_nothing(cloud):
    sid, port, volumes = _server(cloud)
    src = cloud.host_of(sid)
    dest = next(h for h in cloud.aio.computes if h != src)
    _live_migrate(cloud, sid, token="demo:demo", expect=404)         # another project's
    own = cloud.boot(token="demo:demo")
    _live_migrate(cloud, own, token="demo:demo", expect=403)         # admins only
    assert cloud.migrations(own) == []
    _live_migrate(cloud, sid, host=src, expect=400)                 # the source itself
    _live_migrate(cloud, sid, host="nowhere", expect=400)           # unknown host
    status, body = cloud.api("POST", f"/servers/{sid}/action",      # 2.25+ has no disk_over_commit
                             {"os-migrateLive": {"host": None, "block_migration": "auto",
                                                 "disk_over_commit": False}}, version="2.25")
    assert status == 400, body
    status, body = cloud.api("POST", f"/servers/{sid}/action",      # before 2.25 it is required
                             {"os-migrateLive": {"host": None, "block_migration": False}},
                             version="2.1")
    assert status == 400, body
    assert cloud.action(sid, {"os-stop": None})[0] == 202
    cloud.aio.wait_idle()
    body = _live_migrate(cloud, sid, expect=409)                    # not running
    assert "vm_state" in body["conflictingRequest"]["message"]
    assert cloud.migrations(sid) == []
    assert cloud.host_of(sid) == src and _guest(dest, sid) is None
