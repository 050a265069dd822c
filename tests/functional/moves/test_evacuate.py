"""Evacuation of a server with a bandwidth port and a data volume from a down host.

Two hosts, each reporting 10000 kbps each way on physnet0. While the source
host is down the migration holds the source's allocation (its guest may
still be on that disk); when the host's compute service starts again it
removes what is left there and the migration completes.
"""
import pytest

from novella.context import get_admin_context
from novella.virt import simulated
from tests.functional.moves.test_bandwidth import BW, NONE, TINY, _bandwidth_used, _bound, _bw, _held
from tests.functional.moves.test_live_migration import _server
from tests.functional.moves.test_volumes_and_ports import _attached_on, _guest

IDLE = {rc: 0 for rc in BW}


@pytest.fixture
def cloud(make_cloud):
    return make_cloud(hosts=2, simulated={"resource_provider_bandwidths": ["physnet0:10000:10000"]})


def _force_down(cloud, host, down=True):
    status, body = cloud.api("GET", f"/os-services?host={host}&binary=nova-compute",
                             version="2.53")
    assert status == 200, body
    (svc,) = body["services"]
    status, body = cloud.api("PUT", f"/os-services/{svc['id']}", {"forced_down": down},
                             version="2.53")
    assert status == 200, body


def _evacuate(cloud, sid, body=None, expect=200, token="admin:admin", version="2.79"):
    status, resp = cloud.api("POST", f"/servers/{sid}/action", {"evacuate": body or {}},
                             token=token, version=version)
    assert status == expect, resp
    cloud.aio.wait_idle()
    return resp


def _bindings(cloud, port):
    return {b["host"]: b["status"] for b in cloud.aio.network_api.list_port_bindings(
        get_admin_context(), port["id"])}


def test_evacuate_rebuilds_elsewhere_and_the_source_cleans_up_when_back(cloud):
    sid, port, volumes = _server(cloud)
    src = cloud.host_of(sid)
    dest = next(h for h in cloud.aio.computes if h != src)
    _force_down(cloud, src)

    _evacuate(cloud, sid)
    srv = cloud.server(sid)
    assert (srv["status"], srv["OS-EXT-SRV-ATTR:host"]) == ("ACTIVE", dest)
    (mig,) = cloud.migrations(sid)
    assert (mig["migration_type"], mig["status"], mig["source_compute"], mig["dest_compute"]) \
        == ("evacuation", "done", src, dest)
    assert _held(cloud, sid) == {dest: TINY, _bw(dest): BW}
    assert _held(cloud, mig["uuid"]) == {src: TINY, _bw(src): BW}   # until the source is back
    assert _bound(cloud, port) == (dest, [_bw(dest)])
    assert _bindings(cloud, port) == {dest: "ACTIVE", src: "INACTIVE"}
    _attached_on(cloud, sid, volumes, dest)
    assert _guest(dest, sid) == (sorted(volumes), [port["id"]])
    assert _guest(src, sid) is not None                               # still on the down disk
    assert cloud.events(sid, "evacuate") == {"conductor_rebuild_server": "Success",
                                             "compute_rebuild_instance": "Success"}

    # Not forced up while the evacuation is not cleaned up on the host.
    status, body = cloud.api("GET", f"/os-services?host={src}&binary=nova-compute",
                             version="2.53")
    status, body = cloud.api("PUT", f"/os-services/{body['services'][0]['id']}",
                             {"forced_down": False}, version="2.53")
    assert status == 400 and "evacuation migration records" in body["badRequest"]["message"]
    cloud.aio.computes[src].init_host()                               # the service starts again
    _force_down(cloud, src, down=False)
    (mig,) = cloud.migrations(sid)
    assert mig["status"] == "completed" and _held(cloud, mig["uuid"]) == NONE
    assert _guest(src, sid) is None
    assert _bindings(cloud, port) == {dest: "ACTIVE"}
    assert _bandwidth_used(cloud) == {_bw(dest): BW, _bw(src): IDLE}
    assert cloud.usages()[src]["VCPU"] == 0


def test_a_failed_evacuation_leaves_the_server_and_its_books_on_the_down_host(cloud):
    sid, port, volumes = _server(cloud)
    src = cloud.host_of(sid)
    dest = next(h for h in cloud.aio.computes if h != src)
    _force_down(cloud, src)
    simulated.inject_fault(dest, "spawn", instance_uuid=sid)
    _evacuate(cloud, sid)
    srv = cloud.server(sid)
    assert (srv["status"], srv["OS-EXT-SRV-ATTR:host"]) == ("ACTIVE", src)
    (mig,) = cloud.migrations(sid)
    assert mig["status"] == "error" and _held(cloud, mig["uuid"]) == NONE
    assert _held(cloud, sid) == {src: TINY, _bw(src): BW}
    assert _bound(cloud, port) == (src, [_bw(src)]) and _bindings(cloud, port) == {src: "ACTIVE"}
    _attached_on(cloud, sid, volumes, src)
    assert _guest(dest, sid) is None
    assert _bandwidth_used(cloud) == {_bw(src): BW, _bw(dest): IDLE}
    assert "injected fault" in cloud.fault(sid) or "Exhausted all hosts" in cloud.fault(sid)


def test_bad_requests_change_nothing(cloud):
    sid, port, volumes = _server(cloud)
    src = cloud.host_of(sid)
    body = _evacuate(cloud, sid, expect=400)                          # the host is up
    assert "still in use" in body["badRequest"]["message"]
    _force_down(cloud, src)
    _evacuate(cloud, sid, {"host": src}, expect=400)                  # its own host
    _evacuate(cloud, sid, {"host": "nowhere"}, expect=400)
    _evacuate(cloud, sid, {"onSharedStorage": False}, expect=400)     # gone in 2.14
    own = cloud.boot(token="demo:demo", networks="none")  # two shared networks: "auto" is 409
    _evacuate(cloud, own, token="demo:demo", expect=403)
    assert cloud.migrations(sid) == [] and cloud.host_of(sid) == src
    assert _held(cloud, sid) == {src: TINY, _bw(src): BW}


def test_a_stopped_volume_backed_server_is_evacuated_stopped(make_cloud):
    from tests.functional.moves.test_volumes_and_ports import _server_from_volume
    cloud = make_cloud(hosts=2)
    sid, volumes = _server_from_volume(cloud)
    assert cloud.action(sid, {"os-stop": None})[0] == 202
    cloud.aio.wait_idle()
    src = cloud.host_of(sid)
    dest = next(h for h in cloud.aio.computes if h != src)
    _force_down(cloud, src)
    _evacuate(cloud, sid)
    srv = cloud.server(sid)
    assert (srv["status"], srv["OS-EXT-SRV-ATTR:host"]) == ("SHUTOFF", dest)
    assert simulated.driver_for(dest).get_info({"uuid": sid})["state"] == 4
    _attached_on(cloud, sid, volumes, dest)
    assert _held(cloud, sid) == {dest: {"VCPU": 1, "MEMORY_MB": 512}}


def test_deleting_a_server_on_a_down_host_frees_everything_at_once(cloud):
    """Nothing on the down host will clean up: the API does, and the host destroys the
    guest it kept when its compute service starts again."""
    sid, port, volumes = _server(cloud)
    src = cloud.host_of(sid)
    _force_down(cloud, src)
    assert cloud.api("DELETE", f"/servers/{sid}")[0] == 204
    cloud.aio.wait_idle()
    assert cloud.api("GET", f"/servers/{sid}")[0] == 404
    assert _held(cloud, sid) == NONE
    assert _bandwidth_used(cloud) == {_bw(h): IDLE for h in cloud.aio.computes}
    ctxt = get_admin_context()
    p = cloud.aio.network_api.get_port(ctxt, port["id"])
    assert (p["device_id"], p["binding:host_id"]) == ("", "")
    vol = cloud.aio.volume_api.get(ctxt, volumes[0])
    assert (vol["status"], vol["attachments"]) == ("available", [])
    assert _guest(src, sid) is not None                 # still on the down host's disk
    cloud.aio.computes[src].init_host()
    assert _guest(src, sid) is None
    assert cloud.usages()[src]["VCPU"] == 0


def test_deleting_an_evacuated_server_while_its_source_is_down_frees_the_source(cloud):
    """The migration holds the down source's resources until the host is back; a server
    deleted before then lets them go with its own (nothing else would: the server is
    gone), and the host destroys the guest it kept when it starts again."""
    sid, port, volumes = _server(cloud)
    src = cloud.host_of(sid)
    _force_down(cloud, src)
    _evacuate(cloud, sid)
    (mig,) = cloud.migrations(sid)
    assert _held(cloud, mig["uuid"]) == {src: TINY, _bw(src): BW}
    assert cloud.api("DELETE", f"/servers/{sid}")[0] == 204
    cloud.aio.wait_idle()
    assert _held(cloud, sid) == NONE and _held(cloud, mig["uuid"]) == NONE
    assert _bandwidth_used(cloud) == {_bw(h): IDLE for h in cloud.aio.computes}
    assert all(cloud.usages()[h]["VCPU"] == 0 for h in cloud.aio.computes)
    assert _guest(src, sid) is not None                 # still on the down host's disk
    cloud.aio.computes[src].init_host()                 # the service starts again
    assert _guest(src, sid) is None
    _force_down(cloud, src, down=False)
    assert _bindings(cloud, port) == {}
