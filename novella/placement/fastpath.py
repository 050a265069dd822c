"""Fast path of GET /allocation_candidates for flat deployments.

When it applies (see ``applies``): the request has a single, unsuffixed
request group with resources and no ``same_subtree``, and the ledger holds
no nested provider (every provider is a root) and no sharing provider
(``MISC_SHARES_VIA_AGGREGATE``). Then every candidate is one provider that
serves the whole group alone, and the search reduces to set operations over
an index kept next to the read model:

- per resource class, ``{provider id: largest amount that fits}`` (the
  smaller of ``max_unit`` and the free capacity), plus the few providers
  whose ``min_unit``/``step_size`` are not 1;
- per trait and per aggregate, the set of provider ids.

The response is rendered by joining JSON fragments: each provider's summary
is rendered once per shape and reused until the provider changes.

``candidates.Search`` stays the reference of truth; the unit tests compare
the two on random flat trees. The index follows the read model through
``State.touched`` (ids of providers whose inventory, usage, traits or
aggregates changed) and is rebuilt whenever the read model is reloaded.
"""
import math
import random

from novella.placement import base
from novella.placement.candidates import SHARING_TRAIT

_EMPTY = frozenset()


class Index:
    """Flat-deployment lookups over one ``ledger.State``."""

    def __init__(self, st):
        self.lims = {}      # resource class -> {pid: largest amount that fits}
        self.units = {}     # resource class -> {pid: (min_unit, step_size)} if not (1, 1)
        self.by_trait = {}  # trait -> {pid}
        self.by_agg = {}    # aggregate -> {pid}
        self.nested = set()   # pids of providers with a parent
        self.sharing = set()  # pids of sharing providers
        self.indexed = {}   # pid -> (classes, traits, aggregates) as entered, to undo
        self.frags = {}     # pid -> (shape, rendered summary fragment)
        self._shared = {}   # one frozenset object per distinct trait/aggregate set
        st.touched.clear()
        for p in st.by_id.values():
            self._add(p)

    def sync(self, st):
        """Re-enter the providers the read model changed since last time."""
        touched = st.touched
        if touched:
            by_id = st.by_id
            for pid in touched:
                self._remove(pid)
                p = by_id.get(pid)
                if p is not None:
                    self._add(p)
            touched.clear()

    def _add(self, p):
        pid = p.id
        used = p.used
        for rc, inv in p.inv.items():
            free = math.floor(inv.capacity()) - used.get(rc, 0)
            self.lims.setdefault(rc, {})[pid] = min(inv[3], free)
            if inv[2] != 1 or inv[4] != 1:
                self.units.setdefault(rc, {})[pid] = (inv[2], inv[4])
        shared = self._shared
        traits = shared.setdefault(frozenset(p.traits), frozenset(p.traits))
        aggs = shared.setdefault(frozenset(p.aggs), frozenset(p.aggs))
        for t in traits:
            self.by_trait.setdefault(t, set()).add(pid)
        for a in aggs:
            self.by_agg.setdefault(a, set()).add(pid)
        if p.parent is not None:
            self.nested.add(pid)
        if SHARING_TRAIT in traits:
            self.sharing.add(pid)
        self.indexed[pid] = (tuple(p.inv), traits, aggs)

    def _remove(self, pid):
        entry = self.indexed.pop(pid, None)
        self.frags.pop(pid, None)
        self.nested.discard(pid)
        self.sharing.discard(pid)
        if entry is None:
            return
        classes, traits, aggs = entry
        for rc in classes:
            self.lims[rc].pop(pid, None)
            units = self.units.get(rc)
            if units:
                units.pop(pid, None)
        for t in traits:
            self.by_trait[t].discard(pid)
        for a in aggs:
            self.by_agg[a].discard(pid)

    # -- filters -----------------------------------------------------------------
    def _fitting(self, rc, n):
        lims = self.lims.get(rc)
        if not lims:
            return set()
        ok = {pid for pid, lim in lims.items() if lim >= n}
        units = self.units.get(rc)
        if units:
            for pid, (lo, step) in units.items():
                if n < lo or n % step:
                    ok.discard(pid)
        return ok

    def _any_of(self, index, names):
        out = set()
        for name in names:
            out |= index.get(name, _EMPTY)
        return out

    def matching(self, g, root_required=(), root_forbidden=(), in_tree=None):
        """Ids of the providers that alone serve group ``g``."""
        sets = [self._fitting(rc, n) for rc, n in g.resources.items()]
        sets.sort(key=len)
        found = sets[0]
        for s in sets[1:]:
            if not found:
                return found
            found &= s
        if in_tree is not None:
            found &= {in_tree}
        for anyof in g.required:
            found &= self._any_of(self.by_trait, anyof)
        for t in root_required:
            found &= self.by_trait.get(t, _EMPTY)
        forbidden = set(g.forbidden) | set(root_forbidden)
        if forbidden:
            found -= self._any_of(self.by_trait, forbidden)
        for anyof in g.member_of:
            found &= self._any_of(self.by_agg, anyof)
        if g.forbidden_aggs:
            found -= self._any_of(self.by_agg, g.forbidden_aggs)
        return found

    # -- rendering ------------------------------------------------------------------
    def summary(self, p, shape):
        """``"uuid":{...}`` for the provider summary of shape
        (all classes, wanted classes, with traits, nested fields)."""
        frag = self.frags.get(p.id)
        if frag is not None and frag[0] == shape:
            return frag[1]
        all_classes, wanted, with_traits, nested = shape
        used = p.used
        s = {"resources": {rc: {"capacity": int(inv.capacity()), "used": used.get(rc, 0)}
                           for rc, inv in p.inv.items() if all_classes or rc in wanted}}
        if with_traits:
            s["traits"] = sorted(p.traits, key=lambda t: (t.startswith("CUSTOM_"), t))
        if nested:
            s["parent_provider_uuid"] = None
            s["root_provider_uuid"] = p.uuid
        out = b'"' + p.uuid.encode() + b'":' + base.dumps(s)
        self.frags[p.id] = (shape, out)
        return out


def index_for(st):
    """The state's index, brought up to date with it."""
    idx = st.fast_index
    if idx is None:
        idx = st.fast_index = Index(st)
    else:
        idx.sync(st)
    return idx


def applies(st, groups, same_subtrees):
    """Whether the fast path gives the general search's answer for this request."""
    if len(groups) != 1 or same_subtrees:
        return False
    g = groups[0]
    if g.suffix or not g.resources:
        return False
    idx = index_for(st)
    return not idx.nested and not idx.sharing


def render(st, g, version, limit, randomize, root_required=(), root_forbidden=()):
    """The JSON body of GET /allocation_candidates for a request ``applies`` accepted."""
    idx = index_for(st)
    in_tree = None
    if g.in_tree is not None:
        p = st.by_uuid.get(g.in_tree)
        in_tree = p.id if p is not None else -1
    pids = sorted(idx.matching(g, root_required, root_forbidden, in_tree))
    # Same selection as the general path (which lists candidates by root id).
    if limit and limit < len(pids):
        pids = random.sample(pids, limit) if randomize else pids[:limit]
    elif randomize:
        random.shuffle(pids)
    by_id = st.by_id
    uuids = [by_id[pid].uuid.encode() for pid in pids]
    res = base.dumps(g.resources)
    if version.matches((1, 12)):
        head, mid = b'{"allocations":{"', b'":{"resources":' + res + b"}}"
        if version.matches((1, 34)):
            requests = [head + u + mid + b',"mappings":{"":["' + u + b'"]}}' for u in uuids]
        else:
            requests = [head + u + mid + b"}" for u in uuids]
    else:
        head = b'{"allocations":[{"resource_provider":{"uuid":"'
        tail = b'"},"resources":' + res + b"}]}"
        requests = [head + u + tail for u in uuids]
    all_classes = version.matches((1, 27))
    shape = (all_classes, None if all_classes else frozenset(g.resources),
             version.matches((1, 17)), version.matches((1, 29)))
    summary = idx.summary
    summaries = [summary(by_id[pid], shape) for pid in sorted(pids)]
    return b"".join((b'{"allocation_requests":[', b",".join(requests),
                     b'],"provider_summaries":{', b",".join(summaries), b"}}"))
