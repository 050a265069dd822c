"""Compute API microversions 2.97 to 2.104 through an all-in-one: the server
views (image properties, scheduler hints), re-pinning a server's zone, the
attach answer, flavors without their deprecated fields, closed query strings."""
import json

import pytest
import sqlalchemy as sa

from novella.context import RequestContext
from novella.db import api_models as am
from tests.functional.moves.conftest import make_cloud  # noqa: F401 - fixture


@pytest.fixture
def cloud(make_cloud):  # noqa: F811
    return make_cloud(hosts=1)


def _spec(cloud, sid):
    with cloud.aio.api_db.session() as s:
        return json.loads(s.scalars(sa.select(am.RequestSpec.spec).where(
            am.RequestSpec.instance_uuid == sid)).one())


def test_max_version_is_2_104(cloud):
    status, body = cloud.api("GET", "/servers", version="2.104")
    assert status == 200
    status, body = cloud.api("GET", "/servers", version="2.105")
    assert status == 406 and "maximum is 2.104" in body["computeFault"]["message"]


def test_image_properties_from_2_98(cloud):
    image = cloud.image("props", hw_disk_bus="scsi", architecture="x86_64",
                        auto_disk_config=True, os_glance_importing_to_stores="x",
                        owner_note="not a standard one")
    sid = cloud.boot(imageRef=image)
    expected = {"hw_disk_bus": "scsi", "architecture": "x86_64", "auto_disk_config": "True"}
    assert cloud.api("GET", f"/servers/{sid}", version="2.98")[1]["server"]["image"][
        "properties"] == expected
    servers = cloud.api("GET", "/servers/detail", version="2.98")[1]["servers"]
    assert servers[0]["image"]["properties"] == expected
    upd = cloud.api("PUT", f"/servers/{sid}", {"server": {"name": "x"}}, version="2.98")[1]
    assert upd["server"]["image"]["properties"] == expected
    assert "properties" not in cloud.api("GET", f"/servers/{sid}", version="2.97")[1][
        "server"]["image"]
    # Rebuilt from another image: the view follows the request spec's image.
    other = cloud.image("props", hw_machine_type="q35")
    status, body = cloud.action(sid, {"rebuild": {"imageRef": other}}, version="2.98")
    assert status == 202, body
    assert body["server"]["image"]["properties"] == {"hw_machine_type": "q35"}
    assert _spec(cloud, sid)["image"]["properties"] == {"hw_machine_type": "q35"}


def test_scheduler_hints_from_2_100(cloud):
    status, body = cloud.api("POST", "/servers", {
        "server": {"name": "h", "flavorRef": "1", "imageRef": cloud.aio.demo_image["id"],
                   "networks": "none"},
        "os:scheduler_hints": {"foo": "bar", "different_cell": ["c1", "c2"]}}, version="2.100")
    assert status == 202, body
    sid = body["server"]["id"]
    cloud.aio.wait_idle()
    hints = {"foo": ["bar"], "different_cell": ["c1", "c2"]}
    assert cloud.api("GET", f"/servers/{sid}", version="2.100")[1]["server"][
        "scheduler_hints"] == hints
    assert cloud.api("GET", "/servers/detail", version="2.100")[1]["servers"][0][
        "scheduler_hints"] == hints
    upd = cloud.api("PUT", f"/servers/{sid}", {"server": {"name": "y"}}, version="2.100")[1]
    assert upd["server"]["scheduler_hints"] == hints
    assert "scheduler_hints" not in cloud.api("GET", f"/servers/{sid}", version="2.99")[1][
        "server"]
    bare = cloud.boot()
    assert cloud.api("GET", f"/servers/{bare}", version="2.100")[1]["server"][
        "scheduler_hints"] == {}


def test_pinned_zone_is_updated_from_2_104(cloud):
    status, body = cloud.api("POST", "/servers", {"server": {
        "name": "p", "flavorRef": "1", "imageRef": cloud.aio.demo_image["id"],
        "networks": "none", "availability_zone": cloud.server(cloud.boot())[
            "OS-EXT-AZ:availability_zone"]}}, version="2.104")
    assert status == 202, body
    sid = body["server"]["id"]
    cloud.aio.wait_idle()
    zone = cloud.server(sid)["OS-EXT-AZ:availability_zone"]
    assert _spec(cloud, sid)["availability_zone"] == zone

    def put(value, version="2.104"):
        return cloud.api("PUT", f"/servers/{sid}",
                         {"server": {"pinned_availability_zone": value}}, version=version)

    # Before 2.104 the field is refused; pinned to another zone: 409; nothing changes.
    assert put(None, version="2.103")[0] == 400
    status, body = put("elsewhere")
    assert status == 409 and "Unpin first" in body["conflictingRequest"]["message"]
    assert _spec(cloud, sid)["availability_zone"] == zone
    status, body = put(None)
    assert status == 200 and body["server"]["pinned_availability_zone"] is None
    assert _spec(cloud, sid)["availability_zone"] is None
    assert put(None)[0] == 200  # unpinning an unpinned server changes nothing
    status, body = put("elsewhere")
    assert status == 409 and f"current availability zone '{zone}'" in \
        body["conflictingRequest"]["message"]
    assert _spec(cloud, sid)["availability_zone"] is None
    assert put("")[0] == 400
    status, body = put(zone)
    assert status == 200 and body["server"]["pinned_availability_zone"] == zone
    assert _spec(cloud, sid)["availability_zone"] == zone
    assert cloud.api("GET", f"/servers/{sid}", version="2.104")[1]["server"][
        "pinned_availability_zone"] == zone


def test_volume_attach_answers_202_from_2_101(cloud):
    sid = cloud.boot()
    ctxt = RequestContext(user_id="admin", project_id="admin", is_admin=True)
    vols = [cloud.aio.volume_api.create(ctxt, 1, name=f"v{i}")["id"] for i in range(2)]
    status, body = cloud.api("POST", f"/servers/{sid}/os-volume_attachments",
                             {"volumeAttachment": {"volumeId": vols[0]}}, version="2.100")
    assert status == 200 and body["volumeAttachment"]["volumeId"] == vols[0]
    status, body = cloud.api("POST", f"/servers/{sid}/os-volume_attachments",
                             {"volumeAttachment": {"volumeId": vols[1]}}, version="2.101")
    assert status == 202 and body is None
    cloud.aio.wait_idle()
    attached = cloud.api("GET", f"/servers/{sid}/os-volume_attachments")[1]
    assert sorted(a["volumeId"] for a in attached["volumeAttachments"]) == sorted(vols)
    assert cloud.aio.volume_api.get(ctxt, vols[1])["status"] == "in-use"


def test_flavors_at_2_102(cloud):
    cloud.flavor("tiny-a", 1, 64, 1)
    cloud.flavor("tiny-b", 1, 64, 1)
    shown = cloud.api("GET", "/flavors/tiny-a", version="2.101")[1]["flavor"]
    assert "rxtx_factor" in shown and "OS-FLV-DISABLED:disabled" in shown
    shown = cloud.api("GET", "/flavors/tiny-a", version="2.102")[1]["flavor"]
    assert "rxtx_factor" not in shown and "OS-FLV-DISABLED:disabled" not in shown
    listed = cloud.api("GET", "/flavors/detail?name=^ftiny-", version="2.102")[1]["flavors"]
    assert [f["id"] for f in listed] == ["tiny-a", "tiny-b"]
    assert all("rxtx_factor" not in f for f in listed)
    # The name filter is refused between 2.75 and 2.101 (an unknown parameter).
    assert cloud.api("GET", "/flavors?name=x", version="2.101")[0] == 400
    assert cloud.api("GET", "/flavors?sort_key=rxtx_factor", version="2.102")[0] == 400
    assert cloud.api("GET", "/flavors?sort_key=rxtx_factor", version="2.101")[0] == 200
    # A create naming rxtx_factor is refused at 2.102, and makes no flavor.
    status, body = cloud.api("POST", "/flavors", {"flavor": {
        "name": "r", "ram": 64, "vcpus": 1, "disk": 1, "rxtx_factor": 2.0}}, version="2.102")
    assert status == 400 and "rxtx_factor" in body["badRequest"]["message"]
    assert cloud.api("GET", "/flavors?name=^r$", version="2.102")[1]["flavors"] == []


def test_query_strings_closed_at_2_102(cloud):
    sid = cloud.boot()
    for path in (f"/servers/{sid}", f"/servers/{sid}/ips", f"/servers/{sid}/metadata",
                 f"/servers/{sid}/tags", "/os-availability-zone", "/os-aggregates",
                 "/os-quota-class-sets/default", "/flavors/1"):
        assert cloud.api("GET", path + "?foo=1", version="2.101")[0] == 200, path
        status, body = cloud.api("GET", path + "?foo=1", version="2.102")
        assert status == 400, path
        assert body["badRequest"]["message"] == \
            "Additional properties are not allowed ('foo' was unexpected)"
        assert cloud.api("GET", path, version="2.102")[0] == 200, path


def test_volumes_boot_is_not_served(cloud):
    # /os-volumes_boot (an alias of /servers until 2.102) is gone at 2.103.
    assert cloud.api("GET", "/os-volumes_boot", version="2.103")[0] == 404
