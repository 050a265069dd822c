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
