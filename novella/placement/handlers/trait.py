"""/traits and /resource_providers/{uuid}/traits."""
import re

from novella.placement import base, ledger, schemas
from novella.placement.handlers import check_generation, provider_or_404

P = "placement:traits:"
RP = "placement:resource_providers:traits:"


def _url(req, name):
    return "%s/traits/%s" % (req.script_name, name)


def put_trait(req):
    req.can(P + "update")
    name = req.path_arg("name")
    if not re.match(schemas.CUSTOM_RE, name) or len(name) > 255:
        raise base.bad_request(
            'The trait is invalid. A valid trait must be no longer than 255 characters, '
            'start with the prefix "CUSTOM_" and use following characters: "A"-"Z", '
            '"0"-"9" and "_"')
    with req.ledger.write() as txn:
        if txn.state.trait_exists(name):
            status, created = 204, txn.state.all_traits()[name]
        else:
            txn.create_trait(name)
            status, created = 201, txn.now
    resp = base.respond(req, None, status=status, location=_url(req, name),
                        last_modified=created)
    return resp


def get_trait(req):
    req.can(P + "show")
    name = req.path_arg("name")
    with req.ledger.read() as st:
        if not st.trait_exists(name):
            raise base.not_found("No such trait(s): %s." % name)
        return base.respond(req, None, status=204, last_modified=st.all_traits()[name])


def delete_trait(req):
    req.can(P + "delete")
    name = req.path_arg("name")
    with req.ledger.write() as txn:
        st = txn.state
        if not st.trait_exists(name):
            raise base.not_found("No such trait(s): %s." % name)
        if name in ledger.STANDARD_TRAITS:
            raise base.bad_request("Cannot delete standard trait %s." % name)
        if any(name in p.traits for p in st.by_id.values()):
            raise base.conflict("The trait %s is in use by a resource provider." % name)
        txn.delete_trait(name)
    return base.no_content(req)


def list_traits(req):
    base.check_accept(req)
    req.can(P + "list")
    base.validate_query(req, schemas.TRAITS_LIST)
    name_in = prefix = associated = None
    if "name" in req.GET:
        value = req.GET["name"]
        op, sep, arg = value.partition(":")
        if not sep:
            raise base.bad_request(
                'Badly formatted name parameter. Expected name query string parameter in '
                'form: ?name=[in|startswith]:[name1,name2|prefix]. Got: "%s"' % value)
        if op == "in":
            name_in = set(arg.split(","))
        elif op == "startswith":
            prefix = arg
    if "associated" in req.GET:
        flag = req.GET["associated"].lower()
        if flag not in ("true", "false"):
            raise base.bad_request('The query parameter "associated" only accepts "true" '
                                   'or "false"')
        associated = flag == "true"
    with req.ledger.read() as st:
        traits = st.all_traits()
        used = set()
        if associated is not None:
            for p in st.by_id.values():
                used |= p.traits
        out = []
        for name in sorted(traits):
            if name_in is not None and name not in name_in:
                continue
            if prefix is not None and not name.startswith(prefix):
                continue
            if associated is not None and (name in used) != associated:
                continue
            out.append(name)
        lm = max((traits[n] for n in out), default=ledger.utcnow())
        return base.respond(req, {"traits": out}, last_modified=lm)


def _provider_traits(req, p, st):
    traits = st.all_traits()
    lm = max((traits.get(t, p.updated) for t in p.traits), default=ledger.utcnow())
    return base.respond(req, {"traits": sorted(p.traits),
                              "resource_provider_generation": p.generation},
                        last_modified=lm)


def list_provider_traits(req):
    base.check_accept(req)
    req.can(RP + "list")
    uuid = req.path_arg("uuid")
    with req.ledger.read() as st:
        p = provider_or_404(st, uuid, "No resource provider with uuid %s found: The "
                            "resource could not be found." % uuid)
        return _provider_traits(req, p, st)


def set_provider_traits(req):
    base.require_json(req)
    req.can(RP + "update")
    data = base.extract_json(req, schemas.TRAITS_PUT_RP)
    with req.ledger.write() as txn:
        st = txn.state
        p = provider_or_404(st, req.path_arg("uuid"))
        check_generation(p, data["resource_provider_generation"],
                         "Resource provider's generation already changed. Please update "
                         "the generation and try again.")
        missing = [t for t in data["traits"] if not st.trait_exists(t)]
        if missing:
            raise base.bad_request("No such trait %s" % ", ".join(missing))
        txn.set_traits(p, set(data["traits"]))
        return _provider_traits(req, p, st)


def delete_provider_traits(req):
    req.can(RP + "delete")
    with req.ledger.write() as txn:
        p = provider_or_404(txn.state, req.path_arg("uuid"))
        txn.set_traits(p, set())
    return base.no_content(req)
