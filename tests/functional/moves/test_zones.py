"""A server moved inside its cell shows the zone of the host it is on.

One cell of two hosts in two zones (os-aggregates): west holds host1, east
host2. The zone follows the server to the destination when the move
finishes, back to the source on a revert, and stays put when the move fails.
"""
from novella.virt import simulated

WEST, EAST = "cell1-host1", "cell1-host2"


def _zones(cloud):
    for zone, host in (("west", WEST), ("east", EAST)):
        status, body = cloud.api("POST", "/os-aggregates", {"aggregate": {
            "name": zone, "availability_zone": zone}})
        assert status == 200, body
        status, body = cloud.api("POST", f"/os-aggregates/{body['aggregate']['id']}/action",
                                 {"add_host": {"host": host}})
        assert status == 200, body


def _boot_on(cloud, host):
    status, body = cloud.api("POST", "/servers", {"server": {
        "name": "vm", "flavorRef": "1", "imageRef": cloud.aio.demo_image["id"],
        "networks": "auto", "host": host}}, version="2.74")
    assert status == 202, body
    cloud.aio.wait_idle()
    return body["server"]["id"]


def _placed(cloud, sid):
    """(status, host, zone shown, zone asked for at boot)."""
    srv = cloud.api("GET", f"/servers/{sid}", version="2.96")[1]["server"]
    return (srv["status"], srv["OS-EXT-SRV-ATTR:host"], srv["OS-EXT-AZ:availability_zone"],
            srv["pinned_availability_zone"])


def _act(cloud, sid, body, expect=202):
    status, resp = cloud.action(sid, body)
    assert status == expect, resp
    cloud.aio.wait_idle()


def test_the_zone_follows_the_server_through_migrate_revert_and_confirm(cloud):
    _zones(cloud)
    sid = _boot_on(cloud, WEST)
    assert _placed(cloud, sid) == ("ACTIVE", WEST, "west", None)

    _act(cloud, sid, {"migrate": None})
    assert _placed(cloud, sid) == ("VERIFY_RESIZE", EAST, "east", None)
    _act(cloud, sid, {"revertResize": None})
    assert _placed(cloud, sid) == ("ACTIVE", WEST, "west", None)

    _act(cloud, sid, {"resize": {"flavorRef": "2"}})
    assert _placed(cloud, sid) == ("VERIFY_RESIZE", EAST, "east", None)
    _act(cloud, sid, {"confirmResize": None}, expect=204)
    assert _placed(cloud, sid) == ("ACTIVE", EAST, "east", None)
    assert [(m["status"], m["dest_compute"]) for m in sorted(
        cloud.migrations(sid), key=lambda m: m["created_at"])] == [
        ("reverted", EAST), ("confirmed", EAST)]


def test_a_failed_move_leaves_the_server_in_its_zone(cloud):
    _zones(cloud)
    sid = _boot_on(cloud, WEST)
    books_before = cloud.books(sid)
    simulated.inject_fault(EAST, "finish_migration", instance_uuid=sid)
    _act(cloud, sid, {"migrate": None})
    assert _placed(cloud, sid) == ("ACTIVE", WEST, "west", None)
    assert [m["status"] for m in cloud.migrations(sid)] == ["error"]
    assert cloud.books(sid) == books_before
