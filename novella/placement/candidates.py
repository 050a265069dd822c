"""Allocation candidates computed over the in-memory read model.

A request is a set of groups. The unsuffixed group may spread its resource
classes over several providers of one tree (plus sharing providers tied to
the tree by an aggregate); every suffixed group must be met by one provider.
For each tree that can serve every group, the choices are combined and
checked together (capacity of the consolidated amounts, group_policy,
same_subtree, collective traits of the unsuffixed group).
"""
import itertools

SHARING_TRAIT = "MISC_SHARES_VIA_AGGREGATE"


class Group:
    __slots__ = ("suffix", "resources", "required", "forbidden", "member_of",
                 "forbidden_aggs", "in_tree", "same_provider")

    def __init__(self, suffix):
        self.suffix = suffix
        self.same_provider = bool(suffix)
        self.resources, self.required, self.forbidden = {}, [], set()
        self.member_of, self.forbidden_aggs, self.in_tree = [], set(), None


class Search:
    def __init__(self, state, groups, group_policy=None, same_subtrees=(),
                 root_required=(), root_forbidden=(), nested=True, anchors=None):
        self.st = state
        self.groups = groups
        self.isolate = group_policy == "isolate"
        self.same_subtrees = [list(s) for s in same_subtrees]
        self.root_required, self.root_forbidden = set(root_required), set(root_forbidden)
        self.nested = nested
        self._anchors = self._sharing_anchors() if anchors is None else anchors

    # -- sharing providers ---------------------------------------------------------
    def _sharing_anchors(self):
        """{sharing provider id: set of root providers it serves}."""
        sharing = [p for p in self.st.by_id.values() if SHARING_TRAIT in p.traits]
        if not sharing:
            return {}
        wanted = set().union(*(s.aggs for s in sharing))
        by_agg = {}
        for p in self.st.by_id.values():
            for a in p.aggs & wanted:
                by_agg.setdefault(a, []).append(p)
        out = {}
        for s in sharing:
            roots = {s.root}
            for a in s.aggs:
                roots.update(p.root for p in by_agg.get(a, ()))
            out[s.id] = roots
        return out

    # -- per group filters ------------------------------------------------------------
    @staticmethod
    def _aggs_ok(g, p):
        # A provider of the unsuffixed group inherits its own root's aggregates.
        root = p if g.same_provider else p.root
        if g.member_of:
            def match(q):
                return all(q.aggs & s for s in g.member_of)
            if not (match(p) or match(root)):
                return False
        if g.forbidden_aggs and (p.aggs & g.forbidden_aggs or root.aggs & g.forbidden_aggs):
            return False
        return True

    @staticmethod
    def _traits_ok(g, traits):
        return (all(traits & s for s in g.required) and
                not (g.forbidden and traits & g.forbidden))

    def _tree_filter(self, g):
        if g.in_tree is None:
            return None
        p = self.st.by_uuid.get(g.in_tree)
        return p.root if p is not None else False

    def _options(self, g, rc_amounts, whole):
        """Providers able to serve group g, grouped by the roots they serve.

        ``whole``: one provider must serve every class of ``rc_amounts`` (and
        carry the group's traits); returns {root: [providers]}. Otherwise each
        class is served on its own; returns {class: {root: [providers]}}.
        """
        tree = self._tree_filter(g)
        items = list(rc_amounts.items())
        out = {} if whole else {rc: {} for rc, _n in items}
        if tree is False:
            return out
        pool = tree.descendants() if tree is not None else self.st.by_id.values()
        anchors, forbidden = self._anchors, g.forbidden
        aggs = g.member_of or g.forbidden_aggs
        for p in pool:
            if aggs and not self._aggs_ok(g, p):
                continue
            if whole:
                if not self._traits_ok(g, p.traits):
                    continue
            elif forbidden and p.traits & forbidden:
                continue
            inv, used = p.inv, p.used
            roots = (anchors[p.id] if p.id in anchors and (g.same_provider or g.in_tree is None)
                     else (p.root,))
            if whole:
                for rc, n in items:
                    i = inv.get(rc)
                    if i is None or not i.fits(used.get(rc, 0), n):
                        break
                else:
                    for root in roots:
                        out.setdefault(root, []).append(p)
                continue
            for rc, n in items:
                i = inv.get(rc)
                if i is not None and i.fits(used.get(rc, 0), n):
                    by_root = out[rc]
                    for root in roots:
                        by_root.setdefault(root, []).append(p)
        return out

    # -- search -----------------------------------------------------------------------------
    def run(self):
        """Return [(allocations {p: {rc: n}}, mappings {suffix: [p]})]."""
        slots = []  # (group, resource class or None, {root: [providers]})
        for g in self.groups:
            if g.same_provider:
                slots.append((g, None, self._options(g, g.resources, True)))
            else:
                for rc, by_root in self._options(g, g.resources, False).items():
                    slots.append((g, rc, by_root))
        if not slots:
            return []
        roots = set(slots[0][2])
        for _g, _rc, opts in slots[1:]:
            roots &= set(opts)
        if self.root_required or self.root_forbidden:
            roots = {r for r in roots if self.root_required <= r.traits
                     and not (r.traits & self.root_forbidden)}
        out, seen = [], set()
        unsuffixed = [i for i, s in enumerate(slots) if not s[0].same_provider]
        granular = [i for i, s in enumerate(slots) if s[0].same_provider]
        simple = not granular and not self.same_subtrees and not self._anchors
        g0 = slots[0][0]
        for root in sorted(roots, key=lambda r: r.id):
            choices = [s[2][root] for s in slots]
            if simple and all(len(c) == 1 and c[0] is root for c in choices):
                # The whole request is met by the root alone (the common case).
                if (g0.required or g0.forbidden) and not self._traits_ok(g0, root.traits):
                    continue
                out.append(({root: dict(g0.resources)}, {"": [root]}))
                continue
            if all(len(c) == 1 for c in choices):
                combos = [tuple(c[0] for c in choices)]
            else:
                combos = itertools.product(*choices)
            for combo in combos:
                found = self._check(slots, combo, unsuffixed, granular)
                if found is not None:
                    key = (tuple(sorted((p.id, tuple(sorted(r.items())))
                                        for p, r in found[0].items())),
                           tuple(sorted((s, tuple(q.id for q in ps))
                                        for s, ps in found[1].items())))
                    if key not in seen:
                        seen.add(key)
                        out.append(found)
        return out

    def _check(self, slots, combo, unsuffixed, granular):
        if self.isolate and len(granular) > 1:
            chosen = [combo[i] for i in granular]
            if len(set(chosen)) != len(chosen):
                return None
        if unsuffixed:
            g = slots[unsuffixed[0]][0]
            if g.required or g.forbidden:
                traits = set()
                for i in unsuffixed:
                    traits |= combo[i].traits
                if not self._traits_ok(g, traits):
                    return None
        allocs = {}
        for (g, rc, _o), p in zip(slots, combo):
            res = allocs.setdefault(p, {})
            amounts = {rc: g.resources[rc]} if rc else g.resources
            for k, n in amounts.items():
                res[k] = res.get(k, 0) + n
        for p, res in allocs.items():
            for rc, n in res.items():
                inv = p.inv[rc]
                if p.used.get(rc, 0) + n > inv.capacity() or n > inv[3]:
                    return None
        allocs = {p: r for p, r in allocs.items() if r}
        if not self.nested:
            roots = [p.root for p in allocs]
            if len(roots) != len(set(roots)):
                return None
        mappings = {}
        for (g, _rc, _o), p in zip(slots, combo):
            lst = mappings.setdefault(g.suffix, [])
            if p not in lst:
                lst.append(p)
        for suffixes in self.same_subtrees:
            members = set()
            for s in suffixes:
                members.update(mappings.get(s, ()))
            if not any(all(_is_ancestor(a, m) for m in members) for a in members):
                return None
        return allocs, mappings


def _is_ancestor(a, p):
    while p is not None:
        if p is a:
            return True
        p = p.parent
    return False
