"""Property-based fuzzing of every route of every HTTP API.

Each example picks a route of one API (compute, placement, identity, image,
network, volume), fills its path variables, and sends generated bodies,
headers and query strings. Whatever arrives, the API must answer below 500,
within a bounded time, with the reference's error shape on every 4xx, and a
refused request must leave every row count and placement's usages as they
were.

The run is deterministic (derandomized) and small by default; for a longer
local run set ``NOVELLA_FUZZ_EXAMPLES`` (examples per API), e.g.::

    NOVELLA_FUZZ_EXAMPLES=2000 python3 -m pytest -q tests/functional/test_fuzz_apis.py
"""
import json
import os
import threading
import uuid

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from novella.api.compute import wsgi as compute_wsgi
from novella.api.image import app as image_app
from novella.api.network import app as network_app
from novella.api.volume import app as volume_app
from novella.placement import wsgi as placement_wsgi
from tests.functional.all_apis import AllAPIs, error_shape_ok

EXAMPLES = int(os.environ.get("NOVELLA_FUZZ_EXAMPLES", "60"))
REQUEST_TIMEOUT = 30   # a hang guard, not a performance assertion
FUZZ = settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
                suppress_health_check=list(HealthCheck))


def _routes():
    """{api: [(method, path template)]} from each API's own route table."""
    compute = [(m, t) for module in compute_wsgi.HANDLER_MODULES for m, t, _ in module.ROUTES]
    placement = [(m, t) for t, methods in placement_wsgi.ROUTES for m in methods]
    identity = [("GET", "/"), ("GET", "/v3"), ("POST", "/v3/auth/tokens"),
                ("GET", "/v3/auth/tokens"), ("HEAD", "/v3/auth/tokens"),
                ("DELETE", "/v3/auth/tokens"), ("GET", "/v3/auth/catalog"),
                ("GET", "/v3/projects"), ("GET", "/v3/projects/{project_id}")]
    return {"compute": compute, "placement": placement, "identity": identity,
            "image": [(m, t) for m, t, _ in image_app.ROUTES],
            "network": [(m, t) for m, t, _ in network_app.ROUTES],
            "volume": [(m, t) for m, t, _ in volume_app.ROUTES]}


ROUTES = _routes()

# --- strategies ------------------------------------------------------------------
_text = st.one_of(st.text(max_size=40), st.sampled_from(
    ["", " ", "\udcff", "a\x00b", "x" * 300, "null", "-1", "1e999", "VCPU:1",
     "2147483648", "9" * 25, "CUSTOM_A", "ACTIVE", "true", "none", "auto"]))
_scalar = st.one_of(st.none(), st.booleans(), st.integers(min_value=-2 ** 70, max_value=2 ** 70),
                    st.floats(allow_nan=False, allow_infinity=False), _text)
_json = st.recursive(_scalar, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(_text, inner, max_size=4)), max_leaves=12)
_keys = st.sampled_from(["server", "name", "flavorRef", "imageRef", "min_count", "max_count",
                         "metadata", "resources", "allocations", "inventories", "total",
                         "uuid", "project_id", "user_id", "consumer_generation", "traits",
                         "network", "port", "image", "volume", "size", "auth", "identity",
                         "password", "user", "resize", "os-stop", "reboot", "type",
                         "resource_provider_generation", "aggregates", "keypair", "tags"])
# Bodies shaped like the APIs' own (wrapper key + fields), or anything at all.
_shaped = st.recursive(_scalar, lambda inner: st.dictionaries(_keys, inner, max_size=5),
                       max_leaves=15)


def _raw_bodies():
    return st.sampled_from([
        b"[" * 5000 + b"]" * 5000, b'{"a":' * 300 + b"1" + b"}" * 300, b"null", b"NaN",
        b"1e999999", b'"\\udcff"', b"\xff\xfe", b"{", b"", b"{}", b"[]", b'{"a": 1, "a": 2}',
        b"x" * 200000])


# Good bodies of each API, one of whose values the fuzzer replaces: the
# request then passes the outer checks and reaches the handler's own.
GOOD = {
    "compute": [{"server": {"name": "s", "flavorRef": "1", "imageRef": "IMAGE",
                            "networks": "none", "min_count": 1, "max_count": 1,
                            "metadata": {"k": "v"}}},
                {"server": {"name": "renamed", "description": "d"}},
                {"resize": {"flavorRef": "1"}}, {"reboot": {"type": "SOFT"}},
                {"flavor": {"name": "f", "ram": 512, "vcpus": 1, "disk": 1, "swap": 0}},
                {"keypair": {"name": "k", "type": "ssh"}},
                {"server_group": {"name": "g", "policy": "anti-affinity",
                                  "rules": {"max_server_per_host": 1}}},
                {"aggregate": {"name": "a", "availability_zone": "z"}},
                {"tags": ["a", "b"]}, {"metadata": {"k": "v"}},
                {"volumeAttachment": {"volumeId": "IMAGE"}}],
    "placement": [{"name": "rp", "uuid": "IMAGE"},
                  {"resource_provider_generation": 0,
                   "inventories": {"VCPU": {"total": 8, "max_unit": 8}}},
                  {"allocations": {"PROVIDER": {"resources": {"VCPU": 1}}}, "project_id": "p",
                   "user_id": "u", "consumer_generation": 1, "consumer_type": "INSTANCE"},
                  {"aggregates": ["IMAGE"], "resource_provider_generation": 0},
                  {"traits": ["CUSTOM_A"], "resource_provider_generation": 0},
                  {"name": "CUSTOM_RC"}],
    "identity": [{"auth": {"identity": {"methods": ["password"], "password": {
        "user": {"name": "admin", "password": "secret"}}},
        "scope": {"project": {"name": "admin"}}}}],
    "image": [{"name": "i", "disk_format": "raw", "container_format": "bare",
               "min_ram": 0, "min_disk": 0, "visibility": "private"},
              [{"op": "replace", "path": "/name", "value": "x"}]],
    "network": [{"network": {"name": "n", "mtu": 1500, "shared": False}},
                {"port": {"network_id": "IMAGE", "name": "p", "fixed_ips": []}},
                {"subnet": {"network_id": "IMAGE", "cidr": "10.0.0.0/24", "ip_version": 4}}],
    "volume": [{"volume": {"size": 1, "name": "v"}},
               {"attachment": {"volume_uuid": "IMAGE", "instance_uuid": "IMAGE"}},
               {"os-complete": None}],
}
_hostile = st.one_of(_scalar, st.sampled_from(
    [2 ** 31, 2 ** 63, 2 ** 70, -2 ** 63, 1e308, "9" * 30, [], {}, ["x"], {"x": {}}, None,
     "\udcff", "x" * 70000, "\x00"]))


def _leaves(doc, path=()):
    """Every (path, value) of a JSON document."""
    yield path, doc
    items = doc.items() if isinstance(doc, dict) else \
        enumerate(doc) if isinstance(doc, list) else ()
    for key, value in items:
        yield from _leaves(value, path + (key,))


def _replace(doc, path, value):
    if not path:
        return value
    copy = dict(doc) if isinstance(doc, dict) else list(doc)
    copy[path[0]] = _replace(copy[path[0]], path[1:], value)
    return copy


@st.composite
def _mutated(draw, api, ids):
    doc = json.loads(json.dumps(draw(st.sampled_from(GOOD[api]))).replace(
        "IMAGE", ids["image"]).replace("PROVIDER", ids["provider"]))
    path, _ = draw(st.sampled_from(list(_leaves(doc))))
    return _replace(doc, path, draw(_hostile))


def _bodies(api, ids):
    return st.one_of(st.none(), _json, _shaped, _raw_bodies(), _mutated(api, ids),
                     _mutated(api, ids))
_versions = st.sampled_from([None, "latest", "2.1", "2.96", "2.97", "3.0", "2.", "x", "1.0",
                             "1.39", "1.40", "1.23", "1.22", "0.9", "99999999999999999999.1",
                             "3.0", "3.70", "3.999"])
_query_keys = st.sampled_from(["limit", "marker", "name", "resources", "required", "member_of",
                               "in_tree", "sort_key", "sort_dir", "all_tenants", "status",
                               "fields", "changes-since", "host", "deleted", "group_policy",
                               "resources1", "x"])
_queries = st.lists(st.tuples(_query_keys, _text), max_size=4)


def _segment(apis, name):
    known = {"server_id": apis.server, "uuid": apis.provider, "consumer_uuid": apis.consumer,
             "image_id": apis.image["id"], "project_id": "admin-project"}
    choices = [str(uuid.uuid4()), "not-a-uuid", "%ff", "\u00e9\u00e9", "x" * 300, "0", "-1",
               "CUSTOM_A", "VCPU", "1.5"]
    if name in known:
        choices.append(known[name])
    return st.sampled_from(choices)


def _quote(segment):
    """A path segment as a WSGI PATH_INFO string (latin-1 of its UTF-8)."""
    if segment == "%ff":
        return "\xff"
    return segment.encode("utf-8", "surrogatepass").decode("latin-1")


@st.composite
def requests(draw, apis, api):
    method, template = draw(st.sampled_from(ROUTES[api]))
    if draw(st.integers(0, 9)) == 0:
        method = draw(st.sampled_from(["GET", "PUT", "POST", "DELETE", "PATCH", "HEAD"]))
    path = template
    while "{" in path:
        start = path.index("{")
        end = path.index("}", start)
        path = path[:start] + _quote(draw(_segment(apis, path[start + 1:end]))) + path[end + 1:]
    body = draw(_bodies(api, {"image": apis.image["id"], "provider": apis.provider}))
    if method in ("GET", "HEAD", "DELETE") and draw(st.booleans()):
        body = None
    if body is not None and not isinstance(body, bytes):
        body = json.dumps(body).encode("utf-8", "surrogatepass")
    headers = {}
    version = draw(_versions)
    if version is not None:
        service = {"compute": "compute", "placement": "placement", "volume": "volume"}.get(api)
        if service:
            headers["OpenStack-API-Version"] = f"{service} {version}"
    if body is not None:
        headers["Content-Type"] = draw(st.sampled_from(
            ["application/json", "application/json", "text/plain", "application/octet-stream",
             "application/openstack-images-v2.1-json-patch"]))
    if draw(st.integers(0, 4)) == 0:
        headers["Accept"] = draw(st.sampled_from(["text/html", "*/*", "application/xml"]))
    query = "&".join(f"{k}={_quote(v)}" for k, v in draw(_queries))
    return method, path, body, headers, query


# --- the property ------------------------------------------------------------------
@pytest.fixture(scope="module")
def apis(tmp_path_factory):
    apis = AllAPIs(tmp_path_factory.mktemp("fuzz"))
    yield apis
    apis.cloud.wait()


def _send(apis, api, method, path, body, headers, query):
    result = {}

    def run():
        try:
            result["answer"] = apis.call(api, method, path, body, headers=headers, query=query)
        except BaseException as exc:  # noqa: BLE001 - reported below
            result["error"] = exc

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(REQUEST_TIMEOUT)
    assert not worker.is_alive(), f"no answer to {method} {path!r} within {REQUEST_TIMEOUT}s"
    if "error" in result:
        raise result["error"]
    return result["answer"]


def _check(apis, api, request):
    method, path, body, headers, query = request
    before = apis.state()
    status, _, data = _send(apis, api, method, path, body, headers, query)
    where = (api, method, path[:80], (body or b"")[:80], headers, query[:80], status,
             str(data)[:300])
    assert status < 500, where
    if 400 <= status < 500:
        # Placement renders its errors as the client accepts them (webob's
        # HTML page for text/html), as the reference does.
        html = api == "placement" and headers.get("Accept") in ("text/html", "application/xml")
        if method != "HEAD" and not html:
            assert error_shape_ok(api, status, data, headers), where
        assert apis.state() == before, where


@pytest.mark.parametrize("api", sorted(ROUTES))
def test_fuzz_every_route(apis, api):
    @FUZZ
    @given(request=st.data())
    def fuzz(request):
        _check(apis, api, request.draw(requests(apis, api)))

    fuzz()
