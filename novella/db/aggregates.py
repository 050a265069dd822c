"""Host aggregates as the scheduler and the conductor read them, cached.

Every boot asks which aggregates (and so which availability zone) a host is
in; the answer changes only when an aggregate, its hosts or its metadata do,
so it is read again only then (``novella.db.cache``).
"""
import sqlalchemy as sa

from novella.db import api_models as am
from novella.db.cache import TokenCache, token_of


def _load(api_db):
    """[{"uuid", "name", "metadata": {}, "hosts": set()}] of every aggregate."""
    with api_db.connection() as conn:
        aggs = {row.id: {"uuid": row.uuid, "name": row.name, "metadata": {}, "hosts": set()}
                for row in conn.execute(sa.select(am.Aggregate.id, am.Aggregate.uuid,
                                                  am.Aggregate.name))}
        for agg_id, key, value in conn.execute(sa.select(
                am.AggregateMetadata.aggregate_id, am.AggregateMetadata.key,
                am.AggregateMetadata.value)):
            if agg_id in aggs:
                aggs[agg_id]["metadata"][key] = value
        for agg_id, host in conn.execute(sa.select(am.AggregateHost.aggregate_id,
                                                   am.AggregateHost.host)):
            if agg_id in aggs:
                aggs[agg_id]["hosts"].add(host)
    return list(aggs.values())


# The API bumps an aggregate's updated_at on every change to it, its hosts or
# its metadata; counts and largest ids catch rows added or removed otherwise.
CACHE = TokenCache(token_of(
    (am.Aggregate.__table__, [sa.func.count(), sa.func.max(am.Aggregate.id),
                              sa.func.max(am.Aggregate.updated_at)]),
    (am.AggregateHost.__table__, [sa.func.count(), sa.func.max(am.AggregateHost.id)]),
    (am.AggregateMetadata.__table__, [sa.func.count(), sa.func.max(am.AggregateMetadata.id)]),
), _load)


def all_aggregates(api_db):
    return CACHE.get(api_db)


def by_host(api_db, hosts=None):
    """{host: [{"uuid", "name", "metadata"}]} for the given hosts (every host if None)."""
    out = {}
    for agg in all_aggregates(api_db):
        for host in agg["hosts"] if hosts is None else agg["hosts"] & set(hosts):
            out.setdefault(host, []).append(agg)
    return out


def host_availability_zone(api_db, host, default_zone):
    """The zone of a host: its aggregates' availability_zone metadata, else the default."""
    zones = sorted({agg["metadata"]["availability_zone"] for agg in all_aggregates(api_db)
                    if host in agg["hosts"] and "availability_zone" in agg["metadata"]})
    return ",".join(zones) if zones else default_zone


# --- availability zones as the Compute API lists them (uncached) ------------------------
def host_zone_pairs(api_db):
    """[(host, availability zone)] of every host in an aggregate naming a zone."""
    with api_db.session() as s:
        return s.execute(
            sa.select(am.AggregateHost.host, am.AggregateMetadata.value)
            .join(am.AggregateMetadata, am.AggregateMetadata.aggregate_id == am.AggregateHost.aggregate_id)
            .where(am.AggregateMetadata.key == "availability_zone")).all()


def zone_names(api_db):
    """The availability zones aggregates name."""
    with api_db.session() as s:
        return set(s.scalars(sa.select(am.AggregateMetadata.value)
                             .where(am.AggregateMetadata.key == "availability_zone")))


# --- the os-aggregates API's reads and writes (ORM rows, in the caller's session) -------
def get(s, aggregate_id):
    """The Aggregate of that id, or None."""
    return s.get(am.Aggregate, aggregate_id)


def every(s):
    """Every Aggregate, in id order."""
    return list(s.scalars(sa.select(am.Aggregate).order_by(am.Aggregate.id)))


def named(s, name, other_than=None):
    """The Aggregate of that name (not the one of id ``other_than``), or None."""
    q = sa.select(am.Aggregate).where(am.Aggregate.name == name)
    if other_than is not None:
        q = q.where(am.Aggregate.id != other_than)
    return s.scalars(q).first()


def zones_of_hosts(s, hosts, other_than):
    """The availability zones aggregates other than ``other_than`` (an id) give ``hosts``."""
    return set(s.scalars(
        sa.select(am.AggregateMetadata.value)
        .join(am.AggregateHost, am.AggregateHost.aggregate_id == am.AggregateMetadata.aggregate_id)
        .where(am.AggregateMetadata.key == "availability_zone",
               am.AggregateHost.host.in_(hosts), am.AggregateMetadata.aggregate_id != other_than)))


def add(s, uuid, name, zone=None):
    agg = am.Aggregate(uuid=uuid, name=name)
    s.add(agg)
    if zone:
        agg.metadata_items.append(am.AggregateMetadata(key="availability_zone", value=zone))
    s.flush()
    return agg


def set_metadata(agg, metadata):
    """Change an Aggregate's metadata; a value of None removes its key."""
    items = {m.key: m for m in agg.metadata_items}
    for key, value in metadata.items():
        if value is None:
            if key in items:
                agg.metadata_items.remove(items.pop(key))
        elif key in items:
            items[key].value = value
        else:
            agg.metadata_items.append(am.AggregateMetadata(key=key, value=value))


def add_host(agg, host):
    agg.hosts.append(am.AggregateHost(host=host))


def delete(s, agg):
    s.delete(agg)
