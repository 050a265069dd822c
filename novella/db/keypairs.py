"""Key pairs (API database), each a user's, by name."""
import sqlalchemy as sa

from novella.db import api_models as am


def get(s, user_id, name):
    """The user's KeyPair of that name, or None."""
    return s.scalars(sa.select(am.KeyPair).where(am.KeyPair.user_id == user_id,
                                                 am.KeyPair.name == name)).first()


def find(api_db, user_id, name):
    """``get`` in a session of its own."""
    with api_db.session() as s:
        return get(s, user_id, name)


def page(s, user_id, limit=None, after=None):
    """The user's KeyPairs in name order, those named after ``after`` when given."""
    q = sa.select(am.KeyPair).where(am.KeyPair.user_id == user_id)
    if after is not None:
        q = q.where(am.KeyPair.name > after)
    q = q.order_by(am.KeyPair.name)
    if limit is not None:
        q = q.limit(limit)
    return list(s.scalars(q))


def count(api_db, user_id):
    with api_db.connection() as conn:
        return conn.execute(sa.select(sa.func.count()).select_from(am.KeyPair).where(
            am.KeyPair.user_id == user_id)).scalar()


def add(s, **values):
    kp = am.KeyPair(**values)
    s.add(kp)
    s.flush()
    return kp


def delete(s, kp):
    s.delete(kp)
