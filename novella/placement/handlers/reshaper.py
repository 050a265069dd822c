"""POST /reshaper: move inventory and allocations between providers atomically."""
from novella.placement import base, schemas
from novella.placement.handlers import allocation, inventory


def reshape(req):
    req.can("placement:reshaper:reshape")
    base.require_json(req)
    data = base.extract_json(req, schemas.pick(schemas.RESHAPER, req.version))
    with req.ledger.write() as txn:
        st = txn.state
        plan = []
        for rp_uuid, body in data["inventories"].items():
            p = st.by_uuid.get(rp_uuid)
            if p is None:
                raise base.bad_request("Resource provider %s in inventories not found: No "
                                       "resource provider with uuid %s found"
                                       % (rp_uuid, rp_uuid), base.PROVIDER_NOT_FOUND)
            given = body["resource_provider_generation"]
            if given != p.generation:
                raise base.conflict("resource provider generation conflict for provider %s: "
                                    "actual: %s, given: %s" % (rp_uuid, p.generation, given),
                                    base.CONCURRENT_UPDATE)
            new = {rc: inventory._make(d) for rc, d in body["inventories"].items()}
            for rc in new:
                if not st.class_exists(rc):
                    raise base.bad_request("malformed reshaper data: No such resource "
                                           "class %s." % rc)
            plan.append((p, new))
        try:
            requests = [allocation._prepare(req, st, uuid, body)
                        for uuid, body in data["allocations"].items()]
        except allocation._Refused as exc:
            raise base.bad_request("malformed reshaper data: %s" % exc.detail)
        for p, new in plan:
            if new:
                txn.set_inventories(p, dict(p.inv, **new))
        allocation._write(req, txn, requests, None)
        for p, new in plan:
            busy = [rc for rc in p.used if rc not in new]
            if busy:
                raise base.conflict("update conflict: Inventory for '%s' on resource "
                                    "provider '%s' in use." % (", ".join(busy), p.uuid),
                                    base.INVENTORY_INUSE)
            txn.set_inventories(p, new)
    return base.no_content(req)
