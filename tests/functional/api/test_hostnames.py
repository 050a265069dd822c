"""Server hostnames: made from the name as the reference sanitises it, or requested
(one DNS label from 2.90, a fully qualified name from 2.94)."""
import json

import pytest
import sqlalchemy as sa

from novella.db import api_models as am
from tests.functional.api.conftest import IMAGE


def _create(cloud, version="2.1", **server):
    body = {"name": "web", "flavorRef": "1", "imageRef": IMAGE, "networks": "none"}
    body.update(server)
    if version == "2.1":
        body.pop("networks")
    return cloud.user.post("/servers", {"server": body}, version=version)


def _stored(cloud):
    """{display name: hostname} of the build requests."""
    with cloud.api_db.session() as s:
        return {i["display_name"]: i["hostname"] for i in
                (json.loads(b.instance) for b in s.scalars(sa.select(am.BuildRequest)))}


@pytest.mark.parametrize("name, hostname", [
    ("guest-instance-1.domain.com", "guest-instance-1-domain-com"),
    ("My Server_1", "my-server-1"),
    ("-a..b-", "a--b"),
    ("x" * 70 + ".y", "x" * 63),
])
def test_the_name_is_sanitised_into_the_hostname(cloud, name, hostname):
    cloud.flavor()
    resp = _create(cloud, name=name)
    assert resp.status_int == 202, resp.body
    assert _stored(cloud) == {name: hostname}


def test_a_name_with_nothing_left_gives_server_and_its_uuid(cloud):
    cloud.flavor()
    resp = _create(cloud, name="---")
    assert resp.status_int == 202, resp.body
    assert _stored(cloud) == {"---": "Server-" + resp.json["server"]["id"]}


def test_several_servers_number_their_hostnames(cloud):
    cloud.flavor()
    assert _create(cloud, name="a.b", min_count=2).status_int == 202
    assert _stored(cloud) == {"a.b-1": "a-b-1", "a.b-2": "a-b-2"}


def test_requested_hostname_is_a_label_at_2_90_and_an_fqdn_at_2_94(cloud):
    cloud.flavor()
    fqdn = "guest-1.example.com"
    for version in ("2.90", "2.93"):
        resp = _create(cloud, version=version, hostname=fqdn)
        assert resp.status_int == 400, resp.body
    assert _create(cloud, version="2.90", hostname="a").status_int == 400  # two at least
    assert _stored(cloud) == {}
    resp = _create(cloud, version="2.94", hostname=fqdn)
    assert resp.status_int == 202, resp.body
    assert _create(cloud, version="2.90", name="other", hostname="guest-2").status_int == 202
    assert _stored(cloud) == {"web": fqdn, "other": "guest-2"}
    shown = cloud.user.get("/servers/" + resp.json["server"]["id"], version="2.94").json
    assert shown["server"]["OS-EXT-SRV-ATTR:hostname"] == fqdn


def test_one_hostname_for_several_servers_is_refused(cloud):
    cloud.flavor()
    resp = _create(cloud, version="2.94", hostname="guest", min_count=1, max_count=2)
    assert resp.status_int == 400
    assert "single hostname to multiple instances" in resp.json["badRequest"]["message"]
    assert _stored(cloud) == {}


def test_update_takes_an_fqdn_from_2_94_only(cloud):
    cloud.flavor()
    cloud.compute_host("cell1", "h1")
    uuid = cloud.instance("cell1", host="h1")
    resp = cloud.user.put("/servers/" + uuid, {"server": {"hostname": "a.example.com"}},
                          version="2.90")
    assert resp.status_int == 400
    resp = cloud.user.put("/servers/" + uuid, {"server": {"hostname": "a.example.com"}},
                          version="2.94")
    assert resp.status_int == 200, resp.body
    shown = cloud.user.get("/servers/" + uuid, version="2.94").json["server"]
    assert shown["OS-EXT-SRV-ATTR:hostname"] == "a.example.com"
