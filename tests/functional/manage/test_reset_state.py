"""POST /servers/{id}/action os-resetState: admins force vm_state, task_state is cleared."""
import sqlalchemy as sa

from novella.db import cell_models as cm


def _row(cloud, sid):
    with cloud.cell_db().session() as s:
        return s.execute(sa.select(cm.Instance.vm_state, cm.Instance.task_state)
                         .where(cm.Instance.uuid == sid)).one()


def test_reset_state_sets_vm_state_clears_task_state_and_records_the_action(cloud):
    sid = cloud.boot()
    with cloud.cell_db().session(write=True) as s:
        s.execute(sa.update(cm.Instance).where(cm.Instance.uuid == sid)
                  .values(task_state="migrating"))
    assert cloud.action(sid, {"os-resetState": {"state": "error"}}) == (202, None)
    assert tuple(_row(cloud, sid)) == ("error", None)
    assert cloud.server(sid)["status"] == "ERROR"
    status, body = cloud.api("GET", f"/servers/{sid}/os-instance-actions")
    reset = [a for a in body["instanceActions"] if a["action"] == "resetState"]
    assert len(reset) == 1 and reset[0]["user_id"] == "admin"
    with cloud.cell_db().session() as s:
        finished = s.scalar(sa.select(cm.InstanceAction.finish_time)
                            .where(cm.InstanceAction.action == "resetState"))
    assert finished is not None

    assert cloud.action(sid, {"os-resetState": {"state": "active"}}) == (202, None)
    assert tuple(_row(cloud, sid)) == ("active", None)


def test_reset_state_is_for_admins_and_checks_its_body(cloud):
    sid = cloud.boot(token="demo:demo")
    status, body = cloud.action(sid, {"os-resetState": {"state": "error"}}, token="demo:demo")
    assert status == 403, body
    for bad in ({"state": "stopped"}, {}, {"state": "error", "extra": 1}, None):
        status, body = cloud.action(sid, {"os-resetState": bad})
        assert status == 400, (bad, body)
        assert "badRequest" in body
    assert tuple(_row(cloud, sid)) == ("active", None)
    status, body = cloud.action("00000000-0000-0000-0000-00000000abcd",
                                {"os-resetState": {"state": "error"}})
    assert status == 404 and "itemNotFound" in body
