"""Versions documents and microversion negotiation."""


def test_root_lists_versions_without_a_token(cloud):
    import webob
    resp = webob.Request.blank("/").get_response(cloud.app)
    assert resp.status_int == 200
    versions = {v["id"]: v for v in resp.json["versions"]}
    assert versions["v2.1"]["version"] == "2.104"
    assert versions["v2.1"]["min_version"] == "2.1"
    resp = webob.Request.blank("/v2.1").get_response(cloud.app)
    assert resp.status_int == 200 and resp.json["version"]["id"] == "v2.1"


def test_missing_token_is_401(cloud):
    import webob
    resp = webob.Request.blank("/v2.1/servers").get_response(cloud.app)
    assert resp.status_int == 401


def test_default_version_headers_and_vary(cloud):
    resp = cloud.user.get("/servers")
    assert resp.status_int == 200
    assert resp.headers["OpenStack-API-Version"] == "compute 2.1"
    assert resp.headers["X-OpenStack-Nova-API-Version"] == "2.1"
    assert "OpenStack-API-Version" in resp.headers["Vary"]


def test_latest_and_legacy_header(cloud):
    resp = cloud.user.get("/servers", version="latest")
    assert resp.headers["OpenStack-API-Version"] == "compute 2.104"
    resp = cloud.user.get("/servers", headers={"X-OpenStack-Nova-API-Version": "2.53"})
    assert resp.headers["X-OpenStack-Nova-API-Version"] == "2.53"


def test_out_of_range_is_406_and_malformed_is_400(cloud):
    resp = cloud.user.get("/servers", version="2.105")
    assert resp.status_int == 406
    assert "maximum is 2.104" in resp.json["computeFault"]["message"]
    resp = cloud.user.get("/servers", version="3.0")
    assert resp.status_int == 406
    resp = cloud.user.get("/servers", version="2.x")
    assert resp.status_int == 400
    assert resp.json["badRequest"]["code"] == 400


def test_unknown_path_is_item_not_found(cloud):
    resp = cloud.user.get("/nothing-here")
    assert resp.status_int == 404
    assert resp.json["itemNotFound"]["code"] == 404


def test_a_method_the_path_lacks_is_not_found(cloud):
    """As in the reference, whose router matches method and path together."""
    for method, path in (("PATCH", "/servers"), ("DELETE", "/os-security-groups")):
        resp = cloud.user.request(method, path)
        assert resp.status_int == 404
        assert resp.json["itemNotFound"]["message"] == "The resource could not be found."


def test_project_id_in_url_is_accepted_and_checked(cloud):
    assert cloud.user.get("/project-a/servers").status_int == 200
    resp = cloud.user.get("/project-b/servers")
    assert resp.status_int == 400


def test_keystone_strategy_rejects_a_request_without_token(cloud):
    import webob
    cloud.conf.set_override("auth_strategy", "keystone", group="api")
    cloud.build_app()  # registers [keystone_authtoken]
    cloud.conf.set_override("www_authenticate_uri", "http://identity.invalid/v3",
                            group="keystone_authtoken")
    cloud.build_app()
    resp = webob.Request.blank("/v2.1/servers").get_response(cloud.app)
    assert resp.status_int == 401
    assert "identity.invalid" in resp.headers["WWW-Authenticate"]
    assert webob.Request.blank("/").get_response(cloud.app).status_int == 200


def test_a_version_by_its_id(cloud):
    import webob
    root = webob.Request.blank("/v2.1").get_response(cloud.app).json
    v20 = webob.Request.blank("/v2").get_response(cloud.app).json
    resp = cloud.user.get("/versions/v2.1")
    assert resp.status_int == 200 and resp.json == root
    assert resp.json["version"]["links"][0] == {"rel": "self", "href": "http://localhost/v2.1/"}
    assert cloud.user.get("/versions/v2.0").json == v20
    resp = cloud.user.get("/versions/v3")
    assert resp.status_int == 404 and resp.json["itemNotFound"]["code"] == 404
    assert cloud.user.get("/project-a/versions/v2.1").json == root
