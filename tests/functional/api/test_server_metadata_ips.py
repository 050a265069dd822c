"""/servers/{id}/metadata (rows of instance_metadata) and /servers/{id}/ips."""
import json

import sqlalchemy as sa

from novella.db import api_models as am, cell_models as cm


def _rows(cloud, uuid):
    with cloud.db("cell1").session() as s:
        return dict(s.execute(sa.select(cm.InstanceMetadata.key, cm.InstanceMetadata.value)
                              .where(cm.InstanceMetadata.instance_uuid == uuid)).all())


def _server(cloud, **kw):
    cloud.flavor()
    uuid = cloud.instance("cell1", host="h1", **kw)
    with cloud.db("cell1").session(write=True) as s:
        s.add(cm.InstanceMetadata(instance_uuid=uuid, key="a", value="1"))
    return uuid


def test_metadata_crud_changes_the_rows(cloud):
    uuid = _server(cloud)
    base = f"/servers/{uuid}/metadata"
    assert cloud.user.get(base).json == {"metadata": {"a": "1"}}
    resp = cloud.user.post(base, {"metadata": {"b": "2", "a": "x"}})
    assert (resp.status_int, resp.json) == (200, {"metadata": {"a": "x", "b": "2"}})
    assert _rows(cloud, uuid) == {"a": "x", "b": "2"}
    resp = cloud.user.put(base + "/c", {"meta": {"c": "3"}})
    assert (resp.status_int, resp.json) == (200, {"meta": {"c": "3"}})
    assert cloud.user.get(base + "/c").json == {"meta": {"c": "3"}}
    resp = cloud.user.put(base, {"metadata": {"z": "9"}})
    assert resp.json == {"metadata": {"z": "9"}}
    assert _rows(cloud, uuid) == {"z": "9"}
    assert cloud.user.delete(base + "/z").status_int == 204
    assert _rows(cloud, uuid) == {}
    assert cloud.user.get(f"/servers/{uuid}").json["server"]["metadata"] == {}


def test_bad_metadata_input_changes_nothing(cloud):
    uuid = _server(cloud)
    base = f"/servers/{uuid}/metadata"
    for method, path, body, code in [
            ("PUT", base + "/key", {"meta": {"other": "v"}}, 400),   # URI mismatch
            ("PUT", base + "/key", {"meta": {"k1": "v", "k2": "v"}}, 400),
            ("POST", base, {"metadata": {"": "v"}}, 400),
            ("PUT", base, {"metadata": {"k" * 256: "v"}}, 400),
            ("POST", base, {"meta": {"k": "v"}}, 400),
            ("GET", base + "/nope", None, 404),
            ("DELETE", base + "/nope", None, 404)]:
        resp = cloud.user.request(method, path, body)
        assert resp.status_int == code, (method, path, resp.body)
        assert "badRequest" in resp.json or "itemNotFound" in resp.json
    assert cloud.other.get(base).status_int == 404          # another project's server
    assert cloud.reader.post(base, {"metadata": {"r": "1"}}).status_int == 403
    assert _rows(cloud, uuid) == {"a": "1"}


def test_metadata_refused_over_quota_locked_or_busy(cloud):
    uuid = _server(cloud)
    with cloud.api_db.session(write=True) as s:
        s.add(am.QuotaClass(class_name="default", resource="metadata_items", hard_limit=2))
    base = f"/servers/{uuid}/metadata"
    resp = cloud.user.post(base, {"metadata": {"b": "2", "c": "3"}})
    assert resp.status_int == 403 and "metadata_items" in resp.json["forbidden"]["message"]
    with cloud.db("cell1").session(write=True) as s:
        s.execute(sa.update(cm.Instance).where(cm.Instance.uuid == uuid)
                  .values(task_state="rebooting"))
    assert cloud.user.post(base, {"metadata": {"b": "2"}}).status_int == 409
    with cloud.db("cell1").session(write=True) as s:
        s.execute(sa.update(cm.Instance).where(cm.Instance.uuid == uuid)
                  .values(task_state=None, locked=True, locked_by="admin"))
    assert cloud.user.delete(base + "/a").status_int == 409
    assert _rows(cloud, uuid) == {"a": "1"}


NW_INFO = [{"address": "fa:16:3e:00:00:01", "network": {"label": "private", "subnets": [
    {"ips": [{"address": "10.0.0.5", "version": 4, "type": "fixed"}]},
    {"ips": [{"address": "fd00::5", "version": 6, "type": "fixed"}]}]}}]


def test_ips_by_network(cloud):
    uuid = _server(cloud)
    with cloud.db("cell1").session(write=True) as s:
        s.add(cm.InstanceInfoCache(instance_uuid=uuid, network_info=json.dumps(NW_INFO)))
    expected = [{"version": 4, "addr": "10.0.0.5"}, {"version": 6, "addr": "fd00::5"}]
    assert cloud.user.get(f"/servers/{uuid}/ips").json == {"addresses": {"private": expected}}
    assert cloud.user.get(f"/servers/{uuid}/ips/private").json == {"private": expected}
    resp = cloud.user.get(f"/servers/{uuid}/ips/public")
    assert resp.status_int == 404
    assert resp.json["itemNotFound"]["message"] == "Instance is not a member of specified network"
    assert cloud.other.get(f"/servers/{uuid}/ips").status_int == 404


def test_list_filtered_by_ip(cloud):
    cloud.flavor()
    uuids = []
    for n, (v4, v6) in enumerate([("10.0.0.5", "fd00::5"), ("10.0.0.55", "fd00::55"),
                                  ("10.1.0.5", "fd00::6")]):
        uuid = cloud.instance("cell1" if n % 2 else "cell2", host="h1", name=f"vm{n}")
        info = [{"address": "fa:16:3e:00:00:0%d" % n, "network": {"label": "private", "subnets": [
            {"ips": [{"address": v4, "version": 4, "type": "fixed",
                      "floating_ips": [{"address": "172.24.4.%d" % n}]}]},
            {"ips": [{"address": v6, "version": 6, "type": "fixed"}]}]}}]
        with cloud.db("cell1" if n % 2 else "cell2").session(write=True) as s:
            s.add(cm.InstanceInfoCache(instance_uuid=uuid, network_info=json.dumps(info)))
        uuids.append(uuid)

    def listed(query):
        resp = cloud.user.get("/servers?" + query)
        assert resp.status_int == 200, resp.body
        return sorted(s["id"] for s in resp.json["servers"])

    assert listed("ip=10.0.0.5") == sorted(uuids[:2])          # a prefix match
    assert listed("ip=10.0.0.5$") == [uuids[0]]
    assert listed("ip=10.0.0.5&limit=1") in ([uuids[0]], [uuids[1]])
    assert listed("ip6=fd00::6") == [uuids[2]]
    assert listed("ip=172.24.4") == []                          # floating: not matched
    assert listed("ip=10.9") == []
    assert cloud.user.get("/servers?ip=(").status_int == 400
