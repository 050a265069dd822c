"""One module per API resource; helpers shared by them."""
from novella.placement import base


def provider_or_404(state, uuid, detail=None):
    p = state.by_uuid.get(uuid)
    if p is None:
        raise base.not_found(detail or "No resource provider with uuid %s found" % uuid,
                             base.PROVIDER_NOT_FOUND)
    return p


def provider_url(req, p):
    return "%s/resource_providers/%s" % (req.script_name, p.uuid)


def check_generation(p, generation, detail="resource provider generation conflict"):
    if generation != p.generation:
        raise base.conflict(detail, base.CONCURRENT_UPDATE)
