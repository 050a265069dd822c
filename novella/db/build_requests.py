"""A server before a cell holds it (API database): its build request, request
spec, instance mapping and server group membership, written and removed together.
"""
import json

import sqlalchemy as sa

from novella.db import api_models as am
from novella.db.engine import insert_rows

# What a create writes for each server, and so what undoing it removes.
_ROWS_OF_A_SERVER = (am.BuildRequest, am.RequestSpec, am.InstanceMapping, am.InstanceGroupMember)


def add(conn, project_id, user_id, instances, specs, bdms, tags, now, group_id=None):
    """A create's rows, inside the caller's transaction (a connection): plain INSERTs,
    one per table. ``instances``, ``specs`` and ``bdms`` (block device mappings):
    one each per server."""
    uuids = [inst["uuid"] for inst in instances]
    insert_rows(conn, am.BuildRequest, [
        {"instance_uuid": inst["uuid"], "project_id": project_id,
         "instance": json.dumps(inst), "tags": json.dumps(tags),
         "block_device_mappings": json.dumps(mappings), "created_at": now}
        for inst, mappings in zip(instances, bdms)])
    insert_rows(conn, am.RequestSpec, [
        {"instance_uuid": u, "spec": json.dumps(spec)} for u, spec in zip(uuids, specs)])
    insert_rows(conn, am.InstanceMapping, [
        {"instance_uuid": u, "cell_id": None, "project_id": project_id,
         "user_id": user_id} for u in uuids])
    if group_id is not None:
        insert_rows(conn, am.InstanceGroupMember, [
            {"group_id": group_id, "instance_uuid": u} for u in uuids])


def add_within(api_db, room, project_id, user_id, instances, specs, bdms, tags, now,
               group_id=None):
    """``add`` in a write transaction of its own, for as many of the servers as
    ``room(conn)`` (how many fit, counted in that transaction; None: all) allows,
    so that concurrent creates cannot together pass it; returns how many were added."""
    with api_db.connection(write=True) as conn:
        n = room(conn)
        n = len(instances) if n is None else min(n, len(instances))
        add(conn, project_id, user_id, instances[:n], specs[:n], bdms[:n], tags, now, group_id)
    return n


def forget(api_db, uuids):
    """Remove what a create wrote for these servers."""
    with api_db.session(write=True) as s:
        for model in _ROWS_OF_A_SERVER:
            s.execute(sa.delete(model).where(model.instance_uuid.in_(uuids)))


def delete(api_db, instance_uuid):
    """Delete a server that is still a build request, with its other rows; False
    when it is no longer one (the conductor has placed it)."""
    with api_db.session(write=True) as s:
        gone = s.execute(sa.delete(am.BuildRequest)
                         .where(am.BuildRequest.instance_uuid == instance_uuid)).rowcount
        if not gone:
            return False
        for model in (am.RequestSpec, am.InstanceMapping, am.InstanceGroupMember):
            s.execute(sa.delete(model).where(model.instance_uuid == instance_uuid))
        return True


def get(s, instance_uuid):
    """The BuildRequest of the server, or None."""
    return s.scalars(sa.select(am.BuildRequest)
                     .where(am.BuildRequest.instance_uuid == instance_uuid)).first()


def update_instance(api_db, instance_uuid, **values):
    """Change the instance a build request holds; False when there is none."""
    with api_db.session(write=True) as s:
        br = get(s, instance_uuid)
        if br is None:
            return False
        inst = json.loads(br.instance)
        inst.update(values)
        br.instance = json.dumps(inst)
        return True


_QUEUE_FOR_DELETE = sa.update(am.InstanceMapping).where(
    am.InstanceMapping.instance_uuid == sa.bindparam("b_uuid")).values(
    queued_for_delete=sa.bindparam("b_queued"))


def queue_for_delete(api_db, instance_uuid, queued=True):
    """Mark the server's mapping as deleted (or, restored, no longer)."""
    with api_db.connection(write=True) as conn:
        conn.execute(_QUEUE_FOR_DELETE, {"b_uuid": instance_uuid, "b_queued": queued})
