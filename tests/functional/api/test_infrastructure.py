"""os-services, os-hypervisors, os-availability-zone and os-aggregates across cells."""
import datetime
import uuid as uuid_mod

import sqlalchemy as sa

from novella.db import api_models as am, cell_models as cm


def _hosts(cloud):
    ids = {"h1": cloud.compute_host("cell1", "h1"), "h2": cloud.compute_host("cell2", "h2")}
    with cloud.db("cell1").session(write=True) as s:
        s.add(cm.Service(uuid=str(uuid_mod.uuid4()), host="ctl", binary="nova-conductor",
                         last_seen_up=datetime.datetime.utcnow()))
    return ids


def test_services_list_and_update(cloud):
    ids = _hosts(cloud)
    assert cloud.user.get("/os-services").status_int == 403
    services = cloud.admin.get("/os-services", version="2.53").json["services"]
    by_host = {s["host"]: s for s in services}
    assert set(by_host) == {"h1", "h2", "ctl"}
    assert by_host["h1"]["id"] == ids["h1"] and by_host["h1"]["state"] == "up"
    assert by_host["h1"]["zone"] == "nova" and by_host["ctl"]["zone"] == "internal"
    assert [s["host"] for s in cloud.admin.get("/os-services?binary=nova-compute").json["services"]] == ["h1", "h2"]
    resp = cloud.admin.put(f"/os-services/{ids['h2']}", {"status": "disabled", "disabled_reason": "maint"},
                           version="2.53")
    assert resp.status_int == 200
    assert resp.json["service"]["status"] == "disabled" and resp.json["service"]["disabled_reason"] == "maint"
    resp = cloud.admin.put(f"/os-services/{ids['h2']}", {"forced_down": True}, version="2.53")
    assert resp.json["service"]["forced_down"] is True and resp.json["service"]["state"] == "down"
    with cloud.db("cell2").session() as s:
        svc = s.scalars(sa.select(cm.Service)).one()
    assert svc.disabled and svc.forced_down and svc.disabled_reason == "maint"
    assert cloud.admin.put(f"/os-services/{ids['h2']}", {"disabled_reason": "x"}, version="2.53").status_int == 400
    assert cloud.admin.put(f"/os-services/{uuid_mod.uuid4()}", {"status": "enabled"}, version="2.53").status_int == 404
    ctl = by_host["ctl"]["id"]
    assert cloud.admin.put(f"/os-services/{ctl}", {"status": "disabled"}, version="2.53").status_int == 400


def test_services_legacy_actions(cloud):
    _hosts(cloud)
    resp = cloud.admin.put("/os-services/disable-log-reason",
                           {"host": "h1", "binary": "nova-compute", "disabled_reason": "why"})
    assert resp.json["service"] == {"host": "h1", "binary": "nova-compute", "status": "disabled",
                                    "disabled_reason": "why"}
    assert cloud.admin.put("/os-services/enable", {"host": "h1", "binary": "nova-compute"}).json["service"]["status"] == "enabled"
    assert cloud.admin.put("/os-services/force-down", {"host": "h1", "binary": "nova-compute",
                                                       "forced_down": True}, version="2.11").status_int == 200
    assert cloud.admin.put("/os-services/force-down", {"host": "h1", "binary": "nova-compute",
                                                       "forced_down": True}).status_int == 404
    assert cloud.admin.put("/os-services/enable", {"host": "nope", "binary": "nova-compute"}).status_int == 404
    with cloud.db("cell1").session() as s:
        svc = s.scalars(sa.select(cm.Service).where(cm.Service.host == "h1")).one()
    assert not svc.disabled and svc.forced_down


def test_delete_service(cloud):
    ids = _hosts(cloud)
    cloud.instance("cell1", host="h1")
    resp = cloud.admin.delete(f"/os-services/{ids['h1']}", version="2.53")
    assert resp.status_int == 409
    agg = cloud.admin.post("/os-aggregates", {"aggregate": {"name": "a"}}).json["aggregate"]
    cloud.admin.post(f"/os-aggregates/{agg['id']}/action", {"add_host": {"host": "h2"}})
    assert cloud.admin.delete(f"/os-services/{ids['h2']}", version="2.53").status_int == 204
    assert cloud.count(cloud.db("cell2"), cm.Service, cm.Service.deleted == 0) == 0
    assert cloud.count(cloud.db("cell2"), cm.ComputeNode, cm.ComputeNode.deleted == 0) == 0
    assert cloud.count(cloud.api_db, am.HostMapping, am.HostMapping.host == "h2") == 0
    assert cloud.count(cloud.api_db, am.AggregateHost) == 0
    assert cloud.aggregate_events[-1][0] == "remove_host"


def test_hypervisors(cloud):
    _hosts(cloud)
    cloud.instance("cell2", host="h2", name="on-h2")
    assert cloud.user.get("/os-hypervisors").status_int == 403
    hvs = cloud.admin.get("/os-hypervisors", version="2.53").json["hypervisors"]
    assert [h["hypervisor_hostname"] for h in hvs] == ["h1", "h2"]
    assert all(h["state"] == "up" and h["status"] == "enabled" for h in hvs)
    detail = cloud.admin.get("/os-hypervisors/detail", version="2.87").json["hypervisors"]
    assert detail[0]["vcpus"] == 16 and detail[0]["service"]["host"] == "h1"
    detail = cloud.admin.get("/os-hypervisors/detail", version="2.88").json["hypervisors"]
    assert "vcpus" not in detail[0]
    h2 = hvs[1]["id"]
    show = cloud.admin.get(f"/os-hypervisors/{h2}?with_servers=true", version="2.53").json["hypervisor"]
    assert show["servers"][0]["name"] == "on-h2"
    page = cloud.admin.get("/os-hypervisors?limit=1", version="2.53").json
    assert len(page["hypervisors"]) == 1 and page["hypervisors_links"]
    assert cloud.admin.get(f"/os-hypervisors?limit=1&marker={hvs[0]['id']}", version="2.53").json["hypervisors"][0]["id"] == h2
    assert [h["hypervisor_hostname"] for h in cloud.admin.get(
        "/os-hypervisors?hypervisor_hostname_pattern=h2", version="2.53").json["hypervisors"]] == ["h2"]
    assert cloud.admin.get(f"/os-hypervisors/{uuid_mod.uuid4()}", version="2.53").status_int == 404
    assert cloud.admin.get("/os-hypervisors/statistics").json["hypervisor_statistics"]["count"] == 2
    assert cloud.admin.get("/os-hypervisors/h1/search").json["hypervisors"][0]["hypervisor_hostname"] == "h1"


def test_aggregates_and_availability_zones(cloud):
    _hosts(cloud)
    assert cloud.user.get("/os-aggregates").status_int == 403
    resp = cloud.admin.post("/os-aggregates", {"aggregate": {"name": "fast", "availability_zone": "az1"}})
    assert resp.status_int == 200
    agg = resp.json["aggregate"]
    assert agg["availability_zone"] == "az1" and "hosts" not in agg
    assert cloud.admin.post("/os-aggregates", {"aggregate": {"name": "fast"}}).status_int == 409
    aid = agg["id"]
    resp = cloud.admin.post(f"/os-aggregates/{aid}/action", {"add_host": {"host": "h1"}})
    assert resp.status_int == 200 and resp.json["aggregate"]["hosts"] == ["h1"]
    assert cloud.aggregate_events == [("add_host", agg["uuid"] if "uuid" in agg else
                                       cloud.admin.get(f"/os-aggregates/{aid}", version="2.41").json["aggregate"]["uuid"], "h1")]
    assert cloud.admin.post(f"/os-aggregates/{aid}/action", {"add_host": {"host": "h1"}}).status_int == 409
    assert cloud.admin.post(f"/os-aggregates/{aid}/action", {"add_host": {"host": "ghost"}}).status_int == 404
    # A host cannot be in two zones.
    other = cloud.admin.post("/os-aggregates", {"aggregate": {"name": "slow", "availability_zone": "az2"}}).json["aggregate"]
    assert cloud.admin.post(f"/os-aggregates/{other['id']}/action", {"add_host": {"host": "h1"}}).status_int == 409
    resp = cloud.admin.post(f"/os-aggregates/{aid}/action",
                            {"set_metadata": {"metadata": {"ssd": "true", "availability_zone": "az9"}}})
    assert resp.json["aggregate"]["metadata"] == {"ssd": "true", "availability_zone": "az9"}
    resp = cloud.admin.post(f"/os-aggregates/{aid}/action", {"set_metadata": {"metadata": {"ssd": None}}})
    assert resp.json["aggregate"]["metadata"] == {"availability_zone": "az9"}
    zones = cloud.user.get("/os-availability-zone").json["availabilityZoneInfo"]
    assert {z["zoneName"] for z in zones} == {"az9", "nova"}
    detail = cloud.admin.get("/os-availability-zone/detail").json["availabilityZoneInfo"]
    by_zone = {z["zoneName"]: z for z in detail}
    assert set(by_zone["az9"]["hosts"]) == {"h1"} and set(by_zone["internal"]["hosts"]) == {"ctl"}
    assert by_zone["az9"]["hosts"]["h1"]["nova-compute"]["available"] is True
    services = {s["host"]: s["zone"] for s in cloud.admin.get("/os-services").json["services"]}
    assert services == {"h1": "az9", "h2": "nova", "ctl": "internal"}
    # A server may now ask for az9.
    cloud.flavor()
    assert cloud.user.post("/servers", {"server": {"name": "z", "flavorRef": "1",
                                                   "imageRef": "155d900f-4e14-4e4c-a73d-069cbf4541e6",
                                                   "availability_zone": "az9"}}).status_int == 202
    assert cloud.admin.put(f"/os-aggregates/{aid}", {"aggregate": {"name": "faster"}}).json["aggregate"]["name"] == "faster"
    assert cloud.admin.delete(f"/os-aggregates/{aid}").status_int == 400
    assert cloud.admin.post(f"/os-aggregates/{aid}/action", {"remove_host": {"host": "h1"}}).status_int == 200
    assert cloud.admin.post(f"/os-aggregates/{aid}/action", {"remove_host": {"host": "h1"}}).status_int == 404
    assert cloud.admin.delete(f"/os-aggregates/{aid}").status_int == 200
    assert cloud.count(cloud.api_db, am.Aggregate) == 1
    assert cloud.admin.get(f"/os-aggregates/{aid}").status_int == 404
    assert [e[0] for e in cloud.aggregate_events] == ["add_host", "remove_host"]
