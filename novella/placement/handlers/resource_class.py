"""/resource_classes."""
import re

from novella.placement import base, ledger, schemas

P = "placement:resource_classes:"


def _url(req, name):
    return "%s/resource_classes/%s" % (req.script_name, name)


def _one(req, name):
    return {"name": name, "links": [{"rel": "self", "href": _url(req, name)}]}


def _times(st, name):
    created, updated = st.custom_classes.get(name, (ledger._BOOT, None))
    return updated or created


def list_classes(req):
    base.check_accept(req)
    req.can(P + "list")
    with req.ledger.read() as st:
        names = list(ledger.STANDARD_CLASSES) + sorted(st.custom_classes)
        lm = max(_times(st, n) for n in names)
        return base.respond(req, {"resource_classes": [_one(req, n) for n in names]},
                            last_modified=lm)


def _get_or_404(st, name):
    if not st.class_exists(name):
        raise base.not_found("No such resource class %s." % name)


def get_class(req):
    base.check_accept(req)
    req.can(P + "show")
    name = req.path_arg("name")
    with req.ledger.read() as st:
        _get_or_404(st, name)
        return base.respond(req, _one(req, name), last_modified=_times(st, name))


def create_class(req):
    base.require_json(req)
    req.can(P + "create")
    name = base.extract_json(req, schemas.RC_POST)["name"]
    with req.ledger.write() as txn:
        if txn.state.class_exists(name):
            raise base.conflict("Conflicting resource class already exists: %s" % name)
        txn.create_class(name)
    return base.respond(req, None, status=201, location=_url(req, name))


def update_class(req):
    req.can(P + "update")
    name = req.path_arg("name")
    if not req.version.matches((1, 7)):
        base.require_json(req)
        new = base.extract_json(req, schemas.RC_POST)["name"]
        with req.ledger.write() as txn:
            st = txn.state
            _get_or_404(st, name)
            if name in ledger.STANDARD_CLASS_SET:
                raise base.bad_request("Cannot update standard resource class %s" % name)
            if st.class_exists(new):
                raise base.conflict("Resource class already exists: %s" % new)
            if any(name in p.inv for p in st.by_id.values()):
                raise base.conflict("Cannot rename resource class %s: it is in use" % name)
            txn.delete_class(name)
            txn.create_class(new)
        return base.respond(req, _one(req, new))
    if not re.match(schemas.CUSTOM_RE, name) or len(name) > 255:
        base.extract_json(_Body('{"name": "%s"}' % name), schemas.RC_POST)
    with req.ledger.write() as txn:
        if txn.state.class_exists(name):
            status = 204
        else:
            txn.create_class(name)
            status = 201
    resp = base.respond(req, None, status=status, location=_url(req, name))
    return resp


class _Body:
    def __init__(self, body):
        self.body = body


def delete_class(req):
    req.can(P + "delete")
    name = req.path_arg("name")
    with req.ledger.write() as txn:
        st = txn.state
        _get_or_404(st, name)
        if name in ledger.STANDARD_CLASS_SET:
            raise base.bad_request("Error in delete resource class: Cannot delete standard "
                                   "resource class %s." % name)
        if any(name in p.inv for p in st.by_id.values()) or any(
                name in res for c in st.consumers.values() for res in c.allocs.values()):
            raise base.conflict("Error in delete resource class: Cannot delete resource "
                                "class %s. Class is in use in inventory." % name)
        txn.delete_class(name)
    return base.no_content(req)
