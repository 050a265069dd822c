"""/resource_providers/{uuid}/inventories[/{resource_class}]."""
from novella.placement import base, schemas
from novella.placement.handlers import check_generation, provider_or_404, provider_url
from novella.placement.ledger import Inventory, class_order

P = "placement:resource_providers:inventories:"
DEFAULTS = {"reserved": 0, "min_unit": 1, "max_unit": schemas.MAX_INT, "step_size": 1,
            "allocation_ratio": 1.0}


def _make(data):
    d = dict(DEFAULTS, **data)
    return Inventory(d[f] for f in Inventory.FIELDS)


def _check_capacity(req, p, rc, inv, prefix):
    bad = inv[1] > inv[0] if req.version.matches((1, 26)) else inv[1] >= inv[0]
    if bad:
        raise base.bad_request(
            "%s: Invalid inventory for '%s' on resource provider '%s'. The reserved value "
            "is greater than %stotal." % (prefix, rc, p.uuid,
                                         "" if req.version.matches((1, 26)) else
                                         "or equal to "))


def _check_classes(st, p, rcs, prefix):
    for rc in rcs:
        if not st.class_exists(rc):
            raise base.bad_request("%s: No such resource class %s." % (prefix, rc))


def _in_use(p, removed):
    """Resource classes of ``removed`` that have allocations on ``p``."""
    return class_order(rc for rc in removed if p.used.get(rc))


def _send_one(req, p, rc, status=200, location=None):
    out = p.inv[rc].as_dict()
    out["resource_provider_generation"] = p.generation
    return base.respond(req, out, status=status, last_modified=p.updated or p.created,
                        location=location)


def _send_all(req, p):
    return base.respond(req, {"resource_provider_generation": p.generation,
                              "inventories": {rc: inv.as_dict() for rc, inv in p.inv.items()}},
                        last_modified=p.updated or p.created)


def get_inventories(req):
    base.check_accept(req)
    req.can(P + "list")
    uuid = req.path_arg("uuid")
    with req.ledger.read() as st:
        p = provider_or_404(st, uuid, "No resource provider with uuid %s found : The "
                            "resource could not be found." % uuid)
        return _send_all(req, p)


def get_inventory(req):
    base.check_accept(req)
    req.can(P + "show")
    uuid, rc = req.path_arg("uuid"), req.path_arg("resource_class")
    with req.ledger.read() as st:
        p = provider_or_404(st, uuid, "No resource provider with uuid %s found : The "
                            "resource could not be found." % uuid)
        if rc not in p.inv:
            raise base.not_found("No inventory of class %s for %s" % (rc, uuid))
        return _send_one(req, p, rc)


def _provider(req, st):
    return provider_or_404(st, req.path_arg("uuid"))


def create_inventory(req):
    base.require_json(req)
    req.can(P + "create")
    with req.ledger.read() as st:
        _provider(req, st)
    data = base.extract_json(req, schemas.INVENTORY_POST)
    rc = data.pop("resource_class")
    data.pop("resource_provider_generation", None)
    inv = _make(data)
    with req.ledger.write() as txn:
        p = _provider(req, txn.state)
        prefix = "Unable to create inventory for resource provider %s" % p.uuid
        _check_capacity(req, p, rc, inv, prefix)
        _check_classes(txn.state, p, [rc], prefix)
        if rc in p.inv:
            raise base.conflict("Update conflict: Inventory for '%s' on resource provider "
                                "'%s' already exists." % (rc, p.uuid), base.CONCURRENT_UPDATE)
        txn.set_inventories(p, dict(p.inv, **{rc: inv}))
        return _send_one(req, p, rc, status=201,
                         location="%s/inventories/%s" % (provider_url(req, p), rc))


def set_inventories(req):
    base.require_json(req)
    req.can(P + "update")
    with req.ledger.read() as st:
        _provider(req, st)
    data = base.extract_json(req, schemas.INVENTORIES_PUT)
    new = {rc: _make(d) for rc, d in data["inventories"].items()}
    with req.ledger.write() as txn:
        p = _provider(req, txn.state)
        check_generation(p, data["resource_provider_generation"])
        for rc, inv in new.items():
            _check_capacity(req, p, rc, inv, "Unable to update inventory for resource "
                            "provider %s" % p.uuid)
        _check_classes(txn.state, p, new, "Unknown resource class in inventory for resource "
                       "provider %s" % p.uuid)
        busy = _in_use(p, [rc for rc in p.inv if rc not in new])
        if busy:
            raise base.conflict("update conflict: Inventory for '%s' on resource provider "
                                "'%s' in use." % (", ".join(busy), p.uuid),
                                base.INVENTORY_INUSE)
        txn.set_inventories(p, new)
        return _send_all(req, p)


def update_inventory(req):
    base.require_json(req)
    req.can(P + "update")
    rc = req.path_arg("resource_class")
    with req.ledger.read() as st:
        _provider(req, st)
    data = base.extract_json(req, schemas.INVENTORY)
    generation = data.pop("resource_provider_generation")
    inv = _make(data)
    with req.ledger.write() as txn:
        p = _provider(req, txn.state)
        check_generation(p, generation)
        prefix = "Unable to update inventory for resource provider %s" % p.uuid
        _check_capacity(req, p, rc, inv, prefix)
        if rc not in p.inv:
            raise base.bad_request("No inventory record with resource class for resource "
                                   "provider %s: No inventory of class %s found."
                                   % (p.uuid, rc))
        txn.set_inventories(p, dict(p.inv, **{rc: inv}))
        return _send_one(req, p, rc)


def delete_inventory(req):
    req.can(P + "delete")
    rc = req.path_arg("resource_class")
    with req.ledger.write() as txn:
        p = _provider(req, txn.state)
        if rc not in p.inv:
            raise base.not_found("No inventory of class %s found for delete: No inventory "
                                 "of class %s found." % (rc, rc))
        if _in_use(p, [rc]):
            raise base.conflict("Unable to delete inventory of class %s: Inventory for '%s' "
                                "on resource provider '%s' in use." % (rc, rc, p.uuid),
                                base.CONCURRENT_UPDATE)
        txn.set_inventories(p, {k: v for k, v in p.inv.items() if k != rc})
    return base.no_content(req)


def delete_inventories(req):
    req.can(P + "delete")
    with req.ledger.write() as txn:
        p = _provider(req, txn.state)
        busy = _in_use(p, list(p.inv))
        if busy:
            raise base.conflict("Inventory for '%s' on resource provider '%s' in use."
                                % (", ".join(busy), p.uuid), base.INVENTORY_INUSE)
        txn.set_inventories(p, {})
    return base.no_content(req)
