"""/resource_providers and /resource_providers/{uuid}."""
import uuid as uuidlib

from novella.placement import base, params, schemas
from novella.placement.handlers import provider_or_404, provider_url

P = "placement:resource_providers:"


def serialize(req, p):
    url = provider_url(req, p)
    rels = ["inventories", "usages"]
    v = req.version
    rels += [r for r, mv in (("aggregates", (1, 1)), ("traits", (1, 6)),
                             ("allocations", (1, 11))) if v.matches(mv)]
    out = {"uuid": p.uuid, "name": p.name, "generation": p.generation,
           "links": [{"rel": "self", "href": url}] +
                    [{"rel": r, "href": "%s/%s" % (url, r)} for r in rels]}
    if v.matches((1, 14)):
        out["parent_provider_uuid"] = p.parent.uuid if p.parent else None
        out["root_provider_uuid"] = p.root.uuid
    return out


def _last_modified(p):
    return p.updated or p.created


def get_provider(req):
    base.check_accept(req)
    req.can(P + "show")
    with req.ledger.read() as st:
        p = provider_or_404(st, req.path_arg("uuid"))
        return base.respond(req, serialize(req, p), last_modified=_last_modified(p))


def list_providers(req):
    base.check_accept(req)
    req.can(P + "list")
    base.validate_query(req, schemas.pick(schemas.RP_LIST, req.version))
    q = req.GET
    member_of = forbidden_aggs = required = forbidden = None
    if "member_of" in q:
        member_of, forbidden_aggs = params.member_of(req)
    if "required" in q:
        required, forbidden = params.traits(req)
    wanted = params.resources(q["resources"]) if "resources" in q else None
    with req.ledger.read() as st:
        if wanted:
            missing = [rc for rc in wanted if not st.class_exists(rc)]
            if missing:
                raise base.bad_request(
                    "Invalid resource class in resources parameter: No such resource "
                    "class %s." % missing[0])
        if required is not None:
            names = set().union(*required) | forbidden
            unknown = sorted(t for t in names if not st.trait_exists(t))
            if unknown:
                raise base.bad_request(
                    'Invalid trait(s) in "required" parameter: No such trait(s): %s.'
                    % ", ".join(unknown))
        candidates = st.by_id.values()
        if "in_tree" in q:
            tree = st.by_uuid.get(q["in_tree"])
            candidates = tree.root.descendants() if tree else []
        out = []
        for p in sorted(candidates, key=lambda x: x.id):
            if "name" in q and p.name != q["name"]:
                continue
            if "uuid" in q and p.uuid != q["uuid"]:
                continue
            if member_of and not all(p.aggs & anyof for anyof in member_of):
                continue
            if forbidden_aggs and p.aggs & forbidden_aggs:
                continue
            if required and not all(p.traits & anyof for anyof in required):
                continue
            if forbidden and p.traits & forbidden:
                continue
            if wanted and not all(rc in p.inv and p.inv[rc].fits(p.used.get(rc, 0), n)
                                  for rc, n in wanted.items()):
                continue
            out.append(p)
        lm = max((_last_modified(p) for p in out), default=None)
        from novella.placement import ledger
        return base.respond(req, {"resource_providers": [serialize(req, p) for p in out]},
                            last_modified=lm or ledger.utcnow())


def create_provider(req):
    base.require_json(req)
    req.can(P + "create")
    v = req.version
    data = base.extract_json(req, schemas.RP_POST_1_14 if v.matches((1, 14)) else schemas.RP_POST)
    uuid = str(uuidlib.UUID(data["uuid"])) if data.get("uuid") else str(uuidlib.uuid4())
    name = data["name"]
    with req.ledger.write() as txn:
        st = txn.state
        dups = []
        if uuid in st.by_uuid:
            dups.append("uuid: %s" % uuid)
        if name in st.by_name:
            dups.append("name: %s" % name)
        if dups:
            raise base.conflict("Conflicting resource provider %s already exists."
                                % ", ".join(dups), base.DUPLICATE_NAME)
        parent = None
        parent_uuid = data.get("parent_provider_uuid")
        if parent_uuid:
            parent = st.by_uuid.get(parent_uuid)
            if parent_uuid == uuid:
                why = "parent provider UUID cannot be same as UUID. Please modify " \
                      "UUID or parent provider UUID."
            elif parent is None:
                why = "parent provider UUID does not exist."
            else:
                why = None
            if why:
                raise base.bad_request(
                    'Unable to create resource provider "%s", %s: Object action create '
                    'failed because: %s' % (name, uuid, why))
        p = txn.create_provider(uuid, name, parent)
    location = provider_url(req, p)
    if v.matches((1, 20)):
        return base.respond(req, serialize(req, p), last_modified=p.created,
                            location=location)
    resp = base.respond(req, None, status=201, location=location)
    return resp


def update_provider(req):
    base.require_json(req)
    req.can(P + "update")
    v = req.version
    with req.ledger.read() as st:
        provider_or_404(st, req.path_arg("uuid"))
    data = base.extract_json(req, schemas.RP_PUT_1_14 if v.matches((1, 14)) else schemas.RP_PUT)
    with req.ledger.write() as txn:
        st = txn.state
        p = provider_or_404(st, req.path_arg("uuid"))
        name = data.get("name", p.name)
        parent = p.parent
        if "parent_provider_uuid" in data:
            parent_uuid = data["parent_provider_uuid"]
            parent = st.by_uuid.get(parent_uuid) if parent_uuid else None
            why = None
            if parent_uuid and parent is None:
                why = "parent provider UUID does not exist."
            elif parent is not p.parent:
                if p.parent is not None and not v.matches((1, 37)):
                    why = ("re-parenting a provider is not currently allowed." if parent
                           else "un-parenting a provider is not currently allowed.")
                elif parent is not None and (parent is p or parent in p.descendants()):
                    why = "creating loop in the provider tree is not allowed."
            if why:
                raise base.bad_request(
                    "Unable to save resource provider %s: Object action update failed "
                    "because: %s" % (p.uuid, why))
        other = st.by_name.get(name)
        if other is not None and other is not p:
            raise base.conflict("Conflicting resource provider %s already exists." % name,
                                base.DUPLICATE_NAME)
        txn.update_provider(p, name, parent)
        return base.respond(req, serialize(req, p), last_modified=p.updated)


def delete_provider(req):
    req.can(P + "delete")
    uuid = req.path_arg("uuid")
    with req.ledger.write() as txn:
        st = txn.state
        p = provider_or_404(st, uuid, "No resource provider with uuid %s found for delete"
                            % uuid)
        if p.used:
            raise base.conflict("Unable to delete resource provider %s: Resource provider "
                                "has allocations." % uuid, base.PROVIDER_IN_USE)
        if p.children:
            raise base.conflict("Unable to delete parent resource provider %s: It has "
                                "child resource providers." % uuid,
                                base.PROVIDER_CANNOT_DELETE_PARENT)
        txn.delete_provider(p)
    return base.no_content(req)
