"""Aggregates mirrored into placement; a deleted compute service's providers removed."""
import sqlalchemy as sa

from novella.db import cell_models as cm
from novella.placement import conf as pconf, wsgi as pwsgi
from novella.placement.client import PlacementClient


def test_aggregate_hosts_and_service_delete_reach_placement(cloud, tmp_path):
    app = pwsgi.make_app(pconf.make_conf(overrides={
        "placement_database": {"connection": f"sqlite:///{tmp_path}/placement.db"},
        "api": {"auth_strategy": "noauth2"}}))
    placement = PlacementClient(app=app, token="admin")
    cloud.aggregate_events = None
    from novella.api.compute import wsgi
    cloud.app = wsgi.make_app(cloud.conf, cloud.api_db, cloud.transport, placement=placement)
    from tests.functional.api.conftest import Client
    admin = Client(cloud.app, "admin:admin-project")
    svc_uuid = cloud.compute_host("cell1", "h1")
    with cloud.db("cell1").session() as s:
        node = s.scalars(sa.select(cm.ComputeNode)).one().uuid
    placement.create_resource_provider(node, name="h1")

    agg = admin.post("/os-aggregates", {"aggregate": {"name": "a"}}, version="2.41").json["aggregate"]
    assert admin.post(f"/os-aggregates/{agg['id']}/action", {"add_host": {"host": "h1"}}).status_int == 200
    assert placement.get_aggregates(node)[1] == [agg["uuid"]]
    assert admin.post(f"/os-aggregates/{agg['id']}/action", {"remove_host": {"host": "h1"}}).status_int == 200
    assert placement.get_aggregates(node)[1] == []

    # Disabling tells the (up) host, which keeps its trait in step.
    assert admin.put(f"/os-services/{svc_uuid}", {"status": "disabled"}, version="2.53").status_int == 200
    assert cloud.computes["cell1"].calls[-1][0] == "set_host_enabled"
    assert cloud.computes["cell1"].calls[-1][1] == {"enabled": False}

    assert admin.delete(f"/os-services/{svc_uuid}", version="2.53").status_int == 204
    assert placement.get_resource_provider(node) is None
