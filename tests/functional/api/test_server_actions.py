"""Power actions: guarded task state, instance action record, cast to the host."""
import sqlalchemy as sa

from novella.db import cell_models as cm


def _state(cloud, cell, uuid):
    with cloud.db(cell).session() as s:
        inst = s.scalars(sa.select(cm.Instance).where(cm.Instance.uuid == uuid)).one()
        actions = [a.action for a in s.scalars(sa.select(cm.InstanceAction).order_by(cm.InstanceAction.id))]
        return inst.vm_state, inst.task_state, actions


def test_stop_start_reboot(cloud):
    cloud.compute_host("cell2", "h2")
    uuid = cloud.instance("cell2", host="h2")
    resp = cloud.user.post(f"/servers/{uuid}/action", {"os-stop": None})
    assert resp.status_int == 202
    assert _state(cloud, "cell2", uuid) == ("active", "powering-off", ["stop"])
    with cloud.db("cell2").session() as s:
        assert s.scalars(sa.select(cm.InstanceAction.request_id)).one() == \
            resp.headers["x-openstack-request-id"]
    # A second stop while the first runs conflicts and records nothing.
    resp = cloud.user.post(f"/servers/{uuid}/action", {"os-stop": None})
    assert resp.status_int == 409 and "conflictingRequest" in resp.json
    cloud.wait()
    assert cloud.computes["cell2"].methods() == ["stop_instance"]
    with cloud.db("cell2").session(write=True) as s:  # the host finished stopping
        s.execute(sa.update(cm.Instance).values(vm_state="stopped", task_state=None))
    assert cloud.user.post(f"/servers/{uuid}/action", {"os-start": None}).status_int == 202
    assert _state(cloud, "cell2", uuid) == ("stopped", "powering-on", ["stop", "start"])
    with cloud.db("cell2").session(write=True) as s:
        s.execute(sa.update(cm.Instance).values(vm_state="active", task_state=None))
    resp = cloud.user.post(f"/servers/{uuid}/action", {"reboot": {"type": "HARD"}})
    assert resp.status_int == 202
    assert _state(cloud, "cell2", uuid) == ("active", "rebooting_hard", ["stop", "start", "reboot"])
    cloud.wait()
    calls = cloud.computes["cell2"].calls
    assert [c[0] for c in calls] == ["stop_instance", "start_instance", "reboot_instance"]
    assert calls[2][1] == {"instance_uuid": uuid, "reboot_type": "HARD"}
    with cloud.db("cell2").session() as s:
        req_ids = {a.request_id for a in s.scalars(sa.select(cm.InstanceAction))}
    assert len(req_ids) == 3


def test_start_of_active_server_conflicts(cloud):
    cloud.compute_host("cell1", "h1")
    uuid = cloud.instance("cell1", host="h1")
    resp = cloud.user.post(f"/servers/{uuid}/action", {"os-start": None})
    assert resp.status_int == 409
    assert resp.json["conflictingRequest"]["message"] == \
        f"Cannot 'start' instance {uuid} while it is in vm_state active"
    assert _state(cloud, "cell1", uuid) == ("active", None, [])


def test_bad_actions(cloud):
    cloud.compute_host("cell1", "h1")
    uuid = cloud.instance("cell1", host="h1")
    for body in ({"fly": None}, {"reboot": {"type": "GENTLE"}}, {"reboot": {}},
                 {"os-stop": None, "os-start": None}):
        resp = cloud.user.post(f"/servers/{uuid}/action", body)
        assert resp.status_int == 400, body
        assert "badRequest" in resp.json
    assert _state(cloud, "cell1", uuid) == ("active", None, [])


def test_action_on_building_server_conflicts(cloud):
    cloud.flavor()
    uuid = cloud.user.post("/servers", {"server": {
        "name": "b", "flavorRef": "1", "imageRef": "155d900f-4e14-4e4c-a73d-069cbf4541e6"}}).json["server"]["id"]
    assert cloud.user.post(f"/servers/{uuid}/action", {"os-stop": None}).status_int == 409


def test_reader_cannot_stop(cloud):
    cloud.compute_host("cell1", "h1")
    uuid = cloud.instance("cell1", host="h1")
    assert cloud.reader.get("/servers/" + uuid).status_int == 200
    resp = cloud.reader.post(f"/servers/{uuid}/action", {"os-stop": None})
    assert resp.status_int == 403 and "forbidden" in resp.json
    assert _state(cloud, "cell1", uuid) == ("active", None, [])


def test_locked_server_conflicts_for_owner_not_admin(cloud):
    cloud.compute_host("cell1", "h1")
    uuid = cloud.instance("cell1", host="h1", locked=True)
    assert cloud.user.post(f"/servers/{uuid}/action", {"os-stop": None}).status_int == 409
    assert cloud.admin.post(f"/servers/{uuid}/action", {"os-stop": None}).status_int == 202


def test_instance_actions_with_events(cloud):
    from novella.context import RequestContext
    from novella.db import records
    cloud.compute_host("cell1", "h1")
    uuid = cloud.instance("cell1", host="h1")
    cloud.user.post(f"/servers/{uuid}/action", {"os-stop": None})
    with cloud.db("cell1").session() as s:
        req_id = s.scalars(sa.select(cm.InstanceAction.request_id)).one()
    ctxt = RequestContext(user_id="alice", project_id="project-a", request_id=req_id)
    try:
        with records.action_event(cloud.db("cell1"), ctxt, uuid, "compute_stop_instance", host="h1"):
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    resp = cloud.user.get(f"/servers/{uuid}/os-instance-actions")
    assert resp.status_int == 200
    (action,) = resp.json["instanceActions"]
    assert action["action"] == "stop" and action["request_id"] == req_id
    # 2.51+: a user sees events but no traceback or host.
    event = cloud.user.get(f"/servers/{uuid}/os-instance-actions/{req_id}",
                           version="2.62").json["instanceAction"]["events"][0]
    assert event["event"] == "compute_stop_instance" and event["result"] == "Error"
    assert "traceback" not in event and "host" not in event and event["hostId"]
    assert "events" not in cloud.user.get(f"/servers/{uuid}/os-instance-actions/{req_id}",
                                          version="2.50").json["instanceAction"]
    admin_event = cloud.admin.get(f"/servers/{uuid}/os-instance-actions/{req_id}",
                                  version="2.62").json["instanceAction"]["events"][0]
    assert "RuntimeError: boom" in admin_event["traceback"] and admin_event["host"] == "h1"
    assert cloud.user.get(f"/servers/{uuid}/os-instance-actions/req-nope").status_int == 404


def test_instance_actions_paging(cloud):
    import datetime
    from novella.context import RequestContext
    from novella.db import records
    uuid = cloud.instance("cell1", host="h1")
    ids = []
    for i in range(5):
        ctxt = RequestContext(user_id="alice", project_id="project-a")
        records.start_action(cloud.db("cell1"), ctxt, uuid, f"act{i}")
        ids.append(ctxt.request_id)
    page1 = cloud.user.get(f"/servers/{uuid}/os-instance-actions?limit=2", version="2.58").json
    assert [a["action"] for a in page1["instanceActions"]] == ["act4", "act3"]
    assert page1["links"][0]["rel"] == "next"
    page2 = cloud.user.get(f"/servers/{uuid}/os-instance-actions?limit=2&marker={ids[3]}",
                           version="2.58").json
    assert [a["action"] for a in page2["instanceActions"]] == ["act2", "act1"]
    assert cloud.user.get(f"/servers/{uuid}/os-instance-actions?marker=req-x",
                          version="2.58").status_int == 400
    future = (datetime.datetime.utcnow() + datetime.timedelta(hours=1)).isoformat()
    resp = cloud.user.get(f"/servers/{uuid}/os-instance-actions?changes-since={future}", version="2.58")
    assert resp.json["instanceActions"] == []


def test_server_tags(cloud):
    uuid = cloud.instance("cell2", host="h2", tags=["a"])
    assert cloud.user.get(f"/servers/{uuid}/tags").status_int == 404  # before 2.26
    v = "2.26"
    assert cloud.user.get(f"/servers/{uuid}/tags", version=v).json == {"tags": ["a"]}
    assert cloud.user.put(f"/servers/{uuid}/tags/b", version=v).status_int == 201
    assert cloud.user.put(f"/servers/{uuid}/tags/b", version=v).status_int == 204
    assert cloud.user.get(f"/servers/{uuid}/tags/b", version=v).status_int == 204
    assert cloud.user.put(f"/servers/{uuid}/tags", {"tags": ["x", "y"]}, version=v).json == {"tags": ["x", "y"]}
    assert cloud.user.put(f"/servers/{uuid}/tags", {"tags": ["bad/tag"]}, version=v).status_int == 400
    assert cloud.user.put(f"/servers/{uuid}/tags", {"tags": [f"t{i}" for i in range(51)]},
                          version=v).status_int == 400
    assert cloud.user.delete(f"/servers/{uuid}/tags/zz", version=v).status_int == 404
    assert cloud.user.delete(f"/servers/{uuid}/tags/x", version=v).status_int == 204
    with cloud.db("cell2").session() as s:
        assert list(s.scalars(sa.select(cm.Tag.tag))) == ["y"]
    assert cloud.reader.put(f"/servers/{uuid}/tags/q", version=v).status_int == 403
    assert cloud.user.delete(f"/servers/{uuid}/tags", version=v).status_int == 204
    assert cloud.count(cloud.db("cell2"), cm.Tag) == 0
