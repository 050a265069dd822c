"""Key pairs (API database), each a user's, by name."""
import sqlalchemy as sa

from novella.db import api_models as am


def _get(s, user_id, name):
    return s.scalars(sa.select(am.KeyPair).where(am.KeyPair.user_id == user_id,
                                                 am.KeyPair.name == name)).first()


def find(api_db, user_id, name):
    """The user's KeyPair of that name, or None."""
    with api_db.session() as s:
        return _get(s, user_id, name)


def page(api_db, user_id, limit=None, after=None):
    """The user's KeyPairs in name order, those named after ``after`` when given;
    None when the user has none of that name."""
    with api_db.session() as s:
        if after is not None and _get(s, user_id, after) is None:
            return None
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


def add(api_db, **values):
    """A new KeyPair (``user_id=``, ``name=``, ...); None when the user has one of
    that name already."""
    with api_db.session(write=True) as s:
        if _get(s, values["user_id"], values["name"]):
            return None
        kp = am.KeyPair(**values)
        s.add(kp)
        s.flush()
        return kp


def delete(api_db, user_id, name):
    """Delete the user's key pair of that name; False when there is none."""
    with api_db.session(write=True) as s:
        kp = _get(s, user_id, name)
        if kp is None:
            return False
        s.delete(kp)
        return True
