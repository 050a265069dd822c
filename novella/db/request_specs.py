"""Request specs (API database): what later schedulings of a server ask for."""
import json

import sqlalchemy as sa

from novella.db import api_models as am


def get(api_db, instance_uuid):
    spec = find(api_db, instance_uuid)
    if spec is None:
        raise sa.exc.NoResultFound(f"no request spec for {instance_uuid}")
    return spec


def find(api_db, instance_uuid):
    """The server's request spec, or None when it has none (made before them)."""
    with api_db.read_session() as s:
        spec = s.scalars(sa.select(am.RequestSpec.spec).where(
            am.RequestSpec.instance_uuid == instance_uuid)).first()
    return None if spec is None else json.loads(spec)


def of_servers(api_db, instance_uuids):
    """[(instance uuid, its request spec)] of those of the servers that have one."""
    with api_db.session() as s:
        return [(uuid, json.loads(spec)) for uuid, spec in s.execute(
            sa.select(am.RequestSpec.instance_uuid, am.RequestSpec.spec)
            .where(am.RequestSpec.instance_uuid.in_(instance_uuids)))]


def _replace(exact):
    """The spec of ``b_uuid`` set to ``b_spec`` when it is still ``b_was``;
    ``exact``: compared byte for byte (MySQL's and MariaDB's text collations
    ignore letter case and trailing spaces)."""
    spec, was = am.RequestSpec.spec, sa.bindparam("b_was", type_=sa.Text)
    same = sa.cast(spec, sa.LargeBinary) == sa.cast(was, sa.LargeBinary) if exact else spec == was
    return sa.update(am.RequestSpec).where(
        am.RequestSpec.instance_uuid == sa.bindparam("b_uuid"), same).values(
        spec=sa.bindparam("b_spec"))


_REPLACE = {False: _replace(False), True: _replace(True)}


def get_with_cell(api_db, instance_uuid):
    """(the CellMapping holding the server, or None while it has none; its request
    spec) in one statement."""
    m = am.InstanceMapping
    with api_db.read_session() as s:
        cell, spec = s.execute(
            sa.select(am.CellMapping, am.RequestSpec.spec).select_from(m)
            .outerjoin(am.CellMapping, am.CellMapping.id == m.cell_id)
            .join(am.RequestSpec, am.RequestSpec.instance_uuid == m.instance_uuid)
            .where(m.instance_uuid == instance_uuid)).one()
    return cell, json.loads(spec)


def update(api_db, instance_uuid, known=None, **values):
    """Later schedulings of the server use ``values`` (its flavor after a resize,
    the zone asked for at unshelve, ...).

    ``known``: the spec as the caller read it. When the stored one is still that,
    one UPDATE guarded by it writes the new one; else (changed meanwhile) it is
    read and written again."""
    if known is not None:
        with api_db.connection(write=True) as conn:
            replace = _REPLACE[conn.dialect.name == "mysql"]
            if conn.execute(replace, {"b_uuid": instance_uuid, "b_was": json.dumps(known),
                                      "b_spec": json.dumps(dict(known, **values))}).rowcount:
                return
    with api_db.session(write=True) as s:
        row = s.scalars(sa.select(am.RequestSpec).where(
            am.RequestSpec.instance_uuid == instance_uuid)).first()
        if row is not None:
            row.spec = json.dumps(dict(json.loads(row.spec), **values))
