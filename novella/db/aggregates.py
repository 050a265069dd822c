"""Host aggregates as the scheduler and the conductor read them, cached.

Every boot asks which aggregates (and so which availability zone) a host is
in; the answer changes only when an aggregate, its hosts or its metadata do,
so it is read again only then (``novella.db.cache``).
"""
import sqlalchemy as sa

from novella.db import api_models as am
from novella.db.cache import TokenCache, token_of
from novella.db.timestamps import utcnow


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


# --- the os-aggregates API's reads and writes ------------------------------------------
# Each change reads the aggregate and checks what it needs in the transaction
# that writes it, and raises Refused (writing nothing) when it may not be made.
class Refused(Exception):
    """``reason``: 'not found', 'name taken', 'internal zone', 'zone conflict' (with
    ``zones``, the other zones the hosts are in), 'has hosts', 'no such host' or
    'has host'."""

    def __init__(self, reason, zones=()):
        super().__init__(reason)
        self.reason, self.zones = reason, sorted(zones)


def zone(agg):
    """The availability zone an Aggregate's metadata names, or None."""
    return next((m.value for m in agg.metadata_items if m.key == "availability_zone"), None)


def every(api_db):
    """Every Aggregate (hosts and metadata loaded), in id order."""
    with api_db.session() as s:
        return list(s.scalars(sa.select(am.Aggregate).order_by(am.Aggregate.id)))


def get(api_db, aggregate_id):
    """The Aggregate of that id (hosts and metadata loaded), or None (also for an
    ``aggregate_id`` of None)."""
    if aggregate_id is None:
        return None
    with api_db.session() as s:
        return s.get(am.Aggregate, aggregate_id)


def _find(s, aggregate_id):
    agg = None if aggregate_id is None else s.get(am.Aggregate, aggregate_id)
    if agg is None:
        raise Refused("not found")
    return agg


def _named(s, name, other_than=None):
    q = sa.select(am.Aggregate).where(am.Aggregate.name == name)
    if other_than is not None:
        q = q.where(am.Aggregate.id != other_than)
    return s.scalars(q).first()


def _not_internal(zone_, internal_zone):
    """Refused when ``zone_`` is the zone of the services that are not compute hosts."""
    if internal_zone is not None and zone_ == internal_zone:
        raise Refused("internal zone")


def _check_zone(s, agg, hosts, zone_, internal_zone=None):
    """Refused when ``zone_`` is the internal zone or other aggregates put ``hosts``
    in zones other than ``zone_``."""
    _not_internal(zone_, internal_zone)
    if zone_ is None or not hosts:
        return
    others = set(s.scalars(
        sa.select(am.AggregateMetadata.value)
        .join(am.AggregateHost, am.AggregateHost.aggregate_id == am.AggregateMetadata.aggregate_id)
        .where(am.AggregateMetadata.key == "availability_zone",
               am.AggregateHost.host.in_(hosts), am.AggregateMetadata.aggregate_id != agg.id)))
    conflicts = {z for z in others if z != zone_}
    if conflicts:
        raise Refused("zone conflict", conflicts)


def _set_metadata(agg, metadata):
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


def add(api_db, uuid, name, zone_, internal_zone):
    """A new Aggregate, in ``zone_`` when given."""
    _not_internal(zone_, internal_zone)
    with api_db.session(write=True) as s:
        if _named(s, name):
            raise Refused("name taken")
        agg = am.Aggregate(uuid=uuid, name=name)
        s.add(agg)
        if zone_:
            agg.metadata_items.append(am.AggregateMetadata(key="availability_zone", value=zone_))
        s.flush()
        zone(agg)  # its metadata loaded while the session is open
        return agg


_KEEP = object()


def update(api_db, aggregate_id, internal_zone, name=None, zone_=_KEEP):
    """The Aggregate renamed (given ``name``) and moved to ``zone_`` (when given)."""
    with api_db.session(write=True) as s:
        agg = _find(s, aggregate_id)
        if name is not None:
            if _named(s, name, other_than=agg.id) is not None:
                raise Refused("name taken")
            agg.name = name
        if zone_ is not _KEEP:
            _check_zone(s, agg, [h.host for h in agg.hosts], zone_, internal_zone)
            _set_metadata(agg, {"availability_zone": zone_})
        agg.updated_at = utcnow()
        s.flush()
        return agg


def delete(api_db, aggregate_id):
    """Delete an Aggregate that has no hosts."""
    with api_db.session(write=True) as s:
        agg = _find(s, aggregate_id)
        if agg.hosts:
            raise Refused("has hosts")
        s.delete(agg)


def add_host(api_db, aggregate_id, host, is_compute_host):
    """The Aggregate with ``host`` added; ``is_compute_host(host)``: whether some
    cell has that compute host."""
    with api_db.session(write=True) as s:
        agg = _find(s, aggregate_id)
        if not is_compute_host(host):
            raise Refused("no such host")
        if host in [h.host for h in agg.hosts]:
            raise Refused("has host")
        _check_zone(s, agg, [host], zone(agg))
        agg.hosts.append(am.AggregateHost(host=host))
        s.flush()
        return agg


def remove_host(api_db, aggregate_id, host):
    """The Aggregate without ``host``."""
    with api_db.session(write=True) as s:
        agg = _find(s, aggregate_id)
        entry = next((h for h in agg.hosts if h.host == host), None)
        if entry is None:
            raise Refused("no such host")
        agg.hosts.remove(entry)
        s.flush()
        return agg


def set_metadata(api_db, aggregate_id, metadata, internal_zone):
    """The Aggregate with its metadata changed ({key: value}; None removes a key)."""
    with api_db.session(write=True) as s:
        agg = _find(s, aggregate_id)
        if "availability_zone" in metadata:
            _check_zone(s, agg, [h.host for h in agg.hosts], metadata["availability_zone"],
                        internal_zone)
        _set_metadata(agg, metadata)
        agg.updated_at = utcnow()
        s.flush()
        return agg
