"""Request specs (API database): what later schedulings of a server ask for."""
import json

import sqlalchemy as sa

from novella.db import api_models as am


def get(api_db, instance_uuid):
    with api_db.read_session() as s:
        row = s.scalars(sa.select(am.RequestSpec).where(
            am.RequestSpec.instance_uuid == instance_uuid)).one()
        return json.loads(row.spec)


def update(api_db, instance_uuid, **values):
    """Later schedulings of the server use ``values`` (its flavor after a resize,
    the zone asked for at unshelve, ...)."""
    with api_db.session(write=True) as s:
        row = s.scalars(sa.select(am.RequestSpec).where(
            am.RequestSpec.instance_uuid == instance_uuid)).first()
        if row is not None:
            row.spec = json.dumps(dict(json.loads(row.spec), **values))
