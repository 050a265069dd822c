"""Moves racing for the last room on a host: twenty resizes, twenty live migrations."""
TINY = {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}
BIG = {"VCPU": 1, "MEMORY_MB": 4096, "DISK_GB": 1}
TWENTY_SERVERS = {"instances": 20, "cores": 40}   # the [quota] defaults allow ten


def setup_module():
    from novella.conf import CONF, quota
    quota.register_opts(CONF)


def _twenty_racers(cloud, room_mb):
    """Twenty tiny servers on the first host; the second left room for ``room_mb``
    of memory. Returns (source, destination, server ids, destination inventory)."""
    src, dest = sorted(cloud.aio.computes)
    status, body = cloud.api("POST", "/servers", {"server": {
        "name": "racer", "flavorRef": "1", "imageRef": cloud.aio.demo_image["id"],
        "networks": "none", "host": src, "min_count": 20, "max_count": 20}}, version="2.79")
    assert status == 202, body
    cloud.aio.wait_idle()
    ids = [s["id"] for s in cloud.api("GET", "/servers?limit=100")[1]["servers"]]
    assert len(ids) == 20 and {cloud.host_of(i) for i in ids} == {src}
    placement = cloud.aio.placement
    _gen, inv = placement.get_inventories(cloud.rp(dest))
    inv["MEMORY_MB"]["reserved"] = inv["MEMORY_MB"]["total"] - room_mb
    placement.set_inventory(cloud.rp(dest), inv)
    return src, dest, ids, inv


def test_twenty_resizes_race_for_three_places(make_cloud):
    # Casts run one at a time in the all-in-one by default; eight threads make
    # the twenty moves really overlap.
    cloud = make_cloud(hosts=2, DEFAULT={"inprocess_cast_threads": 8}, quota=TWENTY_SERVERS)
    from novella import rpc
    from novella.allinone import SUPER_TRANSPORT
    assert rpc.get_transport(SUPER_TRANSPORT)._pool._max_workers == 8
    cloud.flavor("big", vcpus=1, ram=4096, disk=1)
    src, dest, ids, inv = _twenty_racers(cloud, room_mb=3 * 4096)  # three big servers

    for sid in ids:
        assert cloud.action(sid, {"resize": {"flavorRef": "big"}})[0] == 202
    cloud.aio.wait_idle()

    migs = {sid: cloud.migrations(sid)[0] for sid in ids}
    winners = [sid for sid in ids if cloud.server(sid)["status"] == "VERIFY_RESIZE"]
    losers = [sid for sid in ids if sid not in winners]
    assert len(winners) == 3
    for sid in winners:
        mig = migs[sid]
        assert mig["status"] == "finished" and cloud.host_of(sid) == dest
        assert cloud.books(sid, mig["uuid"])[0] == {sid: {dest: BIG}, mig["uuid"]: {src: TINY}}
    for sid in losers:
        mig = migs[sid]
        srv = cloud.server(sid)
        assert (srv["status"], srv["OS-EXT-SRV-ATTR:host"], mig["status"]) == (
            "ACTIVE", src, "error")
        assert cloud.books(sid, mig["uuid"])[0] == {sid: {src: TINY}, mig["uuid"]: {}}
    usages = cloud.usages()
    assert usages[dest]["MEMORY_MB"] == 3 * 4096
    assert usages[dest]["MEMORY_MB"] <= inv["MEMORY_MB"]["total"] - inv["MEMORY_MB"]["reserved"]
    assert usages[src] == {"VCPU": 20, "MEMORY_MB": 20 * 512, "DISK_GB": 20}


def test_twenty_live_migrations_race_for_five_places(make_cloud):
    cloud = make_cloud(hosts=2, DEFAULT={"inprocess_cast_threads": 8}, quota=TWENTY_SERVERS)
    src, dest, ids, _inv = _twenty_racers(cloud, room_mb=5 * 512)   # five tiny servers

    for sid in ids:
        status, body = cloud.api("POST", f"/servers/{sid}/action", {
            "os-migrateLive": {"host": None, "block_migration": "auto"}}, version="2.79")
        assert status == 202, body
    cloud.aio.wait_idle()

    moved = [sid for sid in ids if cloud.host_of(sid) == dest]
    assert len(moved) == 5
    for sid in ids:
        (mig,) = cloud.migrations(sid)
        srv = cloud.server(sid)
        assert (srv["status"], srv["OS-EXT-STS:task_state"]) == ("ACTIVE", None)
        here = dest if sid in moved else src
        assert mig["status"] == ("completed" if sid in moved else "error")
        assert cloud.books(sid, mig["uuid"])[0] == {sid: {here: TINY}, mig["uuid"]: {}}
    usages = cloud.usages()
    assert usages[dest] == {"VCPU": 5, "MEMORY_MB": 5 * 512, "DISK_GB": 5}
    assert usages[src] == {"VCPU": 15, "MEMORY_MB": 15 * 512, "DISK_GB": 15}
