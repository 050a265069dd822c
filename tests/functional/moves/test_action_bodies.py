"""Argument-less server actions take ``{}`` as they take ``null``.

Clients (tempest, python-novaclient's older releases) send ``{"migrate": {}}``,
``{"confirmResize": {}}``, ``{"os-stop": {}}``, ``{"shelve": {}}``; the
reference validates nothing in those values. Each flow here checks what the
action did: power state, host, migration record, placement books.
"""
import pytest

from novella.virt import simulated

TINY = {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}
IDLE = {"VCPU": 0, "MEMORY_MB": 0, "DISK_GB": 0}
SHUTDOWN, RUNNING = 4, 1


def _act(cloud, sid, body, expect=202, version="2.79"):
    status, resp = cloud.action(sid, body, version=version)
    assert status == expect, resp
    cloud.aio.wait_idle()
    return resp


def _status(cloud, sid):
    srv = cloud.server(sid)
    return srv["status"], srv["OS-EXT-SRV-ATTR:host"], srv["OS-EXT-STS:task_state"]


def _power(cloud, sid):
    host = cloud.host_of(sid)
    return simulated.driver_for(host).get_info({"uuid": sid})["state"]


@pytest.mark.parametrize("version", ["2.1", "2.79"])
def test_stop_and_start_with_empty_object(cloud, version):
    sid = cloud.boot()
    host = cloud.host_of(sid)
    _act(cloud, sid, {"os-stop": {}}, version=version)
    assert _status(cloud, sid) == ("SHUTOFF", host, None)
    assert _power(cloud, sid) == SHUTDOWN
    _act(cloud, sid, {"os-start": {}}, version=version)
    assert _status(cloud, sid) == ("ACTIVE", host, None)
    assert _power(cloud, sid) == RUNNING
    # Another value the reference does not read either.
    _act(cloud, sid, {"os-stop": {"force": True}}, version=version)
    assert _status(cloud, sid) == ("SHUTOFF", host, None)


@pytest.mark.parametrize("version", ["2.1", "2.56", "2.79"])
def test_migrate_and_confirm_with_empty_objects(cloud, version):
    sid = cloud.boot()
    src = cloud.host_of(sid)
    _act(cloud, sid, {"migrate": {}}, version=version)
    status, dest, task = _status(cloud, sid)
    assert (status, task) == ("VERIFY_RESIZE", None) and dest != src
    (mig,) = cloud.migrations(sid)
    assert (mig["status"], mig["source_compute"], mig["dest_compute"]) == (
        "finished", src, dest)
    books, _ = cloud.books(sid, mig["uuid"])
    assert books == {sid: {dest: TINY}, mig["uuid"]: {src: TINY}}

    _act(cloud, sid, {"confirmResize": {}}, expect=204, version=version)
    assert _status(cloud, sid) == ("ACTIVE", dest, None)
    books, usages = cloud.books(sid, mig["uuid"])
    assert books == {sid: {dest: TINY}, mig["uuid"]: {}}
    assert usages[src] == IDLE
    assert cloud.migrations(sid)[0]["status"] == "confirmed"


def test_migrate_before_2_56_does_not_read_the_value(cloud):
    """Before 2.56 a host in the body is not a target: the scheduler picks one."""
    sid = cloud.boot()
    src = cloud.host_of(sid)
    _act(cloud, sid, {"migrate": {"host": src}}, version="2.55")
    status, dest, _ = _status(cloud, sid)
    assert status == "VERIFY_RESIZE" and dest != src
    # From 2.56 the value is checked: an unknown key is a 400 that changes nothing.
    _act(cloud, sid, {"revertResize": {}})
    assert _status(cloud, sid) == ("ACTIVE", src, None)
    _act(cloud, sid, {"migrate": {"hots": "x"}}, expect=400, version="2.56")
    assert _status(cloud, sid) == ("ACTIVE", src, None)
    assert [m["status"] for m in cloud.migrations(sid)] == ["reverted"]


def test_revert_with_empty_object_gives_source_back(cloud):
    sid = cloud.boot()
    src = cloud.host_of(sid)
    _act(cloud, sid, {"migrate": {}})
    (mig,) = cloud.migrations(sid)
    _act(cloud, sid, {"revertResize": {}})
    assert _status(cloud, sid) == ("ACTIVE", src, None)
    books, usages = cloud.books(sid, mig["uuid"])
    assert books == {sid: {src: TINY}, mig["uuid"]: {}}
    assert usages[mig["dest_compute"]] == IDLE
    assert cloud.migrations(sid)[0]["status"] == "reverted"


@pytest.fixture
def shelf(make_cloud):
    """Shelved servers stay on their host until offloaded on request."""
    return make_cloud(hosts=2, DEFAULT={"shelved_offload_time": -1})


def test_shelve_offload_unshelve_with_empty_objects(shelf):
    sid = shelf.boot()
    host = shelf.host_of(sid)
    _act(shelf, sid, {"shelve": {}})
    assert _status(shelf, sid) == ("SHELVED", host, None)
    assert shelf.books(sid)[0] == {sid: {host: TINY}}

    _act(shelf, sid, {"shelveOffload": {}})
    assert _status(shelf, sid) == ("SHELVED_OFFLOADED", None, None)
    assert shelf.books(sid)[0] == {sid: {}}

    # Before 2.77 the value is not read; at 2.77 {} lacks its availability_zone.
    _act(shelf, sid, {"unshelve": {}}, expect=400, version="2.77")
    assert _status(shelf, sid) == ("SHELVED_OFFLOADED", None, None)
    _act(shelf, sid, {"unshelve": {"availability_zone": "nowhere"}}, version="2.76")
    status, new_host, task = _status(shelf, sid)
    assert (status, task) == ("ACTIVE", None) and new_host in shelf.aio.computes
    assert shelf.books(sid)[0] == {sid: {new_host: TINY}}
    assert _power(shelf, sid) == RUNNING


def test_unshelve_2_91_takes_empty_object(shelf):
    sid = shelf.boot()
    _act(shelf, sid, {"shelve": None})
    _act(shelf, sid, {"shelveOffload": None})
    _act(shelf, sid, {"unshelve": {}}, version="2.91")
    status, host, task = _status(shelf, sid)
    assert (status, task) == ("ACTIVE", None)
    assert shelf.books(sid)[0] == {sid: {host: TINY}}
