"""/resource_providers/{uuid}/usages and /usages."""
import collections

from novella.placement import base, ledger, schemas
from novella.placement.handlers import provider_or_404


def provider_usages(req):
    base.check_accept(req)
    req.can("placement:resource_providers:usages")
    uuid = req.path_arg("uuid")
    with req.ledger.read() as st:
        p = provider_or_404(st, uuid, "No resource provider with uuid %s found: The "
                            "resource could not be found." % uuid)
        usages = {rc: p.used.get(rc, 0) for rc in p.inv}
        return base.respond(req, {"resource_provider_generation": p.generation,
                                  "usages": usages}, last_modified=ledger.utcnow())


def total_usages(req):
    base.check_accept(req)
    project = req.GET.get("project_id")
    user = req.GET.get("user_id")
    ctype = req.GET.get("consumer_type")
    req.can("placement:usages", target={"project_id": project})
    by_type = req.version.matches((1, 38))
    base.validate_query(req, schemas.USAGES_1_38 if by_type else schemas.USAGES)
    with req.ledger.read() as st:
        groups = collections.defaultdict(lambda: collections.defaultdict(int))
        counts = collections.defaultdict(int)
        for c in st.consumers.values():
            if c.project != project or (user and c.user != user):
                continue
            if not by_type:
                key = None
            elif ctype == "all":
                key = "all"
            elif ctype == "unknown":
                if c.ctype is not None:
                    continue
                key = "unknown"
            elif ctype and c.ctype != ctype:
                continue
            else:
                key = c.ctype or "unknown"
            counts[key] += 1
            for res in c.allocs.values():
                for rc, n in res.items():
                    groups[key][rc] += n
        if not by_type:
            usages = dict(groups.get(None, {}))
        else:
            usages = {k: dict(v, consumer_count=counts[k]) for k, v in groups.items()}
        return base.respond(req, {"usages": usages}, last_modified=ledger.utcnow())
