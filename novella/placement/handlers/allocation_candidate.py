"""GET /allocation_candidates."""
import random

from novella.placement import base, candidates, fastpath, ledger, params, schemas


def _groups(req):
    v = req.version
    pattern = params.GROUP_KEY_1_33 if v.matches((1, 33)) else params.GROUP_KEY
    groups = {}
    for key, value in req.GET.items():
        match = pattern.match(key)
        if not match:
            continue
        kind, suffix = match.group(1), match.group(2) or ""
        g = groups.get(suffix)
        if g is None:
            g = groups[suffix] = candidates.Group(suffix)
        if kind == "resources":
            g.resources = params.resources(value)
        elif kind == "required":
            g.required, g.forbidden = params.traits(req, suffix)
        elif kind == "member_of":
            g.member_of, g.forbidden_aggs = params.member_of(req, suffix)
        else:
            g.in_tree = params.in_tree(value)
    return groups


def _request_wide(req):
    q = req.GET
    limit = int(q.getall("limit")[0]) if q.getall("limit") else None
    policy = q.getall("group_policy")[0] if q.getall("group_policy") else None
    root_req, root_forb = set(), set()
    roots = q.getall("root_required")
    if roots:
        if len(roots) > 1:
            raise base.bad_request("Query parameter 'root_required' may be specified only "
                                   "once.", base.QUERY_DUPLICATE_KEY)
        required, root_forb = params.traits_value(roots[0], allow_forbidden=True)
        root_req = set().union(*required) if required else set()
        conflicts = root_req & root_forb
        if conflicts:
            raise base.bad_request("Conflicting required and forbidden traits found in "
                                   "root_required: %s" % ", ".join(conflicts),
                                   base.QUERY_BAD_VALUE)
    subtrees = []
    for value in q.getall("same_subtree"):
        suffixes = set(s.strip() for s in value.split(","))
        if "" in suffixes:
            raise base.bad_request("Empty string (unsuffixed group) can not be specified in "
                                   "`same_subtree` ", base.QUERY_BAD_VALUE)
        subtrees.append(suffixes)
    return limit, policy, root_req, root_forb, subtrees


def _check_groups(req, groups, subtrees):
    v = req.version
    if v.matches((1, 36)):
        resourceless = [s for s, g in groups.items() if not g.resources]
        if len(resourceless) == len(groups):
            raise base.bad_request("There must be at least one resources or resources[$S] "
                                   "parameter.", base.QUERY_MISSING_VALUE)
        in_subtree = set().union(*subtrees)
        bad = [s for s in resourceless if s not in in_subtree]
        if bad:
            raise base.bad_request("Resourceless suffixed group request should be specified "
                                   "in `same_subtree` query param: bad group(s) - %s." % bad,
                                   base.QUERY_BAD_VALUE)
        bad = [s for s in in_subtree if s not in groups]
        if bad:
            raise base.bad_request("Real suffixes should be specified in `same_subtree`: "
                                   "%s not found in %s." % (bad, list(groups)),
                                   base.QUERY_BAD_VALUE)
    else:
        orphans = ["required%s" % s for s, g in groups.items() if g.required and not g.resources]
        if orphans:
            raise base.bad_request("All traits parameters must be associated with resources.  "
                                   "Found the following orphaned traits keys: %s"
                                   % ", ".join(orphans))
        orphans = ["member_of%s" % s for s, g in groups.items()
                   if not g.resources and (g.member_of or g.forbidden_aggs)]
        if orphans:
            raise base.bad_request("All member_of parameters must be associated with "
                                   "resources. Found the following orphaned member_of "
                                   "keys: %s" % ", ".join(orphans))
        if not all(g.resources for g in groups.values()):
            raise base.bad_request("All request groups must specify resources.")
        if not groups:
            raise base.bad_request("At least one request group (`resources` or "
                                   "`resources{$S}`) is required.")
    if v.matches((1, 22)):
        conflicts = []
        for s, g in groups.items():
            for anyof in g.required:
                if anyof <= g.forbidden:
                    conflicts.append("required%s: (%s)" % (s, ", ".join(sorted(anyof))))
        if conflicts:
            raise base.bad_request("Conflicting required and forbidden traits found in the "
                                   "following traits keys: %s" % ", ".join(sorted(conflicts)))


def list_candidates(req):
    base.check_accept(req)
    req.can("placement:allocation_candidates:list")
    v = req.version
    base.validate_query(req, schemas.candidates_schema(v))
    limit, policy, root_req, root_forb, subtrees = _request_wide(req)
    groups = _groups(req)
    _check_groups(req, groups, subtrees)
    if not policy and len([s for s in groups if s]) > 1:
        raise base.bad_request('The "group_policy" parameter is required when specifying '
                               'more than one "resources{N}" parameter.')
    conf = req.environ["placement.conf"].placement
    with req.ledger.read() as st:
        for g in groups.values():
            for rc in g.resources:
                if not st.class_exists(rc):
                    raise base.bad_request("Invalid resource class in resources parameter: "
                                           "No such resource class %s." % rc)
        names = set(root_req) | root_forb
        for g in groups.values():
            names |= set().union(*g.required) if g.required else set()
            names |= g.forbidden
        unknown = sorted(t for t in names if not st.trait_exists(t))
        if unknown:
            raise base.bad_request("No such trait(s): %s." % ", ".join(unknown))
        ordered = sorted(groups.values(), key=lambda g: (g.suffix != "", g.suffix))
        if fastpath.applies(st, ordered, subtrees):
            body = fastpath.render(st, ordered, v, limit, conf.randomize_allocation_candidates,
                                   root_req, root_forb, policy)
        else:
            body = _general(req, st, ordered, groups, limit, conf, policy, subtrees,
                            root_req, root_forb)
    resp = req.response
    resp.body = body
    resp.content_type = "application/json"
    resp.charset = None
    if v.matches((1, 15)):
        resp.last_modified = ledger.utcnow()
        resp.cache_control = "no-cache"
    return resp


def _general(req, st, ordered, groups, limit, conf, policy, subtrees, root_req, root_forb):
    """The general search (candidates.Search) and its rendering."""
    v = req.version
    found = candidates.Search(st, ordered, policy, subtrees, root_req, root_forb,
                              nested=v.matches((1, 29))).run()
    has_trees = any(p.parent is not None for p in st.by_id.values())
    if limit and limit < len(found):
        if conf.randomize_allocation_candidates:
            found = random.sample(found, limit)
        else:
            found = found[:limit]
    elif conf.randomize_allocation_candidates:
        random.shuffle(found)
    return _render(req, st, found, groups, has_trees)


def _render(req, st, found, groups, has_trees):
    v = req.version
    as_dict = v.matches((1, 12))
    with_mappings = v.matches((1, 34))
    requests = []
    used = set()
    for allocs, mappings in found:
        used.update(allocs)
        if as_dict:
            item = {"allocations": {p.uuid: {"resources": r} for p, r in allocs.items()}}
            if with_mappings:
                item["mappings"] = {s: [p.uuid for p in ps] for s, ps in mappings.items()}
        else:
            item = {"allocations": [{"resource_provider": {"uuid": p.uuid}, "resources": r}
                                    for p, r in allocs.items()]}
        requests.append(item)
    if not v.matches((1, 29)) and has_trees:
        providers = sorted(used, key=lambda p: p.id)
    else:
        seen, providers = set(), []
        for root in sorted({p.root for p in used}, key=lambda r: r.id):
            for p in sorted(root.descendants(), key=lambda q: q.id):
                if p.id not in seen:
                    seen.add(p.id)
                    providers.append(p)
    all_classes = v.matches((1, 27))
    wanted = set()
    for g in groups.values():
        wanted.update(g.resources)
    with_traits, nested = v.matches((1, 17)), v.matches((1, 29))
    summaries = {}
    shape = (all_classes, None if all_classes else frozenset(wanted), with_traits, nested)
    for p in providers:
        key = (p.generation, p.parent, p.root, shape)
        memo = p.memo
        if memo is not None and memo[0] == key:
            summaries[p.uuid] = memo[1]
            continue
        used_by = p.used
        res = {rc: {"capacity": int(inv.capacity()), "used": used_by.get(rc, 0)}
               for rc, inv in p.inv.items() if all_classes or rc in wanted}
        s = {"resources": res}
        if with_traits:
            s["traits"] = sorted(p.traits, key=lambda t: (t.startswith("CUSTOM_"), t))
        if nested:
            s["parent_provider_uuid"] = p.parent.uuid if p.parent else None
            s["root_provider_uuid"] = p.root.uuid
        p.memo = (key, s)
        summaries[p.uuid] = s
    return base.dumps({"allocation_requests": requests, "provider_summaries": summaries})
