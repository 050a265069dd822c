"""Server groups (API database): a policy, its rules, its members."""
import sqlalchemy as sa

from novella.db import api_models as am


def _get(s, group_uuid):
    return s.scalars(sa.select(am.InstanceGroup).where(am.InstanceGroup.uuid == group_uuid)).first()


def get(api_db, group_uuid):
    """The InstanceGroup of that uuid (its members loaded), or None."""
    with api_db.session() as s:
        return _get(s, group_uuid)


def page(api_db, offset, limit, project_id=None):
    """InstanceGroups in id order (a project's only, when given), their members loaded."""
    q = sa.select(am.InstanceGroup).order_by(am.InstanceGroup.id)
    if project_id is not None:
        q = q.where(am.InstanceGroup.project_id == project_id)
    with api_db.session() as s:
        return list(s.scalars(q.offset(offset).limit(limit)))


def of_server(api_db, instance_uuid):
    """The uuids of the groups the server is a member of."""
    with api_db.session() as s:
        return list(s.scalars(sa.select(am.InstanceGroup.uuid).join(am.InstanceGroupMember)
                              .where(am.InstanceGroupMember.instance_uuid == instance_uuid)))


def not_deleted(api_db, instance_uuids):
    """Those of the servers that are not deleted (their mapping not queued for delete)."""
    with api_db.read_session() as s:
        return set(s.scalars(sa.select(am.InstanceMapping.instance_uuid).where(
            am.InstanceMapping.instance_uuid.in_(instance_uuids),
            am.InstanceMapping.queued_for_delete.is_(False))))


def count(api_db, project_id):
    with api_db.connection() as conn:
        return conn.execute(sa.select(sa.func.count()).select_from(am.InstanceGroup).where(
            am.InstanceGroup.project_id == project_id)).scalar()


def add(api_db, **values):
    """A new InstanceGroup (its members, none, loaded)."""
    with api_db.session(write=True) as s:
        g = am.InstanceGroup(**values)
        s.add(g)
        s.flush()
        g.members  # noqa: B018 - loaded while the session is open
        return g


def delete(api_db, group_uuid, check):
    """Delete the group of that uuid with its members, in one transaction with
    ``check(group or None)``, which raises to keep it."""
    with api_db.session(write=True) as s:
        g = _get(s, group_uuid)
        check(g)
        s.delete(g)
