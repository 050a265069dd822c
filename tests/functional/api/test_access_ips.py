"""Access addresses are kept as the reference keeps them: IPv6 compressed."""
import sqlalchemy as sa

from novella.db import cell_models as cm

LONG = "0000:0000:0000:0000:0000:babe:220.12.22.2"
SHORT = "::babe:dc0c:1602"


def test_create_keeps_the_compressed_form(cloud):
    cloud.flavor()
    resp = cloud.user.post("/servers", {"server": {
        "name": "a", "flavorRef": "1", "imageRef": "155d900f-4e14-4e4c-a73d-069cbf4541e6",
        "accessIPv4": "192.168.1.10", "accessIPv6": LONG}})
    assert resp.status_int == 202, resp.body
    shown = cloud.user.get("/servers/" + resp.json["server"]["id"]).json["server"]
    assert (shown["accessIPv4"], shown["accessIPv6"]) == ("192.168.1.10", SHORT)


def test_update_keeps_the_compressed_form(cloud):
    cloud.compute_host("cell1", "h1")
    uuid = cloud.instance("cell1", host="h1")
    resp = cloud.user.put("/servers/" + uuid, {"server": {"accessIPv6": "2001:DB8:0:0:0:0:0:1"}})
    assert resp.status_int == 200, resp.body
    with cloud.db("cell1").session() as s:
        stored = s.scalars(sa.select(cm.Instance.access_ip_v6)
                           .where(cm.Instance.uuid == uuid)).one()
    assert stored == "2001:db8::1"
    assert cloud.user.get("/servers/" + uuid).json["server"]["accessIPv6"] == "2001:db8::1"
