"""The scheduler's per-cell host cache: what makes it read a cell again, and what not."""
import datetime

import sqlalchemy as sa

from novella.db import cell_models as cm
from novella.db import cells as cells_mod
from novella.scheduler import host_manager


def _counting(monkeypatch):
    reads = {"nodes": 0, "services": 0, "failed": 0}
    for part, name in (("nodes", "_load_nodes"), ("services", "_load_services"),
                       ("failed", "_failed_builds")):
        real = getattr(host_manager, name)

        def counted(conn, _real=real, _part=part):
            reads[_part] += 1
            return _real(conn)
        monkeypatch.setattr(host_manager, name, counted)
    return reads


def _states(cloud):
    return {h.host: h for h in cloud.scheduler.host_manager.get_host_states()}


def test_heartbeats_reread_services_not_nodes(cloud, monkeypatch):
    cloud.add_host("cell1", "h1")
    cloud.add_host("cell1", "h2")
    reads = _counting(monkeypatch)
    assert set(_states(cloud)) == {"h1", "h2"}
    first = dict(reads)
    assert set(_states(cloud)) == {"h1", "h2"}
    assert reads == first  # nothing changed: nothing read again
    _heartbeat(cloud, "h1")
    _states(cloud)
    assert reads["nodes"] == first["nodes"]
    assert reads["services"] == first["services"] + 1


def test_disabled_service_and_new_node_are_seen_at_once(cloud):
    cloud.add_host("cell1", "h1")
    assert _states(cloud)["h1"].service["disabled"] is False
    db = cells_mod.cell_database(cloud.cells["cell1"])
    with db.session(write=True) as s:
        s.scalars(sa.select(cm.Service).where(cm.Service.host == "h1")).one().disabled = True
    assert _states(cloud)["h1"].service["disabled"] is True
    cloud.add_host("cell1", "h2")
    assert set(_states(cloud)) == {"h1", "h2"}


def _heartbeat(cloud, host):
    db = cells_mod.cell_database(cloud.cells["cell1"])
    with db.session(write=True) as s:
        svc = s.scalars(sa.select(cm.Service).where(cm.Service.host == host)).one()
        svc.last_seen_up = svc.updated_at = datetime.datetime.utcnow()


def test_a_failed_build_counts_at_once_and_a_success_clears_it_by_the_next_heartbeat(cloud):
    cloud.add_host("cell1", "h1", memory_mb=8192)  # most free RAM: tried first
    cloud.add_host("cell1", "h2")
    _states(cloud)  # cached before the failure
    cloud.computes["h1"].fail = True
    cloud.boot()
    assert len(cloud.computes["h1"].calls) == 1
    assert _states(cloud)["h1"].failed_builds == 1
    cloud.computes["h1"].fail = False
    cloud.boot(force_hosts=["h1"])
    assert len(cloud.computes["h1"].calls) == 2
    _heartbeat(cloud, "h2")
    assert _states(cloud)["h1"].failed_builds == 0


def test_a_cells_heartbeat_brings_a_down_host_up_at_the_next_request(cloud):
    """The fleet's heartbeat (one UPDATE per cell) sets updated_at with
    last_seen_up: the services token sees it."""
    import types
    from novella.compute.manager import ComputeManager
    cloud.add_host("cell1", "h1", up=False)
    cloud.add_host("cell1", "h2", up=False)
    assert {h: s.service["up"] for h, s in _states(cloud).items()} == {"h1": False, "h2": False}
    db = cells_mod.cell_database(cloud.cells["cell1"])
    ComputeManager.heartbeat_hosts([types.SimpleNamespace(host="h1", cell_db=db)])
    assert {h: s.service["up"] for h, s in _states(cloud).items()} == {"h1": True, "h2": False}
