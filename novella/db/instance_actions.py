"""A server's instance actions as the Compute API lists and shows them (they are
recorded by ``records``)."""
import sqlalchemy as sa

from novella.db import cell_models as cm

_CHANGED = sa.func.coalesce(cm.InstanceAction.updated_at, cm.InstanceAction.created_at)


def _get(s, instance_uuid, request_id):
    return s.scalars(sa.select(cm.InstanceAction).where(
        cm.InstanceAction.instance_uuid == instance_uuid,
        cm.InstanceAction.request_id == request_id)).first()


def get(cell_db, instance_uuid, request_id):
    """The server's InstanceAction of that request (its events loaded), or None."""
    with cell_db.session() as s:
        return _get(s, instance_uuid, request_id)


def page(cell_db, instance_uuid, limit, since=None, before=None, marker=None):
    """The server's InstanceActions newest first, changed in [since, before], those
    after the one of request ``marker`` when given; None when there is no such one."""
    with cell_db.session() as s:
        after = None
        if marker:
            after = _get(s, instance_uuid, marker)
            if after is None:
                return None
        return _page(s, instance_uuid, limit, since, before, after)


def _page(s, instance_uuid, limit, since, before, marker):
    q = sa.select(cm.InstanceAction).where(cm.InstanceAction.instance_uuid == instance_uuid,
                                           cm.InstanceAction.deleted == 0)
    if since:
        q = q.where(_CHANGED >= since)
    if before:
        q = q.where(_CHANGED <= before)
    if marker is not None:
        q = q.where(sa.or_(cm.InstanceAction.created_at < marker.created_at,
                           sa.and_(cm.InstanceAction.created_at == marker.created_at,
                                   cm.InstanceAction.id < marker.id)))
    q = q.order_by(cm.InstanceAction.created_at.desc(), cm.InstanceAction.id.desc()).limit(limit)
    return list(s.scalars(q))
