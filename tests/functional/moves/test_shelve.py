"""Shelve, offload and unshelve of a server with a bandwidth port and a data volume.

Two hosts, each reporting 10000 kbps each way on physnet0. An offloaded
server holds no allocation, its port is bound to no host and its volume
waits on a reserved attachment; unshelving schedules it anew, and the port's
binding profile names the bandwidth provider of wherever it lands.
"""
import os

import pytest

from novella.context import get_admin_context
from novella.db import cells as cells_mod
from novella.db import records
from novella.virt import simulated
from tests.functional.moves.test_bandwidth import BW, NONE, TINY, _bandwidth_used, _bound, _bw, _held
from tests.functional.moves.test_live_migration import _server
from tests.functional.moves.test_volumes_and_ports import _attached_on, _guest

IDLE = {rc: 0 for rc in BW}
BANDWIDTH = ["physnet0:10000:10000"]


@pytest.fixture
def cloud(make_cloud):
    return make_cloud(hosts=2, simulated={"resource_provider_bandwidths": BANDWIDTH})


def _act(cloud, sid, body, expect=202, token="admin:admin", version="2.79"):
    status, resp = cloud.api("POST", f"/servers/{sid}/action", body, token=token,
                             version=version)
    assert status == expect, resp
    cloud.aio.wait_idle()
    return resp


def _shelved_image(cloud, sid):
    sysmeta = records.system_metadata(cells_mod.cell_database(cloud.aio.cells[0]), sid)
    return sysmeta.get("shelved_image_id")


def _root_disk(host, sid):
    path = os.path.join(simulated.driver_for(host).instance_dir(sid), "disk")
    return simulated.read_disk(path)[1]


def _offloaded(cloud, sid, port, volumes):
    """Nothing of the server on any host or in placement; it keeps port, volume, image."""
    srv = cloud.server(sid)
    assert (srv["status"], srv["OS-EXT-SRV-ATTR:host"], srv["OS-EXT-STS:task_state"]) == (
        "SHELVED_OFFLOADED", None, None)
    assert _held(cloud, sid) == NONE
    assert _bandwidth_used(cloud) == {_bw(h): IDLE for h in cloud.aio.computes}
    assert _bound(cloud, port) == ("", [])
    p = cloud.aio.network_api.get_port(get_admin_context(), port["id"])
    assert p["device_id"] == sid and p["status"] == "DOWN"
    atts = cloud.aio.volume_api.attachment_list(get_admin_context(), instance_uuid=sid)
    assert [(a["volume_id"], a["attached_host"], a["status"]) for a in atts] == [
        (v, None, "reserved") for v in volumes]
    assert all(_guest(h, sid) is None for h in cloud.aio.computes)
    assert all(cloud.usages()[h]["VCPU"] == 0 for h in cloud.aio.computes)


def _running_on(cloud, sid, port, volumes, host):
    srv = cloud.server(sid)
    assert (srv["status"], srv["OS-EXT-SRV-ATTR:host"], srv["OS-EXT-STS:task_state"]) == (
        "ACTIVE", host, None)
    assert _held(cloud, sid) == {host: TINY, _bw(host): BW}
    assert _bound(cloud, port) == (host, [_bw(host)])
    _attached_on(cloud, sid, volumes, host)
    assert _guest(host, sid) == (sorted(volumes), [port["id"]])
    assert simulated.driver_for(host).get_info({"uuid": sid})["state"] == 1


def test_shelve_offloads_and_unshelve_schedules_the_server_anew(cloud):
    sid, port, volumes = _server(cloud)
    host = cloud.host_of(sid)
    root = _root_disk(host, sid)

    _act(cloud, sid, {"shelve": None})
    _offloaded(cloud, sid, port, volumes)
    image_id = _shelved_image(cloud, sid)
    image = cloud.aio.image_api.get(get_admin_context(), image_id)
    assert (image["name"], image["status"]) == ("vm-shelved", "active")
    # (Offloaded at once, within the shelve action.)
    assert cloud.events(sid, "shelve") == {"compute_shelve_instance": "Success",
                                           "compute_shelve_offload_instance": "Success"}

    _act(cloud, sid, {"unshelve": None})
    landed = cloud.host_of(sid)
    _running_on(cloud, sid, port, volumes, landed)
    assert _root_disk(landed, sid) == root          # the bytes came back from the image
    assert _shelved_image(cloud, sid) is None
    assert cloud.aio.image_api.get(get_admin_context(), image_id,
                                   include_deleted=True)["status"] == "deleted"
    assert cloud.events(sid, "unshelve") == {"schedule_instances": "Success",
                                             "compute_unshelve_instance": "Success"}
    other = next(h for h in cloud.aio.computes if h != landed)
    assert _bandwidth_used(cloud) == {_bw(landed): BW, _bw(other): IDLE}


def test_kept_on_its_host_until_offloaded_when_asked(make_cloud):
    cloud = make_cloud(hosts=2, DEFAULT={"shelved_offload_time": -1},
                       simulated={"resource_provider_bandwidths": BANDWIDTH})
    sid, port, volumes = _server(cloud)
    host = cloud.host_of(sid)
    _act(cloud, sid, {"shelve": None})
    srv = cloud.server(sid)
    assert (srv["status"], srv["OS-EXT-SRV-ATTR:host"]) == ("SHELVED", host)
    assert _held(cloud, sid) == {host: TINY, _bw(host): BW}      # still its host's
    assert simulated.driver_for(host).get_info({"uuid": sid})["state"] == 4  # shut down
    _act(cloud, sid, {"unshelve": None})                          # powered on where it is
    _running_on(cloud, sid, port, volumes, host)

    _act(cloud, sid, {"shelve": None})
    _act(cloud, sid, {"shelveOffload": None}, token="demo:demo", expect=404)
    _act(cloud, sid, {"shelveOffload": None})
    _offloaded(cloud, sid, port, volumes)


def test_a_failed_unshelve_tries_the_alternate_then_gives_everything_back(cloud):
    sid, port, volumes = _server(cloud)
    _act(cloud, sid, {"shelve": None})
    simulated.inject_fault(None, "spawn", times=1)               # the first host tried fails
    _act(cloud, sid, {"unshelve": None})
    assert not simulated.pending_faults(None)
    _running_on(cloud, sid, port, volumes, cloud.host_of(sid))

    _act(cloud, sid, {"shelve": None})
    simulated.inject_fault(None, "spawn", times=None)            # every host fails
    try:
        _act(cloud, sid, {"unshelve": None})
    finally:
        simulated.clear_faults()
    _offloaded(cloud, sid, port, volumes)
    assert "injected fault" in cloud.fault(sid) or "Exhausted all hosts" in cloud.fault(sid)
    assert _shelved_image(cloud, sid)                             # kept for the next try
    _act(cloud, sid, {"unshelve": None})
    _running_on(cloud, sid, port, volumes, cloud.host_of(sid))


def test_bad_requests_change_nothing(cloud):
    sid, port, volumes = _server(cloud)
    host = cloud.host_of(sid)
    body = _act(cloud, sid, {"unshelve": None}, expect=409)      # not shelved
    assert "vm_state" in body["conflictingRequest"]["message"]
    _act(cloud, sid, {"shelveOffload": None}, expect=409)        # not shelved either
    _act(cloud, sid, {"shelve": None, "x": 1}, expect=400)
    _running_on(cloud, sid, port, volumes, host)
    _act(cloud, sid, {"shelve": None})
    _act(cloud, sid, {"shelve": None}, expect=409)               # already shelved
    _act(cloud, sid, {"unshelve": {"availability_zone": "nowhere"}}, expect=400)
    _act(cloud, sid, {"unshelve": {}}, version="2.77", expect=400)
    _offloaded(cloud, sid, port, volumes)


def test_deleting_an_offloaded_server_releases_its_port_volume_and_image(cloud):
    sid, port, volumes = _server(cloud)
    _act(cloud, sid, {"shelve": None})
    image_id = _shelved_image(cloud, sid)
    assert cloud.api("DELETE", f"/servers/{sid}")[0] == 204
    cloud.aio.wait_idle()
    assert cloud.api("GET", f"/servers/{sid}")[0] == 404
    ctxt = get_admin_context()
    p = cloud.aio.network_api.get_port(ctxt, port["id"])
    assert (p["device_id"], p["binding:host_id"]) == ("", "")
    vol = cloud.aio.volume_api.get(ctxt, volumes[0])
    assert (vol["status"], vol["attachments"]) == ("available", [])
    assert cloud.aio.image_api.get(ctxt, image_id, include_deleted=True)["status"] == "deleted"
    assert _held(cloud, sid) == NONE
    assert _bandwidth_used(cloud) == {_bw(h): IDLE for h in cloud.aio.computes}


def test_a_volume_backed_server_is_shelved_without_an_image(make_cloud):
    from tests.functional.moves.test_volumes_and_ports import _server_from_volume
    cloud = make_cloud(hosts=2)
    sid, volumes = _server_from_volume(cloud)
    images_before = len(cloud.aio.image_api.list(get_admin_context()))
    _act(cloud, sid, {"shelve": None})
    assert cloud.server(sid)["status"] == "SHELVED_OFFLOADED"
    assert _shelved_image(cloud, sid) is None
    assert len(cloud.aio.image_api.list(get_admin_context())) == images_before
    assert _held(cloud, sid) == NONE
    _act(cloud, sid, {"unshelve": None})
    host = cloud.host_of(sid)
    assert cloud.server(sid)["status"] == "ACTIVE"
    _attached_on(cloud, sid, volumes, host)
    assert _held(cloud, sid) == {host: {"VCPU": 1, "MEMORY_MB": 512}}
    assert _guest(host, sid)[0] == sorted(volumes)


def test_a_failed_shelve_leaves_the_server_where_it_was_without_an_image(cloud):
    sid, port, volumes = _server(cloud)
    host = cloud.host_of(sid)
    images_before = {i["id"] for i in cloud.aio.image_api.list(get_admin_context())}
    simulated.inject_fault(host, "snapshot", instance_uuid=sid)
    _act(cloud, sid, {"shelve": None})
    srv = cloud.server(sid)
    assert (srv["OS-EXT-SRV-ATTR:host"], srv["OS-EXT-STS:task_state"]) == (host, None)
    assert "injected fault" in cloud.fault(sid)
    assert {i["id"] for i in cloud.aio.image_api.list(get_admin_context())} == images_before
    assert _shelved_image(cloud, sid) is None
    assert _held(cloud, sid) == {host: TINY, _bw(host): BW}
    assert _bound(cloud, port) == (host, [_bw(host)])
    _running_on(cloud, sid, port, volumes, host)                     # powered on again


def test_a_shelved_server_is_offloaded_by_the_periodic_task_when_its_time_is_up(make_cloud):
    cloud = make_cloud(hosts=2, DEFAULT={"shelved_offload_time": 3600},
                       simulated={"resource_provider_bandwidths": BANDWIDTH})
    sid, port, volumes = _server(cloud)
    host = cloud.host_of(sid)
    _act(cloud, sid, {"shelve": None})
    compute = cloud.aio.computes[host]
    assert compute.poll_shelved_instances() == []                 # not yet
    assert cloud.server(sid)["status"] == "SHELVED"
    cell_db = cells_mod.cell_database(cloud.aio.cells[0])
    records.set_system_metadata(cell_db, sid, shelved_at="2000-01-01T00:00:00")
    assert compute.poll_shelved_instances() == [sid]
    _offloaded(cloud, sid, port, volumes)
    assert cloud.events(sid, "shelveOffload") == {"compute_shelve_offload_instance": "Success"}


def test_unshelve_to_a_host_and_zone_checks(cloud):
    """2.91: an admin may name the host; it must be a compute host in the server's zone."""
    sid, port, volumes = _server(cloud)
    first = cloud.host_of(sid)
    other = next(h for h in cloud.aio.computes if h != first)
    # The server is pinned to a zone that only the other host is in.
    status, body = cloud.api("POST", "/os-aggregates", {"aggregate": {
        "name": "east", "availability_zone": "east"}})
    assert status == 200, body
    agg = body["aggregate"]["id"]
    assert cloud.api("POST", f"/os-aggregates/{agg}/action",
                     {"add_host": {"host": other}})[0] == 200
    _act(cloud, sid, {"shelve": None})
    for body, code in (({"host": "nowhere"}, 400),
                       ({"host": first, "availability_zone": "east"}, 409),
                       ({"host": other, "extra": 1}, 400)):
        _act(cloud, sid, {"unshelve": body}, version="2.91", expect=code)
    _act(cloud, sid, {"unshelve": {"host": other}}, version="2.90", expect=400)
    _offloaded(cloud, sid, port, volumes)

    _act(cloud, sid, {"unshelve": {"host": other, "availability_zone": "east"}},
         version="2.91")
    _running_on(cloud, sid, port, volumes, other)
    srv = cloud.api("GET", f"/servers/{sid}", version="2.96")[1]["server"]
    assert (srv["OS-EXT-AZ:availability_zone"], srv["pinned_availability_zone"]) == (
        "east", "east")

    # Unpinned again (a null zone), it may go anywhere; a member may not name a host.
    _act(cloud, sid, {"shelve": None})
    own = cloud.boot(token="demo:demo", networks="none")
    assert cloud.server(own)["status"] == "ACTIVE", cloud.fault(own)
    _act(cloud, own, {"shelve": None}, token="demo:demo")
    _act(cloud, own, {"unshelve": {"host": first}}, token="demo:demo", version="2.91",
         expect=403)
    _act(cloud, sid, {"unshelve": {"availability_zone": None, "host": first}},
         version="2.91")
    _running_on(cloud, sid, port, volumes, first)
    srv = cloud.api("GET", f"/servers/{sid}", version="2.96")[1]["server"]
    assert srv["pinned_availability_zone"] is None
