"""Fast path of GET /allocation_candidates.

It answers every request without ``same_subtree`` (nested trees, sharing
providers, granular groups, ``group_policy``, ``root_required``,
``in_tree``, ``limit``) exactly as ``candidates.Search`` does, without
walking every provider in Python. An index kept next to the read model
holds:

- per resource class, ``{provider id: largest amount that fits}`` (the
  smaller of ``max_unit`` and the free capacity), plus the few providers
  whose ``min_unit``/``step_size`` are not 1;
- per trait and per aggregate, the set of provider ids;
- the providers that are not plain roots (nested ones, grouped by root,
  and sharing providers with the roots they serve).

For each slot of the request (each class of the unsuffixed group, each
suffixed group as a whole) the providers that qualify are found by set
operations; the plain roots among them serve themselves, the few others
are mapped to the roots they serve. Roots that every slot can use are
visited in id order. A root where each slot has a single choice (the
common case: the unsuffixed group on the root alone, each suffixed group
on one child) is checked in a few comparisons and rendered from JSON
fragments; any other root is combined and checked by the general search's
own code. Provider summaries are fragments cached per provider and
response shape. A request whose qualifying providers are all plain roots
costs what it costs on a flat database, however nested the rest is.

``candidates.Search`` stays the reference of truth; the tests compare the
two on random nested and sharing trees. The index follows the read model
through ``State.touched`` (ids of providers whose inventory, usage, traits,
aggregates or tree changed) and is rebuilt whenever the read model is
reloaded.
"""
import itertools
import math
import random

from novella.placement import base
from novella.placement.candidates import SHARING_TRAIT, Search

_EMPTY = frozenset()


class Index:
    """Candidate lookups over one ``ledger.State``."""

    def __init__(self, st):
        self.st = st
        self.lims = {}      # resource class -> {pid: largest amount that fits}
        self.units = {}     # resource class -> {pid: (min_unit, step_size)} if not (1, 1)
        self.by_trait = {}  # trait -> {pid}
        self.by_agg = {}    # aggregate -> {pid}
        self.nested = set()   # pids of providers with a parent
        self.sharing = set()  # pids of sharing providers
        self.other = set()    # nested | sharing: providers that are not plain roots
        self.members = {}   # root pid -> {pids of its nested providers}
        self.other_rcs = {}  # resource class -> {pids in ``other`` with inventory of it}
        self._plain = None  # ids of the providers not in ``other``, sorted (cache)
        self.indexed = {}   # pid -> (classes, traits, aggregates, root pid) as entered
        self.frags = {}     # pid -> (shape, rendered summary fragment)
        self.shapes = {}    # shape -> the one object of that shape ``frags`` hold
        self.trees = {}     # root pid -> its tree's pids in id order (cache)
        self._anchors = None  # sharing pid -> {root pids it serves} (cache)
        self._shared = {}   # one frozenset object per distinct trait/aggregate set
        self._uuids = {}    # pid -> uuid as bytes
        st.touched.clear()
        for p in st.by_id.values():
            self._add(p)

    def sync(self, st):
        """Re-enter the providers the read model changed since last time."""
        touched = st.touched
        if touched:
            by_id, other = st.by_id, self.other
            for pid in touched:
                was_plain = pid in self.indexed and pid not in other
                old = self._remove(pid)
                p = by_id.get(pid)
                new = self._add(p) if p is not None else None
                if self._anchors is not None and _ties(old) != _ties(new):
                    self._anchors = None
                if was_plain != (new is not None and pid not in other):
                    self._plain = None
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
        root = p.root.id
        if p.parent is not None:
            self.nested.add(pid)
            self.other.add(pid)
            self.members.setdefault(root, set()).add(pid)
            self.trees.pop(root, None)
        if SHARING_TRAIT in traits:
            self.sharing.add(pid)
            self.other.add(pid)
        if pid in self.other:
            for rc in p.inv:
                self.other_rcs.setdefault(rc, set()).add(pid)
        entry = self.indexed[pid] = (tuple(p.inv), traits, aggs, root)
        return entry

    def uuid_bytes(self, pid):
        u = self._uuids.get(pid)
        if u is None:
            u = self._uuids[pid] = self.st.by_id[pid].uuid.encode()
        return u

    def _remove(self, pid):
        self._uuids.pop(pid, None)
        entry = self.indexed.pop(pid, None)
        self.frags.pop(pid, None)
        self.trees.pop(pid, None)
        self.nested.discard(pid)
        self.sharing.discard(pid)
        self.other.discard(pid)
        if entry is None:
            return None
        classes, traits, aggs, root = entry
        for rc in classes:
            self.lims[rc].pop(pid, None)
            units = self.units.get(rc)
            if units:
                units.pop(pid, None)
            others = self.other_rcs.get(rc)
            if others:
                others.discard(pid)
        for t in traits:
            self.by_trait[t].discard(pid)
        for a in aggs:
            self.by_agg[a].discard(pid)
        members = self.members.get(root)
        if members is not None and pid in members:
            members.discard(pid)
            if not members:
                del self.members[root]
            self.trees.pop(root, None)
        return entry

    def plain(self):
        """Ids of the plain roots (no parent, not sharing), in id order."""
        if self._plain is None:
            other = self.other
            self._plain = sorted(pid for pid in self.indexed if pid not in other)
        return self._plain

    # -- trees and sharing ------------------------------------------------------------
    def anchors(self):
        """{sharing pid: {root pids it serves}}, as ``Search._sharing_anchors``."""
        if self._anchors is None:
            by_id, by_agg, out = self.st.by_id, self.by_agg, {}
            for sid in self.sharing:
                roots = {by_id[sid].root.id}
                for a in self.indexed[sid][2]:
                    roots.update(by_id[q].root.id for q in by_agg.get(a, ()))
                out[sid] = roots
            self._anchors = out
        return self._anchors

    def tree(self, root):
        """The pids of ``root``'s tree, in id order."""
        members = self.members.get(root)
        if not members:
            return (root,)
        order = self.trees.get(root)
        if order is None:
            order = self.trees[root] = sorted(members | {root})
        return order

    def _with_trees(self, pids):
        """``pids`` and every nested provider whose root is among them."""
        members = self.members
        if not members:
            return pids
        out = set(pids)
        for r in (pids & members.keys() if len(pids) < len(members) else
                  [r for r in members if r in pids]):
            out |= members[r]
        return out

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

    def qualifying(self, g, amounts, whole, pool):
        """Ids of the providers that can serve ``amounts`` for group ``g``
        (as ``Search._options``, before mapping to roots)."""
        sets = [self._fitting(rc, n) for rc, n in amounts.items()]
        sets.sort(key=len)
        found = sets[0]
        for s in sets[1:]:
            if not found:
                return found
            found &= s
        if pool is not None:
            found &= pool
        if whole:
            for anyof in g.required:
                found &= self._any_of(self.by_trait, anyof)
        if g.forbidden and found:
            found -= self._any_of(self.by_trait, g.forbidden)
        if g.member_of and found:
            matched = None
            for anyof in g.member_of:
                s = self._any_of(self.by_agg, anyof)
                matched = s if matched is None else matched & s
            # The unsuffixed group also accepts a provider whose root matches.
            found &= matched if whole else self._with_trees(matched)
        if g.forbidden_aggs and found:
            bad = self._any_of(self.by_agg, g.forbidden_aggs)
            found -= bad if whole else self._with_trees(bad)
        return found

    # -- rendering ------------------------------------------------------------------
    def summary(self, p, shape):
        """``"uuid":{...}`` for the provider summary of shape
        (all classes, wanted classes, with traits, nested fields)."""
        shape = self.shapes.setdefault(shape, shape)
        frag = self.frags.get(p.id)
        if frag is not None and frag[0] is shape:
            return frag[1]
        all_classes, wanted, with_traits, nested = shape
        used = p.used
        s = {"resources": {rc: {"capacity": int(inv.capacity()), "used": used.get(rc, 0)}
                           for rc, inv in p.inv.items() if all_classes or rc in wanted}}
        if with_traits:
            s["traits"] = sorted(p.traits, key=lambda t: (t.startswith("CUSTOM_"), t))
        if nested:
            s["parent_provider_uuid"] = p.parent.uuid if p.parent is not None else None
            s["root_provider_uuid"] = p.root.uuid
        out = b'"' + p.uuid.encode() + b'":' + base.dumps(s)
        self.frags[p.id] = (shape, out)
        return out


def _ties(entry):
    """What of an index entry decides which roots a sharing provider serves."""
    if entry is None:
        return None
    _classes, traits, aggs, root = entry
    return (SHARING_TRAIT in traits, aggs, root) if aggs or SHARING_TRAIT in traits else root


def index_for(st):
    """The state's index, brought up to date with it."""
    idx = st.fast_index
    if idx is None or idx.st is not st:
        idx = st.fast_index = Index(st)
    else:
        idx.sync(st)
    return idx


def applies(st, groups, same_subtrees):
    """Whether the fast path answers this request (it then gives exactly the
    general search's answer)."""
    return bool(groups) and not same_subtrees and all(g.resources for g in groups)


class _Slot:
    """One slot of the search: a class of the unsuffixed group, or a whole
    suffixed group. ``plain``: plain roots that serve it themselves;
    ``extra``: {root pid: [other pids that serve it for that root]}."""
    __slots__ = ("g", "rc", "plain", "extra", "order")

    def __init__(self, g, rc, plain, extra, order):
        self.g, self.rc, self.plain, self.extra, self.order = g, rc, plain, extra, order

    def roots(self):
        if not self.extra:
            return self.plain
        return self.plain | self.extra.keys()

    def choices(self, r):
        """The providers (objects' ids) that serve this slot for root ``r``,
        in the general search's order."""
        extra = self.extra.get(r)
        if extra is None:
            return [r]
        out = extra + [r] if r in self.plain else list(extra)
        if len(out) > 1:
            out.sort(key=self.order)
        return out


def _slots(idx, st, groups):
    anchors = idx.anchors() if idx.sharing else {}
    by_id, other = st.by_id, idx.other
    slots = []
    for g in groups:
        pool, order = None, None
        if g.in_tree is not None:
            p = st.by_uuid.get(g.in_tree)
            if p is None:
                return None
            tree = p.root.descendants()
            pool = {q.id for q in tree}
            order = {q.id: i for i, q in enumerate(tree)}.__getitem__
        use_anchors = g.same_provider or g.in_tree is None
        parts = [(None, g.resources)] if g.same_provider else [
            (rc, {rc: n}) for rc, n in g.resources.items()]
        for rc, amounts in parts:
            found = idx.qualifying(g, amounts, g.same_provider, pool)
            extra = {}
            others = found & other if other else _EMPTY
            if others:
                found -= others
                for q in others:
                    roots = anchors[q] if use_anchors and q in anchors else (by_id[q].root.id,)
                    for r in roots:
                        lst = extra.get(r)
                        if lst is None:
                            extra[r] = [q]
                        else:
                            lst.append(q)
            slots.append(_Slot(g, rc, found, extra, order))
    return slots


class _Renderer:
    """Allocation requests as JSON fragments, per version."""

    def __init__(self, idx, version):
        self.uuid = idx.uuid_bytes
        self.as_dict = version.matches((1, 12))
        self.with_mappings = version.matches((1, 34))

    def item(self, allocs, mappings):
        """``allocs``: [(pid, resources JSON)] in order; ``mappings``:
        [(suffix JSON, [pids])] in order."""
        u = self.uuid
        return self._bytes([(u(pid), res) for pid, res in allocs],
                           [(s, [u(pid) for pid in pids]) for s, pids in mappings])

    def _bytes(self, allocs, mappings):
        if self.as_dict:
            parts = [b'{"allocations":{']
            parts.append(b",".join(b'"' + u + b'":{"resources":' + res + b"}"
                                   for u, res in allocs))
            if self.with_mappings:
                parts.append(b'},"mappings":{')
                parts.append(b",".join(s + b":[" + b",".join(b'"' + u + b'"' for u in us) + b"]"
                                       for s, us in mappings))
            parts.append(b"}}")
            return b"".join(parts)
        return b'{"allocations":[' + b",".join(
            b'{"resource_provider":{"uuid":"' + u + b'"},"resources":' + res + b"}"
            for u, res in allocs) + b"]}"

    def template(self, resources, suffixes):
        """A ``bytes %`` template of an allocation request whose i-th distinct
        provider serves ``resources[i]`` (JSON) for group ``suffixes[i]``
        (JSON); it takes the providers' uuids, twice when mappings are shown."""
        def esc(b):
            return b.replace(b"%", b"%%")
        body = self._bytes([(b"%s", esc(r)) for r in resources],
                           [(esc(s), [b"%s"]) for s in suffixes])
        return body, 2 if self.as_dict and self.with_mappings else 1


def render(st, groups, version, limit, randomize, root_required=(), root_forbidden=(),
           group_policy=None):
    """The JSON body of GET /allocation_candidates for a request ``applies`` accepted.
    ``groups``: the request's groups, unsuffixed first, then by suffix."""
    idx = index_for(st)
    nested = version.matches((1, 29))
    first = None
    if limit and not randomize:
        first = _first_plain_roots(idx, groups, version, limit, root_required, root_forbidden)
    if first is not None:
        # Each candidate one plain root, the roots distinct and in id order.
        items, used = first
    else:
        found = []  # (allocation request JSON, pids it uses)
        slots = _slots(idx, st, groups)
        if slots:
            found = _search(idx, st, groups, slots, version, nested, group_policy,
                            root_required, root_forbidden,
                            None if randomize else limit)
        if limit and limit < len(found):
            found = random.sample(found, limit) if randomize else found[:limit]
        elif randomize:
            random.shuffle(found)
        items = [item for item, _p in found]
        used = set()
        for _item, pids in found:
            used.update(pids)
    by_id = st.by_id
    if not idx.members or (not nested and idx.nested):
        # No root has a tree below it (or trees are not shown): the providers used.
        listed = used if first is not None else sorted(used)
    else:
        listed = []
        tree = idx.tree
        for r in sorted({by_id[pid].root.id for pid in used}):
            listed.extend(tree(r))
    all_classes = version.matches((1, 27))
    wanted = set()
    for g in groups:
        wanted.update(g.resources)
    shape = (all_classes, None if all_classes else frozenset(wanted),
             version.matches((1, 17)), nested)
    # One object per shape, so that a fragment's is checked by identity.
    shape = idx.shapes.setdefault(shape, shape)
    summary, frags = idx.summary, idx.frags
    parts = [frag[1] if (frag := frags.get(pid)) is not None and frag[0] is shape
             else summary(by_id[pid], shape) for pid in listed]
    return b"".join((b'{"allocation_requests":[', b",".join(items),
                     b'],"provider_summaries":{', b",".join(parts), b"}}"))


def _first_plain_roots(idx, groups, version, limit, root_required, root_forbidden):
    """The first ``limit`` candidates of a request that only plain roots can
    serve, found by walking the roots in id order and stopping at ``limit``
    (work bounded by the answer, not by the number of providers), as
    (allocation requests JSON, their roots' ids); None when the request is
    not of that kind.

    Of that kind: one unsuffixed group, without ``in_tree`` or aggregates,
    none of whose classes any nested or sharing provider has. Each candidate
    is then the root alone, as ``_search`` would find it.
    """
    if len(groups) != 1:
        return None
    g = groups[0]
    if g.same_provider or g.in_tree is not None or g.member_of or g.forbidden_aggs:
        return None
    other_rcs = idx.other_rcs
    if any(other_rcs.get(rc) for rc in g.resources):
        return None
    checks, units = [], []
    for rc, n in g.resources.items():
        lims = idx.lims.get(rc)
        if not lims:
            return [], []
        checks.append((lims.get, n))
        if idx.units.get(rc):
            units.append((idx.units[rc].get, n))
    required = [frozenset(anyof) for anyof in g.required]
    required.extend(frozenset((t,)) for t in root_required)
    forbidden = frozenset(g.forbidden) | frozenset(root_forbidden)
    # A trait asked for alone, or forbidden, is checked against the set of
    # its providers the index keeps (one lookup per root, whatever its
    # traits); only an any-of of several traits looks at the root's traits.
    by_trait = idx.by_trait
    within = [by_trait.get(next(iter(anyof)), _EMPTY) for anyof in required if len(anyof) == 1]
    anyofs = [anyof for anyof in required if len(anyof) != 1]
    outside = [by_trait[t] for t in sorted(forbidden) if by_trait.get(t)]
    indexed = idx.indexed
    render = _Renderer(idx, version)
    template, repeat = render.template([base.dumps(g.resources)], [base.dumps("")])
    ubytes = idx.uuid_bytes
    uuids = idx._uuids
    plain = idx.plain()
    items, pids, pos = [], [], 0
    while len(items) < limit and pos < len(plain):
        # A slice of the roots at a time, each check one pass over what is left.
        step = max(limit - len(items), _MIN_STEP)
        ok = plain[pos:pos + step]
        pos += step
        for get, n in checks:
            ok = [pid for pid in ok if get(pid, _NO_LIMIT) >= n]
        for get, n in units:
            ok = [pid for pid in ok if _unit_fits(get(pid), n)]
        for providers in outside:
            ok = [pid for pid in ok if pid not in providers]
        for providers in within:
            ok = [pid for pid in ok if pid in providers]
        if anyofs:
            ok = [pid for pid in ok
                  if all(not indexed[pid][1].isdisjoint(anyof) for anyof in anyofs)]
        if repeat == 2:
            items.extend([template % (u, u) for u in
                          [uuids.get(pid) or ubytes(pid) for pid in ok]])
        else:
            items.extend([template % (uuids.get(pid) or ubytes(pid),) for pid in ok])
        pids.extend(ok)
    return items[:limit], pids[:limit]


_NO_LIMIT = -math.inf
_MIN_STEP = 64  # roots looked at in one slice, at least


def _unit_fits(units, n):
    return units is None or (n >= units[0] and not n % units[1])


def _search(idx, st, groups, slots, version, nested, group_policy, root_required,
            root_forbidden, stop_at):
    by_id = st.by_id
    roots = None
    for s in sorted(slots, key=lambda s: len(s.plain) + len(s.extra)):
        roots = set(s.roots()) if roots is None else roots & s.roots()
        if not roots:
            return []
    for t in root_required:
        roots &= idx.by_trait.get(t, _EMPTY)
    if root_forbidden:
        roots -= idx._any_of(idx.by_trait, root_forbidden)
    if not roots:
        return []
    render = _Renderer(idx, version)
    g0 = groups[0]
    unsuffixed = [s for s in slots if not s.g.same_provider]
    granular = [s for s in slots if s.g.same_provider]
    # Roots whose unsuffixed group can only be the root itself.
    u_complex = set()
    for s in unsuffixed:
        u_complex.update(s.extra)
    u_traits = None
    if unsuffixed and g0.required:
        for anyof in g0.required:
            s = idx._any_of(idx.by_trait, anyof)
            u_traits = s if u_traits is None else u_traits & s
    u_res = base.dumps(g0.resources) if unsuffixed else None
    g_res = [base.dumps(s.g.resources) for s in granular]
    g_suffix = [base.dumps(s.g.suffix) for s in granular]
    u_map = base.dumps("") if unsuffixed else None
    template, repeat = render.template(([u_res] if unsuffixed else []) + g_res,
                                       ([u_map] if unsuffixed else []) + g_suffix)
    ubytes = idx.uuid_bytes
    if not granular and not u_complex:
        # Every candidate is a plain root alone (as on a flat database).
        rs = sorted(roots if u_traits is None else roots & u_traits)
        if stop_at:
            rs = rs[:stop_at]
        return [(template % ((ubytes(r),) * repeat), (r,)) for r in rs]
    sharing = idx.sharing
    general = None
    seen = set()
    out = []
    for r in sorted(roots):
        if r not in u_complex:
            picks = []
            for s in granular:
                extra = s.extra.get(r)
                if extra is None:
                    picks.append(r)
                elif len(extra) == 1 and r not in s.plain:
                    picks.append(extra[0])
                else:
                    break
            else:
                if unsuffixed and u_traits is not None and r not in u_traits:
                    continue
                used = [r] + picks if unsuffixed else picks
                if len(set(used)) == len(used):
                    # Distinct providers (so group_policy=isolate holds too):
                    # each slot's own fit is the whole check.
                    if not nested and len(used) > 1 and len(
                            {by_id[pid].root.id for pid in used}) != len(used):
                        continue
                    if sharing and not sharing.isdisjoint(used):
                        key = _key(r if unsuffixed else None, g0, picks, granular)
                        if key in seen:
                            continue
                        seen.add(key)
                    uuids = [ubytes(pid) for pid in used]
                    out.append((template % tuple(uuids * repeat), used))
                    if stop_at and len(out) >= stop_at:
                        return out
                    continue
        # Any other root: the general search's own combination and check.
        if general is None:
            general = Search(st, list(groups), group_policy, (), (), (),
                             nested=nested, anchors={})
            plain_slots = [(s.g, s.rc, None) for s in slots]
            u_idx = [i for i, s in enumerate(slots) if not s.g.same_provider]
            g_idx = [i for i, s in enumerate(slots) if s.g.same_provider]
        choices = [[by_id[pid] for pid in s.choices(r)] for s in slots]
        combos = ([tuple(c[0] for c in choices)] if all(len(c) == 1 for c in choices)
                  else itertools.product(*choices))
        for combo in combos:
            hit = general._check(plain_slots, combo, u_idx, g_idx)
            if hit is None:
                continue
            allocs, mappings = hit
            key = (tuple(sorted((p.id, tuple(sorted(res.items()))) for p, res in allocs.items())),
                   tuple(sorted((s, tuple(q.id for q in ps)) for s, ps in mappings.items())))
            if key in seen:
                continue
            seen.add(key)
            out.append((render.item([(p.id, base.dumps(res)) for p, res in allocs.items()],
                                    [(base.dumps(s), [q.id for q in ps])
                                     for s, ps in mappings.items()]),
                        [p.id for p in allocs]))
            if stop_at and len(out) >= stop_at:
                return out
    return out


def _key(r, g0, picks, granular):
    """The general search's identity of a candidate whose providers are
    distinct: ``r`` serves the unsuffixed group (or None), ``picks`` the
    suffixed groups."""
    allocs = [(pid, tuple(sorted(s.g.resources.items()))) for pid, s in zip(picks, granular)]
    mappings = [(s.g.suffix, (pid,)) for pid, s in zip(picks, granular)]
    if r is not None:
        allocs.append((r, tuple(sorted(g0.resources.items()))))
        mappings.append(("", (r,)))
    return tuple(sorted(allocs)), tuple(sorted(mappings))
