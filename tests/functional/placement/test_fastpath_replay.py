"""Two processes' read models over one database: the candidates index of
one follows the writes of the other (replayed changes)."""
import json
import uuid

import webob

from novella.placement import conf, fastpath, wsgi


def _app(url):
    return wsgi.make_app(conf.make_conf(overrides={
        "placement_database": {"connection": url}, "api": {"auth_strategy": "noauth2"}}))


def _call(app, method, path, body=None, status=None):
    r = webob.Request.blank(path, method=method)
    r.headers.update({"x-auth-token": "admin", "Accept": "application/json",
                      "OpenStack-API-Version": "placement 1.39"})
    if body is not None:
        r.body, r.content_type = json.dumps(body).encode(), "application/json"
    resp = r.get_response(app)
    if status is not None:
        assert resp.status_int == status, resp.body
    return json.loads(resp.body) if resp.body else None


def _provider(app, name, vcpus):
    rp = str(uuid.uuid4())
    _call(app, "POST", "/resource_providers", {"uuid": rp, "name": name}, 200)
    _call(app, "PUT", "/resource_providers/%s/inventories" % rp, {
        "resource_provider_generation": 0,
        "inventories": {"VCPU": {"total": vcpus}}}, 200)
    return rp


def _candidates(app, monkeypatch, query):
    fast = _call(app, "GET", "/allocation_candidates?" + query, status=200)
    with monkeypatch.context() as m:
        m.setattr(fastpath, "applies", lambda *a: False)
        general = _call(app, "GET", "/allocation_candidates?" + query, status=200)
    assert fast == general
    return fast


def test_index_follows_another_process_writes(tmp_path, monkeypatch):
    url = "sqlite:///%s" % (tmp_path / "p.db")
    writer, reader = _app(url), _app(url)
    a, b = _provider(writer, "a", 4), _provider(writer, "b", 2)
    got = _candidates(reader, monkeypatch, "resources=VCPU:2")
    assert set(got["provider_summaries"]) == {a, b}

    consumer = str(uuid.uuid4())
    _call(writer, "PUT", "/allocations/" + consumer, {
        "allocations": {b: {"resources": {"VCPU": 1}}}, "project_id": "p", "user_id": "u",
        "consumer_generation": None, "consumer_type": "INSTANCE"}, 204)
    got = _candidates(reader, monkeypatch, "resources=VCPU:2")
    assert set(got["provider_summaries"]) == {a}

    _call(writer, "DELETE", "/allocations/" + consumer, status=204)
    got = _candidates(reader, monkeypatch, "resources=VCPU:1")
    assert got["provider_summaries"][b]["resources"]["VCPU"]["used"] == 0

    _call(writer, "PUT", "/traits/CUSTOM_X", status=201)
    gen = _call(writer, "GET", "/resource_providers/" + a)["generation"]
    _call(writer, "PUT", "/resource_providers/%s/traits" % a, {
        "resource_provider_generation": gen, "traits": ["CUSTOM_X"]}, 200)
    got = _candidates(reader, monkeypatch, "resources=VCPU:1&required=CUSTOM_X")
    assert set(got["provider_summaries"]) == {a}

    _call(writer, "DELETE", "/resource_providers/" + a, status=204)
    got = _candidates(reader, monkeypatch, "resources=VCPU:1")
    assert set(got["provider_summaries"]) == {b}
