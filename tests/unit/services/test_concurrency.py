"""Concurrent port creation never hands out one address twice, on every backend."""
import concurrent.futures

import pytest
import sqlalchemy as sa

from novella.context import get_admin_context
from novella.network import api, models


@pytest.fixture(params=["sqlite", "postgresql", "mysql"])
def url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/net.db"
    return request.getfixturevalue(f"{request.param}_url")


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
