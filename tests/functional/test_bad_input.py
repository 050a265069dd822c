"""Hostile input to every API: each case answers the reference's 4xx, in the
API's error shape, and changes nothing (see docs/limits.md)."""
import json

import webob

import pytest

from tests.functional.all_apis import AllAPIs, error_shape_ok

DEEP_LIST = b"[" * 100000 + b"]" * 100000     # beyond the size limit too: 413
DEEP_LIST_50K = b"[" * 50000 + b"]" * 50000   # within it: 400
DEEP_DICT = b'{"a":' * 5000 + b"1" + b"}" * 5000
NOT_OBJECTS = [b"null", b"[]", b'"s"', b"NaN", b"1e999999", b"Infinity", b"-Infinity"]


@pytest.fixture
def apis(tmp_path):
    apis = AllAPIs(tmp_path)
    yield apis
    apis.cloud.wait()


def _refused(apis, api, method, path, body=None, status=400, headers=None, query=""):
    before = apis.state()
    got, _, data = apis.call(api, method, path, body, headers=headers, query=query)
    assert got in (status if isinstance(status, tuple) else (status,)), \
        (api, method, path, got, data)
    assert error_shape_ok(api, got, data), data
    assert apis.state() == before
    return data


def _body_routes(apis):
    server = apis.cloud_server = apis.server
    return [("compute", "POST", "/servers"),
            ("compute", "POST", f"/servers/{server}/action"),
            ("compute", "PUT", f"/servers/{server}"),
            ("placement", "POST", "/resource_providers"),
            ("placement", "PUT", f"/allocations/{apis.consumer}"),
            ("placement", "POST", "/allocations"),
            ("image", "POST", "/v2/images"),
            ("network", "POST", "/v2.0/ports"),
            ("volume", "POST", "/v3/admin-project/volumes"),
            ("identity", "POST", "/v3/auth/tokens")]


@pytest.mark.parametrize("body,status", [(DEEP_LIST, 413), (DEEP_LIST_50K, 400), (DEEP_DICT, 400)],
                         ids=["list-100k", "list-50k", "dict-5k"])
def test_deep_nesting_is_refused(apis, body, status):
    for api, method, path in _body_routes(apis):
        data = _refused(apis, api, method, path, body, status=status)
        assert len(json.dumps(data)) < 1000


def test_placement_bodies_that_are_not_objects_are_400(apis):
    for body in NOT_OBJECTS:
        for path in ("/resource_providers", f"/allocations/{apis.consumer}"):
            method = "POST" if path == "/resource_providers" else "PUT"
            _refused(apis, "placement", method, path, body)


def test_compute_bodies_that_are_not_objects_are_400(apis):
    for body in NOT_OBJECTS:
        _refused(apis, "compute", "POST", "/servers", body)
        _refused(apis, "compute", "POST", f"/servers/{apis.server}/action", body)


@pytest.mark.parametrize("raw", [b'"\\udcff"', b'"a\\ud800b"', b'"\xed\xb3\xbf"', b'"\xff"'])
def test_lone_surrogates_and_bad_utf8_are_400(apis, raw):
    _refused(apis, "compute", "PUT", f"/servers/{apis.server}",
             b'{"server": {"name": ' + raw + b"}}")
    _refused(apis, "placement", "POST", "/resource_providers", b'{"name": ' + raw + b"}")
    _refused(apis, "network", "POST", "/v2.0/networks", b'{"network": {"name": ' + raw + b"}}")


def test_bad_utf8_in_path_and_query(apis):
    _refused(apis, "compute", "GET", "/servers/\xff")
    _refused(apis, "compute", "GET", "/servers", query="name=%ff")
    _refused(apis, "network", "GET", "/v2.0/ports", query="name=%ed%b3%bf")
    _refused(apis, "placement", "GET", "/resource_providers", query="name=%ff")


def test_huge_resource_amount_in_candidates_query_is_400(apis):
    for amount in ("99999999999999999999", "2147483648", "-1", "1.5"):
        _refused(apis, "placement", "GET", "/allocation_candidates",
                 query=f"resources=VCPU:{amount}")


@pytest.mark.parametrize("count", [2 ** 31, 2 ** 63, "9" * 30, ""])
def test_min_max_count_out_of_range_is_400(apis, count):
    for key in ("min_count", "max_count"):
        body = {"server": {"name": "x", "flavorRef": "1", "imageRef": apis.image["id"],
                           "networks": "none", key: count}}
        data = _refused(apis, "compute", "POST", "/servers", body, headers={
            "OpenStack-API-Version": "compute 2.37"})
        assert len(data["badRequest"]["message"]) < 300


def test_max_count_above_the_per_request_bound_creates_at_most_the_bound(apis):
    from novella.api.compute.handlers import servers
    body = {"server": {"name": "x", "flavorRef": "1", "imageRef": apis.image["id"],
                       "networks": "none", "min_count": servers.MAX_SERVERS_PER_REQUEST + 1,
                       "max_count": servers.MAX_SERVERS_PER_REQUEST + 1}}
    data = _refused(apis, "compute", "POST", "/servers", body, status=403,
                    headers={"OpenStack-API-Version": "compute 2.37"})
    assert "forbidden" in data


def test_body_over_the_size_limit_is_413(apis):
    big = json.dumps({"server": {"name": "n" * (10 * 1024 * 1024), "flavorRef": "1"}}).encode()
    for api, method, path in _body_routes(apis):
        data = _refused(apis, api, method, path, big, status=413)
        assert len(json.dumps(data)) < 1000


def test_long_name_quoted_only_in_part(apis):
    name = "n" * 100000
    data = _refused(apis, "compute", "POST", "/servers",
                    {"server": {"name": name, "flavorRef": "1"}})
    assert len(data["badRequest"]["message"]) < 500
    data = _refused(apis, "placement", "POST", "/resource_providers", {"name": name})
    assert len(data["errors"][0]["detail"]) < 1000


@pytest.mark.parametrize("version", ["placement 1.99", "placement 2.0", "placement x",
                                     "placement 1.", "placement latest1"])
def test_placement_bad_microversion_has_a_code(apis, version):
    status, _, data = apis.call("placement", "GET", "/resource_providers",
                                headers={"OpenStack-API-Version": version})
    assert status in (400, 406)
    assert error_shape_ok("placement", status, data), data


@pytest.mark.parametrize("version", ["compute 2.999", "compute 3.0", "compute x", "compute 2."])
def test_compute_bad_microversion(apis, version):
    _refused(apis, "compute", "GET", "/servers", headers={"OpenStack-API-Version": version},
             status=406 if version[8:9].isdigit() and version.endswith(tuple("0123456789"))
             else 400)


def test_very_long_trait_name_is_a_json_400_or_404(apis):
    status, _, data = apis.call("placement", "PUT", "/traits/CUSTOM_" + "A" * 20000)
    assert status == 400
    assert error_shape_ok("placement", status, data)


def test_bad_uuids_in_paths(apis):
    _refused(apis, "compute", "GET", "/servers/not-a-uuid", status=404)
    _refused(apis, "placement", "PUT", "/allocations/not-a-uuid",
             {"allocations": {}, "project_id": "p", "user_id": "u", "consumer_generation": None})
    _refused(apis, "placement", "GET", "/resource_providers/not-a-uuid", status=404)


BIG = 2 ** 70


@pytest.mark.parametrize("api,method,path,body", [
    ("compute", "POST", "/flavors", {"flavor": {"name": "f", "ram": "9" * 20, "vcpus": 1,
                                                "disk": 1}}),
    ("compute", "POST", "/flavors", {"flavor": {"name": "f", "ram": 1, "vcpus": 1, "disk": 1,
                                                "swap": BIG}}),
    ("compute", "POST", "/os-server-groups", {"server_group": {
        "name": "g", "policy": "anti-affinity", "rules": {"max_server_per_host": "9" * 20}}}),
    ("volume", "POST", "/v3/admin-project/volumes", {"volume": {"size": BIG}}),
    ("volume", "POST", "/v3/admin-project/volumes", {"volume": {"size": "1" * 30}}),
    ("network", "POST", "/v2.0/networks", {"network": {"name": "n", "mtu": BIG}}),
    ("network", "POST", "/v2.0/networks", {"network": {"name": ["x"]}}),
    ("network", "POST", "/v2.0/ports", {"port": {"network_id": BIG}}),
    ("image", "POST", "/v2/images", {"name": "i", "min_ram": BIG}),
    ("image", "POST", "/v2/images", {"name": ["x"], "id": BIG}),
])
def test_values_beyond_their_columns_are_400(apis, api, method, path, body):
    headers = {"OpenStack-API-Version": "compute 2.64"} if api == "compute" else None
    _refused(apis, api, method, path, body, headers=headers)


@pytest.mark.parametrize("path,query", [("/flavors", "minRam=" + "9" * 25),
                                        ("/flavors/detail", "minDisk=" + "9" * 25),
                                        ("/os-server-groups", "offset=" + "9" * 25)])
def test_compute_query_integers_beyond_columns_are_400(apis, path, query):
    _refused(apis, "compute", "GET", path, query=query)


def _sized(size, padding_field="name"):
    """A JSON object of exactly ``size`` bytes."""
    empty = len(json.dumps({padding_field: ""}))
    return json.dumps({padding_field: "x" * (size - empty)}).encode()


def test_configured_body_limit_is_honoured_by_every_api(tmp_path):
    # [oslo_middleware] max_request_body_size read from each API's configuration:
    # one byte over is 413 in the API's error shape and writes nothing; at
    # the limit the body is read (and judged on its content).
    apis = AllAPIs(tmp_path, max_request_body_size=2048)
    try:
        for api, method, path in _body_routes(apis):
            data = _refused(apis, api, method, path, _sized(2049), status=413)
            text = json.dumps(data)
            assert "2048" in text and len(text) < 1000, (api, data)
            got, _, data = apis.call(api, method, path, _sized(2048))
            assert got != 413, (api, path, data)
        data = _refused(apis, "compute", "POST", "/servers", _sized(4096), status=413)
        assert data == {"overLimit": {
            "code": 413,
            "message": "Request is too large. Larger than max_request_body_size (2048)."}}
        data = _refused(apis, "placement", "POST", "/resource_providers", _sized(4096),
                        status=413)
        (error,) = data["errors"]
        assert error["status"] == 413 and error["title"] == "Request Entity Too Large"
        assert "max_request_body_size (2048)" in error["detail"]
    finally:
        apis.cloud.wait()


def test_the_default_limit_is_the_references(apis):
    over = _sized(114689)
    for api, method, path in (("compute", "POST", "/servers"),
                              ("placement", "POST", "/resource_providers")):
        _refused(apis, api, method, path, over, status=413)
        got, _, _ = apis.call(api, method, path, _sized(114688))
        assert got != 413


def test_all_in_one_gives_every_api_its_limit(tmp_path, monkeypatch):
    """The all-in-one's APIs (identity included) read ``[oslo_middleware]
    max_request_body_size`` from its configuration."""
    from novella import service
    from novella.allinone import AllInOne
    from novella.conf import CONF

    class NoListener:
        def __init__(self, app, host="127.0.0.1", port=0, name="http"):
            self.app, self.name, self.url = app, name, f"http://{host}:{port}"

        def start(self):
            return self

        def stop(self):
            pass
    monkeypatch.setattr(service, "HTTPServer", NoListener)
    aio = AllInOne(str(tmp_path / "aio"), cells=1, hosts_per_cell=1, http=True,
                   port_base=47000, log=None,
                   config_overrides={"oslo_middleware": {"max_request_body_size": 2048}})
    try:
        aio.start()
        # (the console proxies relay websockets: no API body to limit)
        apps = {srv.name: srv.app for srv in aio.servers if isinstance(srv, NoListener)}
        assert set(apps) == {"identity", "compute", "placement", "image", "network", "volume",
                             "optimize"}
        for name, path in (("identity", "/v3/auth/tokens"), ("compute", "/v2.1/servers"),
                           ("placement", "/resource_providers"), ("image", "/v2/images"),
                           ("network", "/v2.0/ports"), ("volume", "/v3/p/volumes"),
                           ("optimize", "/v1/audits")):
            req = webob.Request.blank(path, method="POST", body=_sized(2049))
            req.content_type = "application/json"
            resp = req.get_response(apps[name])
            assert resp.status_int == 413, (name, resp.status, resp.body[:300])
            assert b"2048" in resp.body, (name, resp.body[:300])
        assert aio.identity_app.max_body == 2048
    finally:
        aio.stop()
        CONF.clear_override("max_request_body_size", group="oslo_middleware")
        # The service user's auth plugin options its [keystone_authtoken] registered
        # (auth_url required) go, as from a process that never read that file.
        from keystoneauth1 import loading
        CONF.reset()
        CONF.unregister_opts(loading.get_auth_plugin_conf_options("password"),
                             group="keystone_authtoken")
