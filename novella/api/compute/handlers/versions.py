"""The versions documents: GET / (all versions) and GET /v2.1."""
from novella.api.compute import microversion


def _v21(req):
    return {"id": "v2.1", "status": "CURRENT", "version": microversion.fmt(microversion.MAX_VERSION),
            "min_version": microversion.fmt(microversion.MIN_VERSION),
            "updated": "2013-07-23T11:33:21Z",
            "links": [{"rel": "self", "href": req.link_prefix() + "/v2.1/"},
                      {"rel": "describedby", "type": "text/html",
                       "href": "http://docs.openstack.org/"}],
            "media-types": [{"base": "application/json",
                             "type": "application/vnd.openstack.compute+json;version=2.1"}]}


def root(req):
    v21 = _v21(req)
    del v21["media-types"]
    v21["links"] = v21["links"][:1]
    v20 = {"id": "v2.0", "status": "DEPRECATED", "version": "", "min_version": "",
           "updated": "2025-07-04T12:00:00Z",
           "links": [{"rel": "self", "href": req.link_prefix() + "/v2/"}]}
    return 200, {"versions": [v20, v21]}, {}


def show_v21(req):
    return 200, {"version": _v21(req)}, {}


ROUTES = []
