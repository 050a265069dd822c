"""/resource_providers/{uuid}/aggregates."""
from novella.placement import base, ledger, schemas
from novella.placement.handlers import check_generation, provider_or_404

P = "placement:resource_providers:aggregates:"


def _send(req, p, aggs):
    out = {"aggregates": aggs}
    if req.version.matches((1, 19)):
        out["resource_provider_generation"] = p.generation
    return base.respond(req, out, last_modified=ledger.utcnow())


def get_aggregates(req):
    base.check_accept(req)
    req.can(P + "list")
    with req.ledger.read() as st:
        p = provider_or_404(st, req.path_arg("uuid"))
        return _send(req, p, sorted(p.aggs))


def set_aggregates(req):
    base.require_json(req)
    req.can(P + "update")
    with_gen = req.version.matches((1, 19))
    with req.ledger.read() as st:
        provider_or_404(st, req.path_arg("uuid"))
    data = base.extract_json(req, schemas.AGGREGATES_1_19 if with_gen else schemas.AGGREGATES)
    with req.ledger.write() as txn:
        p = provider_or_404(txn.state, req.path_arg("uuid"))
        if with_gen:
            check_generation(p, data["resource_provider_generation"],
                             "Resource provider's generation already changed. Please "
                             "update the generation and try again.")
            aggs = data["aggregates"]
        else:
            aggs = data
        txn.set_aggregates(p, set(aggs), bump=with_gen)
        return _send(req, p, aggs)
