"""Quota limits and the counts of what a project uses, as the Compute API reads
and writes them (``novella.api.compute.quotas`` decides with them).

The limits set over the defaults live in three tables of the API database
(``quota_classes``, ``quotas``, ``project_user_quotas``, named and shaped as
the reference's). Each count answers for the project and for one of its
users at once (one statement per database).
"""
import json

import sqlalchemy as sa

from novella.db import api_models as am, cell_models as cm, cells as cells_mod

_classes = am.QuotaClass.__table__
_projects = am.Quota.__table__
_users = am.ProjectUserQuota.__table__


# --- limits ---------------------------------------------------------------------------
def class_limits(api_db, class_name):
    """[(resource, limit)] set for the quota class."""
    with api_db.connection() as conn:
        return conn.execute(sa.select(_classes.c.resource, _classes.c.hard_limit)
                            .where(_classes.c.class_name == class_name)).all()


def limits_over_defaults(api_db, project_id, user_id=None):
    """[(level, resource, limit)] in level order, read in one statement: level 0 the
    ``default`` class's, 1 the project's, 2 (given ``user_id``) the user's."""
    parts = [sa.select(sa.literal(0), _classes.c.resource, _classes.c.hard_limit)
             .where(_classes.c.class_name == "default"),
             sa.select(sa.literal(1), _projects.c.resource, _projects.c.hard_limit)
             .where(_projects.c.project_id == project_id)]
    if user_id is not None:
        parts.append(sa.select(sa.literal(2), _users.c.resource, _users.c.hard_limit)
                     .where(_users.c.project_id == project_id, _users.c.user_id == user_id))
    with api_db.connection() as conn:
        return sorted(conn.execute(sa.union_all(*parts)).all(), key=lambda row: row[0])


def _set(api_db, table, keys, values):
    """Write limits ({resource: limit}) in the row ``keys`` (its identifying columns) names."""
    with api_db.connection(write=True) as conn:
        for resource, hard in values.items():
            where = [table.c[k] == v for k, v in keys.items()] + [table.c.resource == resource]
            done = conn.execute(sa.update(table).where(*where).values(hard_limit=hard))
            if not done.rowcount:
                conn.execute(sa.insert(table).values(resource=resource, hard_limit=hard, **keys))


def set_class_limits(api_db, class_name, values):
    _set(api_db, _classes, {"class_name": class_name}, values)


def set_project_limits(api_db, project_id, values):
    _set(api_db, _projects, {"project_id": project_id}, values)


def set_user_limits(api_db, project_id, user_id, values):
    _set(api_db, _users, {"project_id": project_id, "user_id": user_id}, values)


def delete_limits(api_db, project_id, user_id=None):
    """Forget the user's limits (given ``user_id``), else the project's and its users'."""
    with api_db.connection(write=True) as conn:
        conn.execute(sa.delete(_users).where(
            _users.c.project_id == project_id,
            *([_users.c.user_id == user_id] if user_id else [])))
        if user_id is None:
            conn.execute(sa.delete(_projects).where(_projects.c.project_id == project_id))


# --- usage ----------------------------------------------------------------------------
def _for_user(column, user_id, value=1):
    return sa.func.coalesce(sa.func.sum(sa.case((column == user_id, value), else_=0)), 0)


def count_servers(conn, project_id, user_id=None):
    """{None: servers of the project, user_id: of the user} (instance mappings not
    queued for delete), in ``conn``, the caller's transaction."""
    m = am.InstanceMapping
    cols = [sa.func.count()]
    if user_id is not None:
        cols.append(_for_user(m.user_id, user_id))
    row = conn.execute(sa.select(*cols).select_from(m).where(
        m.project_id == project_id, m.queued_for_delete.is_(False))).one()
    out = {None: int(row[0] or 0)}
    if user_id is not None:
        out[user_id] = int(row[1] or 0)
    return out


def servers_of(api_db, project_id, user_id=None):
    """``count_servers`` in a transaction of its own."""
    with api_db.connection() as conn:
        return count_servers(conn, project_id, user_id)


def _building(uuid, doc):
    inst = json.loads(doc)
    return (uuid, inst.get("user_id"), int(inst.get("vcpus") or 0), int(inst.get("memory_mb") or 0))


def build_requests(api_db, project_id):
    """[(instance uuid, user id, vcpus, memory_mb)] of the project's servers still
    waiting for a cell."""
    with api_db.session() as s:
        return [_building(uuid, doc) for uuid, doc in s.execute(
            sa.select(am.BuildRequest.instance_uuid, am.BuildRequest.instance).where(
                am.BuildRequest.project_id == project_id))]


class _CellToCount:
    """What ``cells_mod.scatter`` needs of a cell mapping."""
    __slots__ = ("uuid", "database_connection")

    def __init__(self, uuid, database_connection):
        self.uuid, self.database_connection = uuid, database_connection


def where_servers_are(api_db, project_id, user_id=None):
    """The project's servers as the API database sees them, in one statement.

    Returns ({None: servers of the project, user_id: of the user}, the cells
    holding any server of the project (queued for delete or not: a server
    being deleted holds its cores until its host has deleted it), the build
    requests as ``build_requests`` gives them). Each cell's rows are counted
    where the mappings say the project has servers. Should a mapping have
    neither a cell nor a build request (no writer leaves one so between its
    transactions), nothing says where that server is: every cell is counted.
    """
    m, br, cmap = am.InstanceMapping, am.BuildRequest, am.CellMapping
    live = sa.case((m.queued_for_delete.is_(False), 1), else_=0)
    mine = sa.case((sa.and_(m.queued_for_delete.is_(False), m.user_id == user_id), 1), else_=0)
    in_cells = (sa.select(cmap.uuid, cmap.database_connection, sa.func.sum(live),
                          sa.func.sum(mine), sa.null().label("doc"), sa.null().label("uuid_"))
                .join(m, m.cell_id == cmap.id).where(m.project_id == project_id)
                .group_by(cmap.id, cmap.uuid, cmap.database_connection))
    building = (sa.select(sa.null(), sa.null(), live, mine, br.instance, m.instance_uuid)
                .select_from(m).outerjoin(br, br.instance_uuid == m.instance_uuid)
                .where(m.project_id == project_id, m.cell_id.is_(None)))
    cells, builds, counted, everywhere = [], [], {None: 0, user_id: 0}, False
    with api_db.reader() as conn:
        rows = conn.execute(sa.union_all(in_cells, building)).all()
    for cell_uuid, url, n, n_mine, doc, uuid in rows:
        counted[None] += int(n or 0)
        if user_id is not None:
            counted[user_id] += int(n_mine or 0)
        if cell_uuid is not None:
            cells.append(_CellToCount(cell_uuid, url))
        elif doc is None:
            everywhere = True
        else:
            builds.append(_building(uuid, doc))
    if everywhere:
        cells = cells_mod.list_cells(api_db)
    return counted, cells, builds


def cores_ram_in(cell_db, project_id, user_id=None):
    """(cores, RAM) of the project's servers in the cell, then (given ``user_id``)
    the user's."""
    i = cm.Instance
    cols = [sa.func.coalesce(sa.func.sum(i.vcpus), 0),
            sa.func.coalesce(sa.func.sum(i.memory_mb), 0)]
    if user_id is not None:
        cols += [_for_user(i.user_id, user_id, i.vcpus), _for_user(i.user_id, user_id, i.memory_mb)]
    with cell_db.reader() as conn:
        return tuple(conn.execute(sa.select(*cols).where(
            i.project_id == project_id, i.deleted == 0, i.hidden.is_(False))).one())


def groups_and_key_pairs(api_db, project_id, user_id=None):
    """(server groups of the project, or of its user; key pairs of the user, 0
    without one), in one transaction."""
    with api_db.connection() as conn:
        groups = conn.execute(sa.select(sa.func.count()).select_from(am.InstanceGroup).where(
            am.InstanceGroup.project_id == project_id,
            *([am.InstanceGroup.user_id == user_id] if user_id else []))).scalar()
        key_pairs = conn.execute(sa.select(sa.func.count()).select_from(am.KeyPair).where(
            am.KeyPair.user_id == user_id)).scalar() if user_id else 0
    return groups or 0, key_pairs or 0
