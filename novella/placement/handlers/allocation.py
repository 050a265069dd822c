"""/allocations, /allocations/{consumer_uuid}, /resource_providers/{uuid}/allocations."""
import collections
import re

from novella.placement import base, ledger, schemas
from novella.placement.handlers import provider_or_404

P = "placement:allocations:"


def _consumer_json(req, st, c):
    out = {"allocations": {}}
    if c is None:
        return out
    for pid, res in c.allocs.items():
        p = st.by_id[pid]
        out["allocations"][p.uuid] = {"resources": dict(res), "generation": p.generation}
    v = req.version
    if c.allocs and v.matches((1, 12)):
        out["project_id"], out["user_id"] = c.project, c.user
        if v.matches((1, 28)):
            out["consumer_generation"] = c.generation
        if v.matches((1, 38)):
            out["consumer_type"] = c.ctype or "unknown"
    return out


def list_for_consumer(req):
    base.check_accept(req)
    req.can(P + "list")
    with req.ledger.read() as st:
        c = st.consumers.get(req.path_arg("consumer_uuid"))
        lm = (c.updated or c.created) if c else ledger.utcnow()
        return base.respond(req, _consumer_json(req, st, c), last_modified=lm)


def list_for_provider(req):
    base.check_accept(req)
    req.can("placement:resource_providers:allocations:list")
    uuid = req.path_arg("uuid")
    with_gen = req.version.matches((1, 28))
    with req.ledger.read() as st:
        p = provider_or_404(st, uuid, "Resource provider '%s' not found: No resource "
                            "provider with uuid %s found" % (uuid, uuid))
        out, lm = {}, None
        if p.used:
            for c in st.consumers.values():
                res = c.allocs.get(p.id)
                if res:
                    out[c.uuid] = {"resources": dict(res)}
                    if with_gen:
                        out[c.uuid]["consumer_generation"] = c.generation
                    lm = max(lm or c.created, c.updated or c.created)
        return base.respond(req, {"allocations": out,
                                  "resource_provider_generation": p.generation},
                            last_modified=lm or ledger.utcnow())


_NAME = re.compile(schemas.NAME_RE)
_UUID = re.compile(schemas.UUID_RE)
_KEYS = {"allocations", "project_id", "user_id", "consumer_generation", "consumer_type"}
_GROUP = re.compile(f"(?:{schemas.GROUP_RE_1_33})?")


def _quick_mappings(mappings):
    """True when 1.34+ ``mappings`` are plainly valid: {suffix: [provider uuid, ...]}."""
    return type(mappings) is dict and bool(mappings) and all(
        type(k) is str and _GROUP.fullmatch(k) and type(v) is list and v
        and all(type(u) is str and _UUID.match(u) for u in v) for k, v in mappings.items())


def _quick_consumer(data, with_type, with_mappings=False):
    """True when a 1.28+ consumer body is plainly valid (common case fast path)."""
    if type(data) is not dict:
        return False
    if "mappings" in data:
        if not (with_mappings and _quick_mappings(data["mappings"])):
            return False
        if not data.keys() - {"mappings"} <= _KEYS:
            return False
    elif not data.keys() <= _KEYS:
        return False
    if with_type != ("consumer_type" in data) or "consumer_generation" not in data:
        return False
    gen = data["consumer_generation"]
    if gen is not None and type(gen) is not int:
        return False
    for key in ("project_id", "user_id"):
        v = data.get(key)
        if type(v) is not str or not 0 < len(v) <= 255:
            return False
    if with_type:
        ct = data["consumer_type"]
        if type(ct) is not str or not 0 < len(ct) <= 255 or not _NAME.match(ct):
            return False
    allocs = data.get("allocations")
    if type(allocs) is not dict:
        return False
    for rp, entry in allocs.items():
        if not _UUID.match(rp) or type(entry) is not dict or entry.keys() - {"resources", "generation"}:
            return False
        res = entry.get("resources")
        if type(res) is not dict or not res or (
                "generation" in entry and type(entry["generation"]) is not int):
            return False
        for rc, n in res.items():
            if type(n) is not int or n < 1 or not _NAME.match(rc):
                return False
    return True


def _quick_put(req):
    v = req.version
    if not v.matches((1, 28)):
        return None
    with_type, with_mappings = v.matches((1, 38)), v.matches((1, 34))
    return lambda data: bool(data.get("allocations")) and _quick_consumer(
        data, with_type, with_mappings)


def _quick_post(req):
    v = req.version
    if not v.matches((1, 28)):
        return None
    with_type, with_mappings = v.matches((1, 38)), v.matches((1, 34))
    return lambda data: (type(data) is dict and bool(data) and all(
        _UUID.match(k) and _quick_consumer(b, with_type, with_mappings) for k, b in data.items()))


class _Refused(Exception):
    def __init__(self, kind, detail):
        self.kind, self.detail = kind, detail


def _prepare(req, st, uuid, data):
    """Check one consumer's request; return (uuid, project, user, ctype, {pid: res})."""
    v = req.version
    conf = req.environ["placement.conf"].placement
    c = st.consumers.get(uuid)
    if v.matches((1, 28)):
        given = data.get("consumer_generation")
        if c is not None and c.generation != given:
            raise base.conflict("consumer generation conflict - expected %s but got %s"
                                % (c.generation, given), base.CONCURRENT_UPDATE)
        if c is None and given is not None:
            raise base.conflict("consumer generation conflict - expected null but got %s"
                                % given, base.CONCURRENT_UPDATE)
    project, user = data.get("project_id"), data.get("user_id")
    if project is None:
        project = conf.incomplete_consumer_project_id
        user = conf.incomplete_consumer_user_id
    allocs = {}
    for rp_uuid, entry in data["allocations"].items():
        p = st.by_uuid.get(rp_uuid)
        if p is None:
            raise base.bad_request(
                "Allocation for resource provider '%s' that does not exist." % rp_uuid)
        for rc in entry["resources"]:
            if not st.class_exists(rc):
                raise _Refused("notfound", "No such resource class %s." % rc)
        allocs[p.id] = dict(entry["resources"])
    return uuid, project, user, data.get("consumer_type"), allocs


def _check_capacity(st, requests):
    """Refuse allocations that break unit constraints or exceed capacity."""
    replaced = collections.defaultdict(int)
    for uuid, *_rest, allocs in requests:
        c = st.consumers.get(uuid)
        if c is not None:
            for pid, res in c.allocs.items():
                for rc, n in res.items():
                    replaced[pid, rc] += n
    needed = collections.defaultdict(int)
    for *_head, allocs in requests:
        for pid, res in allocs.items():
            for rc, n in res.items():
                needed[pid, rc] += n
    for *_head, allocs in requests:
        for pid, res in allocs.items():
            p = st.by_id[pid]
            for rc, n in res.items():
                inv = p.inv.get(rc)
                if inv is None:
                    raise _Refused("invalid", "Inventory for '%s' on resource provider '%s' "
                                   "invalid." % (rc, p.uuid))
                if not (inv[2] <= n <= inv[3] and n % inv[4] == 0):
                    raise _Refused("invalid", "Unable to create allocation for '%s' on "
                                   "resource provider '%s'. The requested amount would "
                                   "violate inventory constraints." % (rc, p.uuid))
                prev = p.used.get(rc, 0)
                used = prev - replaced[pid, rc]
                after = used + needed[pid, rc]
                if after > inv.capacity() and after > prev:
                    raise _Refused("invalid", "Unable to create allocation for '%s' on "
                                   "resource provider '%s'. The requested amount would "
                                   "exceed the capacity." % (rc, p.uuid))


def _write(req, txn, requests, prefix_notfound):
    st = txn.state
    try:
        _check_capacity(st, requests)
    except _Refused as exc:
        raise base.conflict("Unable to allocate inventory: %s" % exc.detail)
    bump = {}
    for uuid, *_rest, allocs in requests:
        if allocs:
            for pid in allocs:
                bump[pid] = st.by_id[pid]
        else:
            c = st.consumers.get(uuid)
            for pid in (c.allocs if c else ()):
                bump[pid] = st.by_id[pid]
    txn.replace_allocations(requests, bump.values())


def put_allocations(req):
    base.require_json(req)
    req.can(P + "update")
    uuid = req.path_arg("consumer_uuid")
    if not base.is_uuid(uuid):
        raise base.bad_request("Malformed consumer_uuid: %s" % uuid)
    uuid = str(__import__("uuid").UUID(uuid))
    data = base.extract_json(req, schemas.pick(schemas.PUT_ALLOCATIONS, req.version),
                             _quick_put(req))
    if not req.version.matches((1, 12)):
        data["allocations"] = {a["resource_provider"]["uuid"]: {"resources": a["resources"]}
                               for a in data["allocations"]}
    with req.ledger.write() as txn:
        try:
            request = _prepare(req, txn.state, uuid, data)
        except _Refused as exc:
            raise base.bad_request("Unable to allocate inventory for consumer %s: %s"
                                   % (uuid, exc.detail))
        _write(req, txn, [request], None)
    return base.no_content(req)


def post_allocations(req):
    base.require_json(req)
    req.can(P + "manage")
    data = base.extract_json(req, schemas.pick(schemas.POST_ALLOCATIONS, req.version),
                             _quick_post(req))
    with req.ledger.write() as txn:
        try:
            requests = [_prepare(req, txn.state, uuid, body) for uuid, body in data.items()]
        except _Refused as exc:
            raise base.bad_request("Unable to allocate inventory %s" % exc.detail)
        _write(req, txn, requests, None)
    return base.no_content(req)


def delete_allocations(req):
    req.can(P + "delete")
    uuid = req.path_arg("consumer_uuid")
    with req.ledger.write() as txn:
        c = txn.state.consumers.get(uuid)
        if c is None or not c.allocs:
            raise base.not_found("No allocations for consumer '%s'" % uuid)
        txn.replace_allocations([(uuid, c.project, c.user, c.ctype, {})], [])
    return base.no_content(req)
