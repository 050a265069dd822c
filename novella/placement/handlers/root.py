"""GET /: version discovery."""
from novella.placement import base, ledger


def home(req):
    return base.respond(req, {"versions": [{
        "id": "v" + base.MIN_VERSION, "max_version": base.MAX_VERSION,
        "min_version": base.MIN_VERSION, "status": "CURRENT",
        "links": [{"rel": "self", "href": ""}]}]}, last_modified=ledger.utcnow())
