"""Services and their compute hosts as the Compute API reads and changes them.

A service and its compute nodes live in a cell database; the host's mapping
and its aggregate memberships in the API database.
"""
import sqlalchemy as sa

from novella.db import api_models as am, cell_models as cm
from novella.db.timestamps import utcnow

COMPUTE = "nova-compute"

# Migration statuses of a move that is over (the host it touched may go).
_ENDED = ("confirmed", "reverted", "error", "failed", "completed", "cancelled", "done")


def _alive(cell_db, model, equal):
    where = [getattr(model, column) == value for column, value in equal.items()]
    with cell_db.session() as s:
        return list(s.scalars(sa.select(model).where(model.deleted == 0, *where).order_by(model.id)))


def services_in(cell_db, equal):
    """The cell's Services (not deleted) with the values ``equal`` ({column:
    value}) gives, in id order."""
    return _alive(cell_db, cm.Service, equal)


def compute_nodes_in(cell_db, equal):
    """The cell's ComputeNodes (not deleted) with the values ``equal`` gives, in id order."""
    return _alive(cell_db, cm.ComputeNode, equal)


def compute_service(cell_db, host):
    """The nova-compute Service of ``host``, or None."""
    with cell_db.read_session() as s:
        return s.scalars(sa.select(cm.Service).where(
            cm.Service.host == host, cm.Service.binary == COMPUTE,
            cm.Service.deleted == 0)).first()


def compute_services_of(cell_db, hosts):
    """The nova-compute Services of ``hosts`` (a sorted list)."""
    with cell_db.read_session() as s:
        return s.scalars(sa.select(cm.Service).where(
            cm.Service.host.in_(hosts), cm.Service.binary == COMPUTE,
            cm.Service.deleted == 0)).all()


def save(cell_db, service_id, **values):
    """Set columns of the service of that id; returns it as saved."""
    with cell_db.session(write=True) as s:
        row = s.get(cm.Service, service_id)
        for k, val in values.items():
            setattr(row, k, val)
        row.updated_at = utcnow()
        return row


def evacuations_to_clean(cell_db, host):
    """How many servers evacuated from ``host`` it has yet to clean up after
    (their migrations 'done', not yet 'completed')."""
    with cell_db.read_session() as s:
        return s.scalar(sa.select(sa.func.count()).select_from(cm.Migration).where(
            cm.Migration.source_compute == host, cm.Migration.deleted == 0,
            cm.Migration.migration_type == "evacuation", cm.Migration.status == "done"))


def host_in_use(cell_db, host):
    """(servers on ``host``, moves to or from it not over), read together."""
    with cell_db.session() as s:
        busy = s.scalar(sa.select(sa.func.count()).select_from(cm.Instance).where(
            cm.Instance.host == host, cm.Instance.deleted == 0))
        moving = s.scalar(sa.select(sa.func.count()).select_from(cm.Migration).where(
            sa.or_(cm.Migration.source_compute == host, cm.Migration.dest_compute == host),
            cm.Migration.deleted == 0, cm.Migration.status.notin_(_ENDED)))
    return busy, moving


def delete(cell_db, service_id, host=None):
    """Soft-delete the service and, given its ``host`` (a compute service), the
    host's compute nodes, in one transaction."""
    now = utcnow()
    with cell_db.session(write=True) as s:
        s.execute(sa.update(cm.Service).where(cm.Service.id == service_id)
                  .values(deleted=service_id, deleted_at=now))
        if host is not None:
            s.execute(sa.update(cm.ComputeNode).where(cm.ComputeNode.host == host,
                                                      cm.ComputeNode.deleted == 0)
                      .values(deleted=cm.ComputeNode.id, deleted_at=now))


def forget_host(api_db, host):
    """Remove a deleted compute host from its aggregates and its cell mapping, in one
    transaction; returns the uuids of the aggregates it was in."""
    with api_db.session(write=True) as s:
        aggs = list(s.scalars(sa.select(am.Aggregate.uuid).join(am.AggregateHost)
                              .where(am.AggregateHost.host == host)))
        s.execute(sa.delete(am.AggregateHost).where(am.AggregateHost.host == host))
        s.execute(sa.delete(am.HostMapping).where(am.HostMapping.host == host))
    return aggs


def servers_on_node(cell_db, host, node):
    """[(name, uuid)] of the servers (not hidden) on a compute node."""
    with cell_db.session() as s:
        return list(s.execute(sa.select(cm.Instance.display_name, cm.Instance.uuid).where(
            cm.Instance.host == host, cm.Instance.node == node,
            cm.Instance.deleted == 0, cm.Instance.hidden.is_(False))))


def host_usage(cell_db, host):
    """(the host's ComputeNode or None, [(project, vcpus, memory_mb, root_gb,
    ephemeral_gb)] of each server on it), read together."""
    with cell_db.read_session() as s:
        node = s.scalars(sa.select(cm.ComputeNode).where(
            cm.ComputeNode.host == host, cm.ComputeNode.deleted == 0)).first()
        servers = s.execute(sa.select(cm.Instance.project_id, cm.Instance.vcpus,
                                      cm.Instance.memory_mb, cm.Instance.root_gb,
                                      cm.Instance.ephemeral_gb)
                            .where(cm.Instance.host == host, cm.Instance.deleted == 0)).all()
    return node, servers
