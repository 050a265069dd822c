"""OS-DCF:diskConfig through an all-in-one: asked for (or taken from the image) at
create, rebuild, resize and update, kept in the server's row and shown; an image
that disables it refuses AUTO and nothing changes."""
import pytest
import sqlalchemy as sa

from novella.db import cell_models as cm, cells
from tests.functional.moves.conftest import make_cloud  # noqa: F401 - fixture


@pytest.fixture
def cloud(make_cloud):  # noqa: F811
    return make_cloud(hosts=2)


def _stored(cloud, sid):
    """The server's auto_disk_config column in its cell."""
    cell = cells.instance_cell(cloud.aio.api_db, sid)
    with cells.cell_database(cell).session() as s:
        return s.scalar(sa.select(cm.Instance.auto_disk_config).where(cm.Instance.uuid == sid))


def _shown(cloud, sid):
    return cloud.server(sid)["OS-DCF:diskConfig"]


def _boot(cloud, image=None, **server):
    status, body = cloud.api("POST", "/servers", {"server": {
        "name": "d", "flavorRef": "1", "imageRef": image or cloud.aio.demo_image["id"],
        "networks": "none", **server}})
    if status != 202:
        return status, body
    cloud.aio.wait_idle()
    return status, body["server"]


def test_create_keeps_what_is_asked_for_or_the_images(cloud):
    status, server = _boot(cloud, **{"OS-DCF:diskConfig": "AUTO"})
    assert status == 202 and server["OS-DCF:diskConfig"] == "AUTO"
    assert _stored(cloud, server["id"]) is True and _shown(cloud, server["id"]) == "AUTO"
    status, server = _boot(cloud)
    assert server["OS-DCF:diskConfig"] == "MANUAL" and _stored(cloud, server["id"]) is False
    auto = cloud.image(auto_disk_config="True")
    status, server = _boot(cloud, auto)
    assert server["OS-DCF:diskConfig"] == "AUTO" and _stored(cloud, server["id"]) is True
    status, server = _boot(cloud, auto, **{"OS-DCF:diskConfig": "MANUAL"})
    assert _shown(cloud, server["id"]) == "MANUAL"


def test_an_image_that_disables_it_refuses_auto(cloud):
    disabled = cloud.image(auto_disk_config="Disabled")
    sid = cloud.boot()
    listed = len(cloud.api("GET", "/servers")[1]["servers"])
    status, body = _boot(cloud, disabled, **{"OS-DCF:diskConfig": "AUTO"})
    assert status == 400
    assert body["badRequest"]["message"] == \
        f"Requested image {disabled} has automatic disk resize disabled."
    assert len(cloud.api("GET", "/servers")[1]["servers"]) == listed  # nothing created
    status, server = _boot(cloud, disabled)
    assert status == 202 and server["OS-DCF:diskConfig"] == "MANUAL"
    # Rebuilding from it with AUTO: refused, the server unchanged.
    status, body = cloud.action(sid, {"rebuild": {"imageRef": disabled,
                                                  "OS-DCF:diskConfig": "AUTO"}})
    assert status == 400 and "automatic disk resize disabled" in body["badRequest"]["message"]
    assert cloud.server(sid)["image"]["id"] == cloud.aio.demo_image["id"]
    assert cloud.server(sid)["status"] == "ACTIVE"
    # Bad values: the schema's 400.
    for bad in ("auto", "", None, 1):
        status, body = cloud.api("PUT", f"/servers/{sid}",
                                 {"server": {"OS-DCF:diskConfig": bad}})
        assert status == 400, bad
    assert _stored(cloud, sid) is False


def test_rebuild_resize_and_update_change_it(cloud):
    sid = cloud.boot()
    status, body = cloud.action(sid, {"rebuild": {"imageRef": cloud.aio.demo_image["id"],
                                                  "OS-DCF:diskConfig": "AUTO"}})
    assert status == 202 and body["server"]["OS-DCF:diskConfig"] == "AUTO"
    cloud.aio.wait_idle()
    assert _stored(cloud, sid) is True and _shown(cloud, sid) == "AUTO"
    # A rebuild that does not say takes the image's property (none: MANUAL).
    status, body = cloud.action(sid, {"rebuild": {"imageRef": cloud.aio.demo_image["id"]}})
    cloud.aio.wait_idle()
    assert _stored(cloud, sid) is False

    cloud.flavor("big", 1, 1024, 2)
    status, body = cloud.action(sid, {"resize": {"flavorRef": "big",
                                                 "OS-DCF:diskConfig": "AUTO"}})
    assert status == 202, body
    cloud.aio.wait_idle()
    assert cloud.server(sid)["status"] == "VERIFY_RESIZE"
    assert _stored(cloud, sid) is True and _shown(cloud, sid) == "AUTO"
    assert cloud.action(sid, {"confirmResize": None})[0] == 204
    cloud.aio.wait_idle()
    assert _shown(cloud, sid) == "AUTO"

    status, body = cloud.api("PUT", f"/servers/{sid}", {"server": {"OS-DCF:diskConfig": "MANUAL"}})
    assert status == 200 and body["server"]["OS-DCF:diskConfig"] == "MANUAL"
    assert _stored(cloud, sid) is False
    status, body = cloud.api("PUT", f"/servers/{sid}", {"server": {"OS-DCF:diskConfig": "AUTO"}})
    assert _stored(cloud, sid) is True
    # A resize that does not say makes it MANUAL, as the reference's does.
    cloud.flavor("bigger", 1, 2048, 3)
    assert cloud.action(sid, {"resize": {"flavorRef": "bigger"}})[0] == 202
    cloud.aio.wait_idle()
    assert _stored(cloud, sid) is False


def test_resize_refuses_auto_when_the_image_disables_it(cloud):
    disabled = cloud.image(auto_disk_config="disabled")
    status, server = _boot(cloud, disabled)
    sid = server["id"]
    cloud.flavor("big", 1, 1024, 2)
    status, body = cloud.action(sid, {"resize": {"flavorRef": "big",
                                                 "OS-DCF:diskConfig": "AUTO"}})
    assert status == 400 and "automatic disk resize disabled" in body["badRequest"]["message"]
    server = cloud.server(sid)
    assert server["status"] == "ACTIVE" and server["flavor"]["original_name"] != "fbig"
    assert cloud.migrations(sid) == []
