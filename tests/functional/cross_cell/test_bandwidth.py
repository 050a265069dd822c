"""Cross-cell resize of a server whose port asks for minimum bandwidth.

Two cells of one host each; each host reports 10000 kbps each way on
physnet0. The bandwidth moves with the server's allocation; the destination's
INACTIVE binding names the destination's provider from the start, the
source's keeps its own for a revert.
"""
from tests.functional.cross_cell.test_resize import DEST, SRC, _act
from tests.functional.moves.test_bandwidth import (
    BW, NONE, _bandwidth_used, _bound, _bw, _held, _migration, _port)

SMALL = {"VCPU": 1, "MEMORY_MB": 2048, "DISK_GB": 20}
TINY = {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}
IDLE = {rc: 0 for rc in BW}


def _cloud(make_xcloud):
    cloud = make_xcloud(simulated={"resource_provider_bandwidths": ["physnet0:10000:10000"]})
    cloud.allow_cross_cell()
    return cloud


def test_bandwidth_crosses_cells_with_the_server_and_comes_back_on_revert(make_xcloud):
    cloud = _cloud(make_xcloud)
    port = _port(cloud)
    sid = cloud.boot(networks=[{"port": port["id"]}])
    assert cloud.host_of(sid) == SRC and cloud.mapped_cell(sid) == "cell1"
    assert _held(cloud, sid) == {SRC: TINY, _bw(SRC): BW}
    assert _bound(cloud, port) == (SRC, [_bw(SRC)])

    _act(cloud, sid, {"resize": {"flavorRef": "2"}})
    mig = _migration(cloud, sid)["uuid"]
    assert cloud.mapped_cell(sid) == "cell2" and cloud.host_of(sid) == DEST
    assert _held(cloud, sid) == {DEST: SMALL, _bw(DEST): BW}
    assert _held(cloud, mig) == {SRC: TINY, _bw(SRC): BW}
    assert _bound(cloud, port) == (DEST, [_bw(DEST)])
    assert cloud.bindings(sid) == {SRC: "INACTIVE", DEST: "ACTIVE"}

    _act(cloud, sid, {"revertResize": None})
    assert cloud.mapped_cell(sid) == "cell1" and cloud.host_of(sid) == SRC
    assert _held(cloud, sid) == {SRC: TINY, _bw(SRC): BW} and _held(cloud, mig) == NONE
    assert _bound(cloud, port) == (SRC, [_bw(SRC)])
    assert _bandwidth_used(cloud) == {_bw(SRC): BW, _bw(DEST): IDLE}

    _act(cloud, sid, {"resize": {"flavorRef": "2"}})
    mig = _migration(cloud, sid)["uuid"]
    _act(cloud, sid, {"confirmResize": None}, code=204)
    assert cloud.mapped_cell(sid) == "cell2"
    assert _held(cloud, sid) == {DEST: SMALL, _bw(DEST): BW} and _held(cloud, mig) == NONE
    assert _bound(cloud, port) == (DEST, [_bw(DEST)])
    assert cloud.bindings(sid) == {DEST: "ACTIVE"}
    assert _bandwidth_used(cloud) == {_bw(DEST): BW, _bw(SRC): IDLE}


def test_a_failed_cross_cell_move_leaves_the_bandwidth_and_binding_on_the_source(make_xcloud):
    from novella.virt import simulated
    cloud = _cloud(make_xcloud)
    port = _port(cloud)
    sid = cloud.boot(networks=[{"port": port["id"]}])
    simulated.inject_fault(DEST, "spawn", instance_uuid=sid)
    _act(cloud, sid, {"resize": {"flavorRef": "2"}})
    mig = _migration(cloud, sid)
    assert mig["status"] == "error" and cloud.mapped_cell(sid) == "cell1"
    assert _held(cloud, sid) == {SRC: TINY, _bw(SRC): BW} and _held(cloud, mig["uuid"]) == NONE
    assert _bound(cloud, port) == (SRC, [_bw(SRC)])
    assert cloud.bindings(sid) == {SRC: "ACTIVE"}
    assert _bandwidth_used(cloud) == {_bw(SRC): BW, _bw(DEST): IDLE}
