"""Concurrent writers on every backend: no address given twice, no volume attached twice."""
import concurrent.futures

import pytest
import sqlalchemy as sa

from novella.context import get_admin_context
from novella.network import api, models
from novella.volume import api as volume_api
from tests.schemas import synced


@pytest.fixture(params=["sqlite", "postgresql", "mysql"])
def url(request, tmp_path):
    if request.param == "sqlite":
        return synced(f"sqlite:///{tmp_path}/net.db")
    return synced(request.getfixturevalue(f"{request.param}_url"))


def test_parallel_ports_get_distinct_addresses(url):
    ctxt = get_admin_context()
    net = api.NetworkAPI(url)
    private = net.ensure_default_network(ctxt)
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        ports = list(pool.map(lambda i: net.create_port(ctxt, {"network_id": private["id"]}),
                              range(24)))
    ips = [p["fixed_ips"][0]["ip_address"] for p in ports]
    assert len(set(ips)) == 24
    with net.db.session() as s:
        assert s.scalar(sa.select(sa.func.count()).select_from(models.IPAllocation)) == 24
    net.db.engine.dispose()


def test_two_servers_racing_for_one_volume(url):
    ctxt = get_admin_context()
    volumes = volume_api.VolumeAPI(url)
    vol = volumes.create(ctxt, 1)

    def attach(i):
        try:
            return volumes.attachment_create(ctxt, vol["id"], f"server-{i}", connector={"host": "h"})
        except volume_api.VolumeConflict:
            return None

    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        won = [a for a in pool.map(attach, range(6)) if a]
    assert len(won) == 1
    assert len(volumes.attachment_list(ctxt, volume_id=vol["id"])) == 1
    assert volumes.get(ctxt, vol["id"])["status"] == "attaching"
    volumes.db.engine.dispose()


def test_racing_activations_leave_one_active_binding(url):
    ctxt = get_admin_context()
    net = api.NetworkAPI(url)
    private = net.ensure_default_network(ctxt)
    port = net.create_port(ctxt, {"network_id": private["id"], "binding:host_id": "src"})
    hosts = [f"dst{i}" for i in range(6)]
    for h in hosts:
        net.create_port_binding(ctxt, port["id"], h)
    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        list(pool.map(lambda h: net.activate_port_binding(ctxt, port["id"], h), hosts))
    with net.db.session() as s:
        statuses = s.scalars(sa.select(models.PortBinding.status)
                             .where(models.PortBinding.port_id == port["id"])).all()
    assert sorted(statuses) == ["ACTIVE"] + ["INACTIVE"] * 6
    net.db.engine.dispose()
