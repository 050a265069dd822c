"""What older clients send at 2.1: the legacy block device mapping and /os-volumes_boot,
two usable networks without a ``networks`` key, and the deprecated routes."""
import pytest
import sqlalchemy as sa

from novella.context import get_admin_context
from novella.db import api_models as am, cell_models as cm, cells

from tests.functional.moves.conftest import make_cloud  # noqa: F401 - the fixture


@pytest.fixture
def cloud(make_cloud):  # noqa: F811
    return make_cloud(hosts=1)


def _root_volume(cloud):
    return cloud.aio.volume_api.create(get_admin_context(), 1, name="root",
                                       image_id=cloud.aio.demo_image["id"])["id"]


def _mapping(cloud, sid):
    """The server's block device mappings and its volumes' attachments, without ids."""
    cell = cells.instance_cell(cloud.aio.api_db, sid)
    with cells.cell_database(cell).session() as s:
        rows = s.scalars(sa.select(cm.BlockDeviceMapping).where(
            cm.BlockDeviceMapping.instance_uuid == sid,
            cm.BlockDeviceMapping.deleted == 0)).all()
        bdms = [(b.source_type, b.destination_type, b.boot_index, b.device_name,
                 bool(b.delete_on_termination), b.volume_id, bool(b.attachment_id))
                for b in rows]
    attachments = []
    for b in bdms:
        volume = cloud.aio.volume_api.get(get_admin_context(), b[5])
        attachments.append((volume["status"],
                            [a["server_id"] == sid for a in volume["attachments"]]))
    return bdms, attachments


def _counts(cloud):
    with cloud.aio.api_db.session() as s:
        return (s.scalar(sa.select(sa.func.count()).select_from(am.BuildRequest)),
                s.scalar(sa.select(sa.func.count()).select_from(am.InstanceMapping)),
                len(cloud.aio.volume_api.list(get_admin_context())))


def test_legacy_mapping_boots_from_volume_as_the_v2_one(cloud):
    net = "auto"
    v2_root, legacy_root = _root_volume(cloud), _root_volume(cloud)
    status, body = cloud.api("POST", "/servers", {"server": {
        "name": "v2", "flavorRef": "1", "networks": net,
        "block_device_mapping_v2": [{"source_type": "volume", "destination_type": "volume",
                                     "uuid": v2_root, "boot_index": 0, "device_name": "vda",
                                     "delete_on_termination": True}]}})
    assert status == 202, body
    v2 = body["server"]["id"]
    # python-novaclient's --block-device-mapping vda=<volume>:::1, at 2.1, on the
    # route it uses for a boot from volume.
    status, body = cloud.api("POST", "/os-volumes_boot", {"server": {
        "name": "legacy", "flavorRef": "1",
        "block_device_mapping": [{"device_name": "vda", "volume_id": legacy_root,
                                  "delete_on_termination": "1", "volume_size": ""}]}},
        version="2.1")
    assert status == 400, body  # volume_size must be digits, as the reference's schema
    status, body = cloud.api("POST", "/os-volumes_boot", {"server": {
        "name": "legacy", "flavorRef": "1",
        "block_device_mapping": [{"device_name": "vda", "volume_id": legacy_root,
                                  "delete_on_termination": "1"}]}}, version="2.1")
    assert status == 202, body
    legacy = body["server"]["id"]
    assert body["server"]["links"][0]["href"].endswith("/servers/" + legacy)
    cloud.aio.wait_idle()
    for sid in (v2, legacy):
        assert cloud.server(sid)["status"] == "ACTIVE", cloud.fault(sid)
    v2_bdms, v2_attached = _mapping(cloud, v2)
    legacy_bdms, legacy_attached = _mapping(cloud, legacy)
    assert [b[:5] for b in legacy_bdms] == [b[:5] for b in v2_bdms] == \
        [("volume", "volume", 0, "vda", True)]
    assert legacy_bdms[0][5:] == (legacy_root, True) and v2_bdms[0][5:] == (v2_root, True)
    assert legacy_attached == v2_attached == [("in-use", [True])]

    # The server is the same under either name, and is deleted (with its volume) there.
    status, body = cloud.api("GET", f"/os-volumes_boot/{legacy}", version="2.1")
    assert status == 200 and body["server"]["id"] == legacy
    assert body["server"]["os-extended-volumes:volumes_attached"] == [{"id": legacy_root}]
    status, body = cloud.api("GET", "/os-volumes_boot/detail", version="2.1")
    assert {s["id"] for s in body["servers"]} == {v2, legacy}
    status, body = cloud.api("PUT", f"/os-volumes_boot/{legacy}",
                             {"server": {"name": "renamed"}}, version="2.1")
    assert status == 200 and cloud.server(legacy)["name"] == "renamed"
    status, _ = cloud.api("POST", f"/os-volumes_boot/{legacy}/action", {"os-stop": None},
                          version="2.1")
    assert status == 202
    cloud.aio.wait_idle()
    assert cloud.server(legacy)["status"] == "SHUTOFF"
    # Only the servers' own actions, and nothing at all from 2.103, as the reference.
    status, body = cloud.api("POST", f"/os-volumes_boot/{legacy}/action", {"pause": None},
                             version="2.1")
    assert status == 400 and body["badRequest"]["message"] == "There is no such action: pause"
    for method, path in (("GET", f"/os-volumes_boot/{legacy}"), ("GET", "/os-volumes_boot"),
                         ("DELETE", f"/os-volumes_boot/{legacy}"),
                         ("POST", f"/os-volumes_boot/{legacy}/action")):
        status, body = cloud.api(method, path, {"os-start": None} if method == "POST" else None,
                                 version="2.103")
        assert status == 404 and body["itemNotFound"]["code"] == 404, path
    assert cloud.server(legacy)["status"] == "SHUTOFF"
    assert cloud.api("DELETE", f"/os-volumes_boot/{legacy}", version="2.1")[0] == 204
    cloud.aio.wait_idle()
    assert cloud.api("GET", f"/servers/{legacy}")[0] == 404
    volumes = {v["id"] for v in cloud.aio.volume_api.list(get_admin_context())}
    assert legacy_root not in volumes and v2_root in volumes  # delete_on_termination "1"


def test_bad_legacy_mappings_change_nothing(cloud):
    root = _root_volume(cloud)
    before = _counts(cloud)
    v2 = [{"source_type": "volume", "destination_type": "volume", "uuid": root,
           "boot_index": 0}]
    for server, message in (
            ({"block_device_mapping": [{"device_name": "vda", "volume_id": root}],
              "block_device_mapping_v2": v2},
             "Using different block_device_mapping syntaxes is not allowed in the same request."),
            ({"block_device_mapping": [{"device_name": "vda"}]},
             "Block Device Mapping is Invalid: Unrecognized legacy format."),
            ({"block_device_mapping": [{"device_name": "vdb", "volume_id": root}]},
             "Block Device Mapping is Invalid: Boot sequence for the instance and "
             "image/block device mapping combination is not valid."),
            ({"block_device_mapping": [{"device_name": "vda", "volume_id": root,
                                        "delete_on_termination": "maybe"}]},
             "Invalid input for field/attribute delete_on_termination"),
            ({"block_device_mapping": [{"device_name": "vda", "volume_id": root,
                                        "source_type": "volume"}]},
             "Additional properties are not allowed ('source_type' was unexpected)")):
        status, body = cloud.api("POST", "/servers", {"server": {
            "name": "bad", "flavorRef": "1", **server}}, version="2.1")
        assert status == 400, body
        assert body["badRequest"]["code"] == 400
        assert message in body["badRequest"]["message"], body
    assert _counts(cloud) == before
    assert cloud.aio.volume_api.get(get_admin_context(), root)["status"] == "available"


def _ports(cloud):
    return cloud.aio.network_api.list_ports(get_admin_context())


def test_two_usable_networks_and_none_asked_for_is_a_conflict(cloud):
    # One usable network: a 2.1 create without "networks" boots on it.
    status, body = cloud.api("POST", "/servers", {"server": {
        "name": "one", "flavorRef": "1", "imageRef": cloud.aio.demo_image["id"]}},
        version="2.1")
    assert status == 202, body
    sid = body["server"]["id"]
    cloud.aio.wait_idle()
    assert cloud.server(sid)["status"] == "ACTIVE"
    cloud.aio.network_api.create_network(get_admin_context(), name="second",
                                         cidr="10.1.0.0/24", shared=True)
    before = (_counts(cloud), len(_ports(cloud)), cloud.usages())
    for networks in ({}, {"networks": []}):
        status, body = cloud.api("POST", "/servers", {"server": {
            "name": "two", "flavorRef": "1", "imageRef": cloud.aio.demo_image["id"],
            **networks}}, version="2.1")
        assert status == 409, body
        assert body == {"conflictingRequest": {
            "code": 409, "message": "Multiple possible networks found, use a Network ID to "
                                    "be more specific."}}
    cloud.aio.wait_idle()
    assert (_counts(cloud), len(_ports(cloud)), cloud.usages()) == before
    status, body = cloud.api("GET", "/servers/detail", version="2.1")
    assert [s["id"] for s in body["servers"]] == [sid]
