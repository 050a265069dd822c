"""/os-hosts, /os-simple-tenant-usage, /os-instance_usage_audit_log, /extensions, the
/v2 version document, hypervisor uptime, server diagnostics and password, and
/os-server-external-events."""
import datetime
import json

import sqlalchemy as sa

from novella.db import cell_models as cm, records

NOW = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None, microsecond=0)


def _service(cloud, cell, host):
    with cloud.db(cell).session() as s:
        return s.scalars(sa.select(cm.Service).where(cm.Service.host == host)).one()


def test_os_hosts(cloud):
    cloud.compute_host("cell1", "h1")
    cloud.compute_host("cell2", "h2")
    cloud.instance("cell1", host="h1", vcpus=2, memory_mb=512, root_gb=1, ephemeral_gb=0)
    hosts = cloud.admin.get("/os-hosts").json["hosts"]
    assert sorted(h["host_name"] for h in hosts) == ["h1", "h2"]
    assert {h["service"] for h in hosts} == {"compute"} and {h["zone"] for h in hosts} == {"nova"}
    assert cloud.admin.get("/os-hosts?zone=elsewhere").json["hosts"] == []
    shown = cloud.admin.get("/os-hosts/h1").json["host"]
    by_project = {r["resource"]["project"]: r["resource"] for r in shown}
    assert by_project["(total)"]["cpu"] == 16
    assert (by_project["(used_max)"]["cpu"], by_project["project-a"]["memory_mb"]) == (2, 512)
    resp = cloud.admin.put("/os-hosts/h1", {"status": "disable"})
    assert resp.json == {"host": "h1", "status": "disabled"}
    assert _service(cloud, "cell1", "h1").disabled is True
    assert [h["host_name"] for h in cloud.admin.get("/os-hosts").json["hosts"]] == ["h2"]
    assert cloud.admin.put("/os-hosts/h1", {"status": "enable"}).json["status"] == "enabled"
    assert _service(cloud, "cell1", "h1").disabled is False
    # Refusals change nothing.
    for method, path, body, code in [("PUT", "/os-hosts/h1", {"status": "off"}, 400),
                                     ("PUT", "/os-hosts/h1", {}, 400),
                                     ("PUT", "/os-hosts/nope", {"status": "disable"}, 404),
                                     ("PUT", "/os-hosts/h1", {"maintenance_mode": "enable"}, 501),
                                     ("GET", "/os-hosts/nope", None, 404),
                                     ("GET", "/os-hosts/nope/reboot", None, 404),
                                     ("GET", "/os-hosts/h1/shutdown", None, 501)]:
        assert cloud.admin.request(method, path, body).status_int == code, (method, path)
    assert _service(cloud, "cell1", "h1").disabled is False
    assert cloud.user.get("/os-hosts").status_int == 403
    assert cloud.admin.get("/os-hosts", version="2.43").status_int == 404


def test_simple_tenant_usage(cloud):
    cloud.compute_host("cell1", "h1")
    flavor = {"id": 1, "flavorid": "1", "name": "m1.small", "memory_mb": 512, "vcpus": 2,
              "root_gb": 1, "ephemeral_gb": 0, "swap": 0, "extra_specs": {}}
    run = cloud.instance("cell1", host="h1", flavor=flavor, launched_at=NOW - datetime.timedelta(hours=2))
    cloud.instance("cell2", project="project-b", host="h1", flavor=flavor,
                   launched_at=NOW - datetime.timedelta(hours=3),
                   terminated_at=NOW - datetime.timedelta(hours=1), deleted=1)
    cloud.instance("cell1", host="h1", flavor=flavor)             # never launched: not counted
    start = (NOW - datetime.timedelta(hours=10)).strftime("%Y-%m-%dT%H:%M:%S")
    usages = cloud.admin.get(f"/os-simple-tenant-usage?start={start}&detailed=1").json[
        "tenant_usages"]
    by_project = {u["tenant_id"]: u for u in usages}
    assert set(by_project) == {"project-a", "project-b"}
    assert round(by_project["project-b"]["total_hours"]) == 2
    assert round(by_project["project-b"]["total_vcpus_usage"]) == 4
    (server,) = by_project["project-a"]["server_usages"]
    assert (server["instance_id"], server["state"], server["flavor"]) == (run, "active", "m1.small")
    mine = cloud.user.get(f"/os-simple-tenant-usage/project-a?start={start}").json["tenant_usage"]
    assert mine["tenant_id"] == "project-a" and len(mine["server_usages"]) == 1
    paged = cloud.admin.get(f"/os-simple-tenant-usage?start={start}&limit=1", version="2.40").json
    assert len(paged["tenant_usages"]) == 1 and paged["tenant_usages_links"][0]["rel"] == "next"
    assert cloud.admin.get("/os-simple-tenant-usage?start=yesterday").status_int == 400
    assert cloud.admin.get(f"/os-simple-tenant-usage?start={start}&end=2000-01-01T00:00:00"
                           ).status_int == 400
    assert cloud.user.get("/os-simple-tenant-usage").status_int == 403
    assert cloud.user.get("/os-simple-tenant-usage/project-b").status_int == 403


def test_usage_audit_log_extensions_v2_and_uptime(cloud):
    cloud.compute_host("cell1", "h1")
    log = cloud.admin.get("/os-instance_usage_audit_log").json["instance_usage_audit_logs"]
    assert (log["num_hosts"], log["num_hosts_not_run"], log["hosts_not_run"]) == (1, 1, ["h1"])
    shown = cloud.admin.get("/os-instance_usage_audit_log/2012-12-12%2000:00:00").json
    assert shown["instance_usage_audit_log"]["period_beginning"] == "2012-11-01 00:00:00"
    assert cloud.admin.get("/os-instance_usage_audit_log/notatime").status_int == 400
    assert cloud.user.get("/os-instance_usage_audit_log").status_int == 403
    exts = cloud.user.get("/extensions").json["extensions"]
    assert "Hosts" in [e["name"] for e in exts]
    assert cloud.user.get("/extensions/os-consoles").json["extension"]["alias"] == "os-consoles"
    assert cloud.user.get("/extensions/nope").status_int == 404
    v2 = cloud.user.get("/v2/").json["version"]
    assert (v2["id"], v2["status"]) == ("v2.0", "DEPRECATED")
    node = cloud.admin.get("/os-hypervisors").json["hypervisors"][0]
    up = cloud.admin.get(f"/os-hypervisors/{node['id']}/uptime").json["hypervisor"]
    assert " up 0 days," in up["uptime"]
    assert cloud.user.get(f"/os-hypervisors/{node['id']}/uptime").status_int == 403
    assert cloud.admin.get(f"/os-hypervisors/{node['id']}/uptime", version="2.88").status_int == 404


def test_diagnostics_and_password(cloud):
    cloud.compute_host("cell1", "h1")
    uuid = cloud.instance("cell1", host="h1", launched_at=NOW)
    with cloud.db("cell1").session(write=True) as s:
        s.add(cm.InstanceInfoCache(instance_uuid=uuid, network_info=json.dumps(
            [{"address": "fa:16:3e:00:00:01", "network": {"label": "private", "subnets": []}}])))
    diag = cloud.admin.get(f"/servers/{uuid}/diagnostics", version="2.48").json
    assert (diag["state"], diag["num_cpus"], diag["num_nics"]) == ("running", 1, 1)
    assert diag["memory_details"]["maximum"] == 512
    assert diag["nic_details"][0]["mac_address"] == "fa:16:3e:00:00:01"
    assert "memory" in cloud.admin.get(f"/servers/{uuid}/diagnostics").json
    assert cloud.user.get(f"/servers/{uuid}/diagnostics").status_int == 403
    assert cloud.user.get(f"/servers/{uuid}/os-server-password").json == {"password": ""}
    records.set_system_metadata(cloud.db("cell1"), uuid, password_0="abc", password_1="def")
    assert cloud.user.get(f"/servers/{uuid}/os-server-password").json == {"password": "abcdef"}
    assert cloud.reader.delete(f"/servers/{uuid}/os-server-password").status_int == 403
    assert cloud.user.delete(f"/servers/{uuid}/os-server-password").status_int == 204
    assert "password_0" not in records.system_metadata(cloud.db("cell1"), uuid)
    assert cloud.other.get(f"/servers/{uuid}/os-server-password").status_int == 404


def test_external_events(cloud):
    cloud.compute_host("cell1", "h1")
    uuid = cloud.instance("cell1", host="h1")
    shelved = cloud.instance("cell1", vm_state="shelved_offloaded")
    missing = "6ba7b810-9dad-11d1-80b4-00c04fd430c8"
    events = [{"name": "network-changed", "server_uuid": u} for u in (uuid, shelved, missing)]
    resp = cloud.admin.post("/os-server-external-events", {"events": events})
    assert resp.status_int == 207
    assert [e["code"] for e in resp.json["events"]] == [200, 422, 404]
    assert cloud.admin.post("/os-server-external-events", {"events": events[:1]}).status_int == 200
    assert cloud.admin.post("/os-server-external-events", {"events": events[2:]}).status_int == 404
    assert cloud.admin.post("/os-server-external-events", {"events": [
        {"name": "bogus", "server_uuid": uuid}]}).status_int == 400
    assert cloud.admin.post("/os-server-external-events", {"events": [
        {"name": "power-update", "server_uuid": uuid}]}).status_int == 400   # before 2.76
    assert cloud.user.post("/os-server-external-events", {"events": events[:1]}).status_int == 403
