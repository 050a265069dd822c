"""The ``same_host`` and ``different_host`` scheduler hints.

Each hint names servers (one uuid or a list). ``SameHostFilter`` passes only
the hosts that hold at least one of them, ``DifferentHostFilter`` only the
hosts that hold none. A server is on the host its row in its cell names
(``instances.host``), whatever its state. The hosts of the named servers
are read once per request and kept in the scheduler's own copy of the
request spec (``HINT_HOSTS``).
"""
import sqlalchemy as sa

from novella.db import api_models as am
from novella.db import cell_models as cm
from novella.db import cells as cells_mod
from novella.scheduler.filters import BaseHostFilter

HINT_HOSTS = "_hint_hosts"   # spec key: {hint name: [the hosts holding its servers]}


def hinted_uuids(spec, hint):
    """The server uuids a hint names, as a list (it may be one string)."""
    value = (spec.get("scheduler_hints") or {}).get(hint)
    if not value:
        return []
    return [value] if isinstance(value, str) else [str(u) for u in value]


def hosts_of(api_db, uuids):
    """The hosts the named servers are on (those not found are on none)."""
    with api_db.reader() as conn:
        cell_ids = {row.cell_id for row in conn.execute(
            sa.select(am.InstanceMapping.cell_id).where(
                am.InstanceMapping.instance_uuid.in_(uuids),
                am.InstanceMapping.cell_id.is_not(None)))}
    hosts = set()
    for cell in cells_mod.list_cells(api_db, include_cell0=False):
        if cell.id not in cell_ids:
            continue
        with cells_mod.cell_database(cell).reader() as conn:
            hosts.update(conn.execute(sa.select(cm.Instance.host).where(
                cm.Instance.uuid.in_(uuids), cm.Instance.deleted == 0,
                cm.Instance.host.is_not(None))).scalars())
    return hosts


class _HostHintFilter(BaseHostFilter):
    HINT = None

    def applies(self, spec):
        return bool(hinted_uuids(spec, self.HINT))

    def hint_hosts(self, spec):
        known = spec.setdefault(HINT_HOSTS, {})
        if self.HINT not in known:
            # a list: the spec stays JSON, whoever keeps it
            known[self.HINT] = sorted(hosts_of(self.api_db, hinted_uuids(spec, self.HINT)))
        return known[self.HINT]


class SameHostFilter(_HostHintFilter):
    """Hint ``same_host``: only a host that holds one of the named servers."""

    HINT = "same_host"

    def host_passes(self, host_state, spec):
        if not hinted_uuids(spec, self.HINT):
            return True
        return host_state.host in self.hint_hosts(spec)


class DifferentHostFilter(_HostHintFilter):
    """Hint ``different_host``: only a host that holds none of the named servers."""

    HINT = "different_host"

    def host_passes(self, host_state, spec):
        if not hinted_uuids(spec, self.HINT):
            return True
        return host_state.host not in self.hint_hosts(spec)
