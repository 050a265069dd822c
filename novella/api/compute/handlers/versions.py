"""The versions documents: GET / (all versions), GET /v2.1 and GET /v2 (the deprecated
v2.0 API's document; the v2.0 API itself is not served), and GET /v2.1/versions/{id}
(either document, by its id)."""
from novella.api.compute import errors, microversion


def _v21(req):
    return {"id": "v2.1", "status": "CURRENT", "version": microversion.fmt(microversion.MAX_VERSION),
            "min_version": microversion.fmt(microversion.MIN_VERSION),
            "updated": "2013-07-23T11:33:21Z",
            "links": [{"rel": "self", "href": req.link_prefix() + "/v2.1/"},
                      {"rel": "describedby", "type": "text/html",
                       "href": "http://docs.openstack.org/"}],
            "media-types": [{"base": "application/json",
                             "type": "application/vnd.openstack.compute+json;version=2.1"}]}


def _v20(req):
    return {"id": "v2.0", "status": "DEPRECATED", "version": "", "min_version": "",
            "updated": "2025-07-04T12:00:00Z",
            "links": [{"rel": "self", "href": req.link_prefix() + "/v2/"},
                      {"rel": "describedby", "type": "text/html",
                       "href": "http://docs.openstack.org/"}],
            "media-types": [{"base": "application/json",
                             "type": "application/vnd.openstack.compute+json;version=2"}]}


def root(req):
    versions = [_v20(req), _v21(req)]
    for v in versions:
        del v["media-types"]
        v["links"] = v["links"][:1]
    return 200, {"versions": versions}, {}


def show_v20(req):
    return 200, {"version": _v20(req)}, {}


def show_v21(req):
    return 200, {"version": _v21(req)}, {}


def show(req, version_id):
    """GET /v2.1/versions/{id}: the document of the version named (v2.0 or v2.1)."""
    shows = {"v2.0": show_v20, "v2.1": show_v21}
    if version_id not in shows:
        raise errors.NotFound("The resource could not be found.")
    return shows[version_id](req)


ROUTES = [("GET", "/versions/{version_id}", show)]
