"""Migration records: the row of each move in the server's cell database.

A migration row is the move's authority: its uuid is the placement consumer
that owns the source allocation while the move is in progress, its status
says how far the move got (pre-migrating, migrating, post-migrating,
finished, confirming, confirmed, reverting, reverted, error).
"""
import uuid as uuid_mod

import sqlalchemy as sa

from novella.db import cell_models as m
from novella.db import records


class MigrationNotFound(Exception):
    code = 404


def not_found(migration_uuid):
    """The MigrationNotFound of ``migration_uuid``."""
    return MigrationNotFound(f"Migration {migration_uuid} could not be found.")


def create(cell_db, instance, migration_type, old_flavor, new_flavor,
                     status="pre-migrating", dest_host=None):
    """A migration row for ``instance`` (an ORM row or a dict of its columns)."""
    get = (lambda k: instance.get(k)) if isinstance(instance, dict) else (
        lambda k: getattr(instance, k))
    row = m.Migration(uuid=str(uuid_mod.uuid4()), instance_uuid=get("uuid"),
                      source_compute=get("host"), source_node=get("node"),
                      dest_host=dest_host, status=status, migration_type=migration_type,
                      old_instance_type_id=(old_flavor or {}).get("id"),
                      new_instance_type_id=(new_flavor or {}).get("id"),
                      user_id=get("user_id"), project_id=get("project_id"))
    with cell_db.session(write=True) as s:
        s.add(row)
        s.flush()
        return as_dict(row)


def as_dict(row):
    return {c.name: getattr(row, c.name) for c in m.Migration.__table__.columns}


_GET_MIGRATION = sa.select(m.Migration).where(m.Migration.uuid == sa.bindparam("uuid"))  # built once


def get(cell_db, migration_uuid):
    with cell_db.session() as s:
        row = s.scalars(_GET_MIGRATION, {"uuid": migration_uuid}).first()
        if row is None:
            raise not_found(migration_uuid)
        return as_dict(row)


_COLUMNS = tuple(m.Migration.__table__.columns)


def instance_and_migration(s, instance_uuid, migration_uuid):
    """(the instance as ``records.get_instance`` reads it, ``get``'s migration or None
    when it is not there) in one statement of session ``s``;
    records.InstanceNotFound when the instance is not there (or deleted)."""
    row = s.execute(sa.select(m.Instance, m.Migration).outerjoin(
        m.Migration, m.Migration.uuid == migration_uuid).where(
        m.Instance.uuid == instance_uuid, m.Instance.deleted == 0)).first()
    if row is None:
        raise records.InstanceNotFound(f"Instance {instance_uuid} could not be found.")
    instance, migration = row
    return instance, None if migration is None else as_dict(migration)


def get_with_instance(cell_db, migration_uuid, instance_uuid):
    """(``get``'s migration, the instance as ``records.get_instance`` reads it) in one
    statement; records.InstanceNotFound when the instance is not there (or deleted),
    else MigrationNotFound when the migration is not."""
    with cell_db.read_session() as s:
        instance, migration = instance_and_migration(s, instance_uuid, migration_uuid)
    if migration is None:
        raise not_found(migration_uuid)
    return migration, instance


def update(cell_db, migration_uuid, expected_status=None, **values):
    """Update a migration; with ``expected_status`` (a value or tuple) only from those.

    Returns the row as a dict, or None when the status did not match.
    """
    q = sa.update(m.Migration.__table__).where(m.Migration.uuid == migration_uuid)
    if expected_status is not None:
        options = expected_status if isinstance(expected_status, tuple) else (expected_status,)
        q = q.where(m.Migration.status.in_(options))
    values.setdefault("updated_at", records.utcnow())
    q = q.values(**values)
    with cell_db.connection(write=True) as conn:
        if conn.dialect.update_returning:  # the row as updated, in the same statement
            row = conn.execute(q.returning(*_COLUMNS)).first()
            return None if row is None else dict(row._mapping)
        if conn.execute(q).rowcount != 1:
            return None
        # Read back in the same transaction (MySQL has no UPDATE ... RETURNING).
        return dict(conn.execute(sa.select(*_COLUMNS).where(
            m.Migration.uuid == migration_uuid)).one()._mapping)


def take_unconfirmed(cell_db, instance_uuid, status):
    """The instance's move waiting in VERIFY_RESIZE (``unconfirmed``), set to ``status``
    and returned as updated; None when there is none. Found and written in one
    statement where the database can (SQLite, PostgreSQL)."""
    if not cell_db.engine.dialect.update_returning:  # MySQL: found, then written
        mig = unconfirmed(cell_db, instance_uuid)
        return mig and update(cell_db, mig["uuid"], expected_status=_FINISHED, status=status)
    latest = sa.select(sa.func.max(m.Migration.id)).where(*_waiting(instance_uuid))
    with cell_db.connection(write=True) as conn:
        row = conn.execute(sa.update(m.Migration.__table__)
                           .where(m.Migration.id == latest.scalar_subquery(),
                                  m.Migration.status == _FINISHED)
                           .values(status=status, updated_at=records.utcnow())
                           .returning(*_COLUMNS)).first()
    return None if row is None else dict(row._mapping)


_FINISHED = "finished"


def _waiting(instance_uuid):
    """Where the instance's resize or cold migration waits in VERIFY_RESIZE."""
    return (m.Migration.instance_uuid == instance_uuid, m.Migration.deleted == 0,
            m.Migration.status == _FINISHED,
            m.Migration.migration_type.in_(("resize", "migration")))


def unconfirmed(cell_db, instance_uuid):
    """The instance's move waiting in VERIFY_RESIZE (status 'finished'), or None."""
    with cell_db.session() as s:
        row = s.scalars(sa.select(m.Migration).where(*_waiting(instance_uuid))
                        .order_by(m.Migration.id.desc())).first()
        return as_dict(row) if row is not None else None


def end_unstarted(cell_db, instance_uuid):
    """The server is being deleted: a move of it no host has acted on yet
    ('pre-migrating') ends in 'error', as the reference ends it; a conductor that
    takes the request later finds the server gone."""
    with cell_db.session(write=True) as s:
        s.execute(sa.update(m.Migration).where(
            m.Migration.instance_uuid == instance_uuid, m.Migration.deleted == 0,
            m.Migration.status == "pre-migrating").values(status="error"))


# --- the Compute API's migration listings (ORM rows) ---------------------------------------
def row_by_uuid(cell_db, migration_uuid):
    """The Migration of that uuid (deleted or not), or None."""
    with cell_db.session() as s:
        return s.scalars(sa.select(m.Migration).where(m.Migration.uuid == migration_uuid)).first()


def row_of_instance(cell_db, migration_id, instance_uuid):
    """The server's Migration of that integer id, or None."""
    with cell_db.session() as s:
        return s.scalars(sa.select(m.Migration).where(
            m.Migration.id == migration_id, m.Migration.instance_uuid == instance_uuid,
            m.Migration.deleted == 0)).first()


def page(cell_db, equal, host=None, since=None, before=None, limit=None, marker=None):
    """Migrations newest first with the values ``equal`` gives ({column: value}), to
    or from ``host``, changed in [since, before], after ``marker`` (a Migration)."""
    q = sa.select(m.Migration).where(m.Migration.deleted == 0, *[
        getattr(m.Migration, column) == value for column, value in equal.items()])
    if host:
        q = q.where(sa.or_(m.Migration.source_compute == host, m.Migration.dest_compute == host))
    if since:
        q = q.where(m.Migration.updated_at >= since)
    if before:
        q = q.where(m.Migration.updated_at <= before)
    if marker is not None:
        q = q.where(sa.or_(m.Migration.created_at < marker.created_at,
                           sa.and_(m.Migration.created_at == marker.created_at,
                                   m.Migration.uuid < marker.uuid)))
    q = q.order_by(m.Migration.created_at.desc(), m.Migration.uuid.desc())
    if limit is not None:
        q = q.limit(limit)
    with cell_db.session() as s:
        return list(s.scalars(q))


def live_in_progress(cell_db, instance_uuid, statuses, migration_id=None):
    """The server's live migrations in one of ``statuses`` (only the one of id
    ``migration_id`` when given), in id order."""
    q = sa.select(m.Migration).where(
        m.Migration.instance_uuid == instance_uuid, m.Migration.deleted == 0,
        m.Migration.migration_type == "live-migration", m.Migration.status.in_(statuses))
    if migration_id is not None:
        q = q.where(m.Migration.id == migration_id)
    with cell_db.session() as s:
        return list(s.scalars(q.order_by(m.Migration.id)))
