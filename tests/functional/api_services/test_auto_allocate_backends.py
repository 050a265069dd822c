"""Auto-allocated topologies asked for at once on every backend: one topology per
project (the ``auto_allocated_topologies`` row is the claim; a second request waits on
it, then returns the first one's network), and servers of the project racing for
``networks: "auto"`` get ports on that one network."""
import concurrent.futures

import pytest
import sqlalchemy as sa

from novella.context import get_admin_context
from novella.network import api, models
from tests.schemas import synced


@pytest.fixture(params=["sqlite", "postgresql", "mysql"])
def url(request, tmp_path):
    if request.param == "sqlite":
        return synced(f"sqlite:///{tmp_path}/net.db")
    return synced(request.getfixturevalue(f"{request.param}_url"))


def _count(net, model, *where):
    with net.db.session() as s:
        return s.scalar(sa.select(sa.func.count()).select_from(model).where(*where))


def test_racing_requests_and_servers_make_one_topology(url):
    ctxt = get_admin_context()
    net = api.NetworkAPI(url)
    net.create_network(ctxt, "public", cidr="172.24.4.0/24", external=True, is_default=True,
                       project_id="admin")
    net.create_subnetpool(ctxt, "default", ["10.128.0.0/16"], default_prefixlen=26,
                          is_default=True)
    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        ids = set(pool.map(lambda i: net.get_auto_allocated_topology(ctxt, "p1")["id"],
                           range(6)))
        vifs = list(pool.map(lambda i: net.allocate_for_instance(
            ctxt, f"server-{i}", "p2", "auto", host="h1"), range(6)))
    assert len(ids) == 1
    assert len({vif[0]["network"]["id"] for vif in vifs}) == 1
    for project in ("p1", "p2"):
        assert _count(net, models.Network, models.Network.project_id == project) == 1
        assert _count(net, models.Router, models.Router.project_id == project) == 1
        assert _count(net, models.Subnet, models.Subnet.project_id == project) == 1
    assert _count(net, models.AutoAllocatedTopology) == 2
    net.db.engine.dispose()
