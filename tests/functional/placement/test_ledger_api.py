"""Functional tests of the placement API over SQLite, PostgreSQL and MariaDB."""
import concurrent.futures
import json
import uuid

import pytest
import webob

from novella.placement import conf as conf_mod, wsgi

LATEST = "placement 1.39"


class Client:
    def __init__(self, url):
        conf = conf_mod.make_conf(overrides={"placement_database": {"connection": url},
                                             "api": {"auth_strategy": "noauth2"}})
        self.app = wsgi.make_app(conf)

    def __call__(self, method, path, body=None, version=LATEST, status=None):
        req = webob.Request.blank(path, method=method, headers={
            "x-auth-token": "admin", "openstack-api-version": version,
            "accept": "application/json"})
        if body is not None:
            req.body = json.dumps(body).encode()
            req.content_type = "application/json"
        resp = req.get_response(self.app)
        if status is not None:
            assert resp.status_int == status, resp.body
        return resp.json if resp.body else None


def _provider(api, name, vcpu=8):
    rp = str(uuid.uuid4())
    api("POST", "/resource_providers", {"name": name, "uuid": rp}, status=200)
    api("PUT", "/resource_providers/%s/inventories" % rp, {
        "resource_provider_generation": 0,
        "inventories": {"VCPU": {"total": vcpu}, "MEMORY_MB": {"total": 4096}}}, status=200)
    return rp


def _alloc(rp, vcpu, gen=None, ctype="INSTANCE"):
    return {"allocations": {rp: {"resources": {"VCPU": vcpu}}}, "project_id": "proj",
            "user_id": "user", "consumer_generation": gen, "consumer_type": ctype}


def smoke(api):
    src, dst = _provider(api, "src"), _provider(api, "dst")
    inst, mig = str(uuid.uuid4()), str(uuid.uuid4())
    api("PUT", "/allocations/%s" % inst, _alloc(src, 2), status=204)
    got = api("GET", "/allocations/%s" % inst)
    assert got["allocations"][src]["resources"] == {"VCPU": 2}
    assert got["consumer_generation"] == 1 and got["consumer_type"] == "INSTANCE"
    # A stale consumer generation changes nothing.
    api("PUT", "/allocations/%s" % inst, _alloc(dst, 1, gen=5), status=409)
    # Migration swap: the migration takes the source, the instance the destination.
    api("POST", "/allocations", {mig: _alloc(src, 2, ctype="MIGRATION"),
                                 inst: _alloc(dst, 2, gen=1)}, status=204)
    assert api("GET", "/allocations/%s" % mig)["allocations"][src]["resources"]["VCPU"] == 2
    assert api("GET", "/resource_providers/%s/usages" % dst)["usages"]["VCPU"] == 2
    # Over capacity is refused atomically: neither consumer changes.
    api("POST", "/allocations", {mig: _alloc(src, 1, gen=1),
                                 inst: _alloc(dst, 99, gen=2)}, status=409)
    assert api("GET", "/resource_providers/%s/usages" % src)["usages"]["VCPU"] == 2
    usages = api("GET", "/usages?project_id=proj")["usages"]
    assert usages["INSTANCE"]["VCPU"] == 2 and usages["MIGRATION"]["VCPU"] == 2
    api("DELETE", "/allocations/%s" % mig, status=204)
    assert api("GET", "/resource_providers/%s/usages" % src)["usages"]["VCPU"] == 0
    cands = api("GET", "/allocation_candidates?resources=VCPU:7")
    assert list(cands["provider_summaries"]) == [src]
    gen = api("GET", "/resource_providers/%s" % src)["generation"]
    api("PUT", "/resource_providers/%s/inventories" % src, {
        "resource_provider_generation": gen - 1, "inventories": {}}, status=409)


def test_smoke_sqlite(tmp_path):
    smoke(Client("sqlite:///%s" % (tmp_path / "p.db")))


@pytest.mark.postgresql
def test_smoke_postgresql(postgresql_url):
    smoke(Client(postgresql_url))


@pytest.mark.mysql
def test_smoke_mysql(mysql_url):
    smoke(Client(mysql_url))


def race(url, apis=8, room=5):
    """Many writers against room for ``room`` consumers: exactly ``room`` win."""
    clients = [Client(url) for _ in range(apis)]  # separate read models
    rp = _provider(clients[0], "race", vcpu=room)

    def claim(i):
        api = clients[i % apis]
        resp = webob.Request.blank("/allocations/%s" % uuid.uuid4(), method="PUT", headers={
            "x-auth-token": "admin", "openstack-api-version": LATEST})
        resp.body = json.dumps(_alloc(rp, 1)).encode()
        resp.content_type = "application/json"
        return resp.get_response(api.app).status_int

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        codes = list(pool.map(claim, range(4 * room)))
    assert codes.count(204) == room
    usage = clients[0]("GET", "/resource_providers/%s/usages" % rp)
    assert usage["usages"]["VCPU"] == room
    assert len(clients[1]("GET", "/resource_providers/%s/allocations" % rp)["allocations"]) == room


def test_race_sqlite(tmp_path):
    race("sqlite:///%s" % (tmp_path / "race.db"))


@pytest.mark.postgresql
def test_race_postgresql(postgresql_url):
    race(postgresql_url)


@pytest.mark.mysql
def test_race_mysql(mysql_url):
    race(mysql_url)


def test_allocation_mappings_are_checked_on_put_and_post(tmp_path):
    """Bodies with 1.34 ``mappings`` go through the same checks as the schema's."""
    api = Client("sqlite:///%s" % (tmp_path / "p.db"))
    rp = _provider(api, "host")
    inst, other = str(uuid.uuid4()), str(uuid.uuid4())
    good = dict(_alloc(rp, 2), mappings={"": [rp], "_NET": [rp]})
    api("PUT", "/allocations/%s" % inst, good, status=204)
    api("POST", "/allocations", {other: dict(_alloc(rp, 1), mappings={"": [rp]})}, status=204)
    # (As in the reference, the pattern of suffixes does not match "", so only
    # named groups' lists are checked.)
    for bad in ({}, {"_NET": []}, {"_NET": ["not-a-uuid"]}, {"_NET": rp}, [rp]):
        body = dict(_alloc(rp, 1, gen=1), mappings=bad)
        err = api("PUT", "/allocations/%s" % inst, body, status=400)
        assert "JSON does not validate" in err["errors"][0]["detail"]
        api("POST", "/allocations", {inst: body}, status=400)
    # Before 1.34 there are no mappings to send.
    api("PUT", "/allocations/%s" % inst, dict(good, consumer_generation=1),
        version="placement 1.33", status=400)
    assert api("GET", "/allocations/%s" % inst)["allocations"][rp]["resources"] == {"VCPU": 2}
    assert api("GET", "/resource_providers/%s/usages" % rp)["usages"]["VCPU"] == 3
