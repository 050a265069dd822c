"""Cross-cell moves of servers in server groups and availability zones.

Two cells of two hosts each. Group members and zones span both cells; the
tests check that the move honours them across the cell boundary and that a
move no host qualifies for fails cleanly: server back on its source as it
was, migration in error, allocations exactly as before, nothing left in the
other cell. At each visible step: the instance mapping, the rows of every
cell (hidden flags, hard-deleted copies), allocations by consumer (instance
and migration) and every provider's usages.
"""
import pytest

from novella.conf import CONF

TINY = {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}
SMALL = {"VCPU": 1, "MEMORY_MB": 2048, "DISK_GB": 20}
MEDIUM = {"VCPU": 2, "MEMORY_MB": 4096, "DISK_GB": 40}
LARGE = {"VCPU": 4, "MEMORY_MB": 8192, "DISK_GB": 80}
FILLER = {"VCPU": 1, "MEMORY_MB": 30000, "DISK_GB": 10}  # leaves a host no room for LARGE
HOSTS = ("cell1-host1", "cell1-host2", "cell2-host1", "cell2-host2")
DRAIN = {"filter_scheduler": {"cross_cell_move_weight_multiplier": -1000000.0}}
ABSENT = {"instance": None, "migrations": [], "bdms": 0, "actions": 0}


def usages(**by_host):
    """Expected usages of every host: ``cell1_host1=[TINY, SMALL]`` sums the flavors."""
    out = {}
    for host in HOSTS:
        held = by_host.get(host.replace("-", "_"), [])
        out[host] = {rc: sum(f[rc] for f in held) for rc in TINY}
    return out


def _boot(cloud, host=None, group=None, zone=None, flavor="1", name="vm"):
    """Boot and wait; ``host`` is a 2.74 requested destination (the filters still run)."""
    server = {"name": name, "flavorRef": flavor, "imageRef": cloud.aio.demo_image["id"],
              "networks": "auto"}
    if host:
        server["host"] = host
    if zone:
        server["availability_zone"] = zone
    body = {"server": server}
    if group:
        body["os:scheduler_hints"] = {"group": group}
    status, resp = cloud.api("POST", "/servers", body, version="2.74")
    assert status == 202, resp
    cloud.aio.wait_idle()
    sid = resp["server"]["id"]
    assert cloud.server(sid)["status"] == "ACTIVE", cloud.fault(sid)
    return sid


def _group(cloud, policy):
    status, body = cloud.api("POST", "/os-server-groups",
                             {"server_group": {"name": policy, "policy": policy}},
                             version="2.64")
    assert status == 200, body
    return body["server_group"]["id"]


def _move(cloud, sid, body, version="2.79"):
    """resize/migrate ``sid``; returns its newest migration (the move is asynchronous: 202)."""
    before = {m["uuid"] for m in cloud.migrations(sid)}
    status, resp = cloud.action(sid, body, version=version)
    assert status == 202, resp
    cloud.aio.wait_idle()
    (mig,) = [m for m in cloud.migrations(sid) if m["uuid"] not in before]
    return mig


def _confirm(cloud, sid):
    status, resp = cloud.action(sid, {"confirmResize": None})
    assert status == 204, resp
    cloud.aio.wait_idle()


def assert_resized_across(cloud, sid, mig, src, dest, old, new, src_history=()):
    """VERIFY_RESIZE after a cross-cell move of ``sid`` from ``src`` to ``dest``
    (``src_history``: the rows of earlier migrations in the source cell)."""
    src_cell, dest_cell = src.split("-")[0], dest.split("-")[0]
    assert src_cell != dest_cell
    assert (mig["status"], mig["source_compute"], mig["dest_compute"]) == ("finished", src, dest)
    srv = cloud.server(sid)
    assert srv["status"] == "VERIFY_RESIZE" and srv["OS-EXT-SRV-ATTR:host"] == dest
    assert cloud.mapped_cell(sid) == dest_cell
    rows = cloud.rows(sid)
    assert rows[src_cell]["instance"][0] is True and rows[src_cell]["instance"][2] == src
    assert rows[src_cell]["migrations"] == sorted([*src_history, ("finished", True, True)])
    assert rows[dest_cell]["instance"] == (False, "resized", dest)
    assert rows[dest_cell]["migrations"] == [("finished", False, True)]
    books, _ = cloud.books(sid, mig["uuid"])
    assert books == {sid: {dest: new}, mig["uuid"]: {src: old}}
    assert cloud.bindings(sid) == {src: "INACTIVE", dest: "ACTIVE"}


def assert_confirmed_across(cloud, sid, mig, src, dest, flavor, src_history=()):
    """ACTIVE on ``dest`` after the confirm; the source cell keeps only ``src_history``
    (the migration rows of earlier moves that confirmed into it)."""
    src_cell, dest_cell = src.split("-")[0], dest.split("-")[0]
    srv = cloud.server(sid)
    assert srv["status"] == "ACTIVE" and srv["OS-EXT-SRV-ATTR:host"] == dest
    assert cloud.mapped_cell(sid) == dest_cell
    rows = cloud.rows(sid)
    assert rows[src_cell] == dict(ABSENT, migrations=sorted(src_history))  # hard-deleted
    assert rows[dest_cell]["instance"] == (False, "active", dest)
    assert rows[dest_cell]["migrations"][-1] == ("confirmed", False, True)
    books, _ = cloud.books(sid, mig["uuid"])
    assert books == {sid: {dest: flavor}, mig["uuid"]: {}}
    assert cloud.bindings(sid) == {dest: "ACTIVE"}


def assert_failed_in_place(cloud, sid, mig, host, flavor, before_usages, reason):
    """A move that found no host: the server as it was on ``host``, nothing elsewhere."""
    cell = host.split("-")[0]
    assert mig["status"] == "error"
    srv = cloud.server(sid)
    assert srv["status"] == "ACTIVE" and srv["OS-EXT-SRV-ATTR:host"] == host
    assert srv["OS-EXT-STS:task_state"] is None
    assert cloud.mapped_cell(sid) == cell
    rows = cloud.rows(sid)
    assert rows[cell]["instance"] == (False, "active", host)
    assert ("error", False, False) in rows[cell]["migrations"]
    for other in rows:
        if other != cell:
            assert rows[other] == ABSENT
    books, now = cloud.books(sid, mig["uuid"])
    assert books == {sid: {host: flavor}, mig["uuid"]: {}}
    assert now == before_usages
    assert cloud.bindings(sid) == {host: "ACTIVE"}
    assert reason in cloud.fault_in(sid, cell)
    action = "resize" if mig["migration_type"] == "resize" else "migrate"
    assert cloud.events(sid, action)["conductor_migrate_server"] == "Error"


# -- server groups ----------------------------------------------------------------------

def test_anti_affinity_member_goes_to_the_only_host_without_a_member(make_xcloud):
    cloud = make_xcloud(hosts_per_cell=2)
    cloud.allow_cross_cell()
    group = _group(cloud, "anti-affinity")
    a = _boot(cloud, "cell1-host1", group)
    b = _boot(cloud, "cell1-host2", group)
    c = _boot(cloud, "cell2-host1", group)
    # Not a member; makes cell2-host2 the host the weighers like least in cell2.
    d = _boot(cloud, "cell2-host2", flavor="2")
    for sid, host in ((a, "cell1-host1"), (b, "cell1-host2"), (c, "cell2-host1"),
                      (d, "cell2-host2")):
        assert cloud.host_of(sid) == host and cloud.mapped_cell(sid) == host.split("-")[0]
    start = usages(cell1_host1=[TINY], cell1_host2=[TINY], cell2_host1=[TINY],
                   cell2_host2=[SMALL])
    assert cloud.usages() == start

    # The weigher would keep a in cell1 (cell1-host2) and the RAM weigher would
    # pick cell2-host1 in cell2: both hold a member, so cell2-host2 it is.
    mig = _move(cloud, a, {"resize": {"flavorRef": "2"}})
    assert_resized_across(cloud, a, mig, "cell1-host1", "cell2-host2", TINY, SMALL)
    resized = usages(cell1_host1=[TINY], cell1_host2=[TINY], cell2_host1=[TINY],
                     cell2_host2=[SMALL, SMALL])
    assert cloud.usages() == resized

    # While a is resized its source copy still holds cell1-host1: b finds no host.
    mig_b = _move(cloud, b, {"migrate": None})
    assert_failed_in_place(cloud, b, mig_b, "cell1-host2", TINY, resized, "No valid host")
    assert cloud.rows(a)["cell1"]["instance"][0] is True  # a's move is untouched

    _confirm(cloud, a)
    assert_confirmed_across(cloud, a, mig, "cell1-host1", "cell2-host2", SMALL)
    settled = usages(cell1_host2=[TINY], cell2_host1=[TINY], cell2_host2=[SMALL, SMALL])
    assert cloud.usages() == settled

    # A new member can only go where a was.
    e = _boot(cloud, group=group)
    assert cloud.host_of(e) == "cell1-host1" and cloud.mapped_cell(e) == "cell1"
    full = usages(cell1_host1=[TINY], cell1_host2=[TINY], cell2_host1=[TINY],
                  cell2_host2=[SMALL, SMALL])
    assert cloud.usages() == full

    # Every host holds a member now: a resize and a migrate to a named host in the
    # other cell both fail and leave everything as it was.
    mig_c = _move(cloud, c, {"resize": {"flavorRef": "2"}})
    assert_failed_in_place(cloud, c, mig_c, "cell2-host1", TINY, full, "No valid host")
    mig_e = _move(cloud, e, {"migrate": {"host": "cell2-host2"}}, version="2.56")
    assert_failed_in_place(cloud, e, mig_e, "cell1-host1", TINY, full, "No valid host")
    assert cloud.mapped_cell(a) == "cell2" and cloud.rows(a)["cell1"] == ABSENT


def test_affinity_keeps_the_member_on_its_host_against_the_drain_weigher(make_xcloud):
    cloud = make_xcloud(hosts_per_cell=2, **DRAIN)
    cloud.allow_cross_cell()
    group = _group(cloud, "affinity")
    a = _boot(cloud, "cell1-host1", group)
    b = _boot(cloud, group=group)
    assert cloud.host_of(b) == "cell1-host1"  # affinity follows the first member
    both = usages(cell1_host1=[TINY, TINY])
    assert cloud.usages() == both

    # The only host the group allows is the source, which a resize may not use.
    mig = _move(cloud, a, {"resize": {"flavorRef": "2"}})
    assert_failed_in_place(cloud, a, mig, "cell1-host1", TINY, both, "No valid host")

    # Allowed to resize on the same host, it does so there instead of draining to cell2.
    CONF.set_override("allow_resize_to_same_host", True)
    try:
        mig = _move(cloud, a, {"resize": {"flavorRef": "2"}})
    finally:
        CONF.clear_override("allow_resize_to_same_host")
    assert (mig["status"], mig["dest_compute"]) == ("finished", "cell1-host1")
    assert cloud.mapped_cell(a) == "cell1"
    rows = cloud.rows(a)
    assert rows["cell2"] == ABSENT
    assert rows["cell1"]["instance"] == (False, "resized", "cell1-host1")
    assert rows["cell1"]["migrations"] == [("error", False, False), ("finished", False, False)]
    books, now = cloud.books(a, mig["uuid"])
    assert books == {a: {"cell1-host1": SMALL}, mig["uuid"]: {"cell1-host1": TINY}}
    assert now == usages(cell1_host1=[TINY, TINY, SMALL])
    _confirm(cloud, a)
    books, now = cloud.books(a, mig["uuid"])
    assert books == {a: {"cell1-host1": SMALL}, mig["uuid"]: {}}
    assert now == usages(cell1_host1=[TINY, SMALL])
    assert cloud.rows(a)["cell2"] == ABSENT


# -- availability zones -----------------------------------------------------------------

WEST, EAST = ("cell1-host1", "cell2-host1"), ("cell1-host2", "cell2-host2")


def _zones(cloud):
    """Zone west: host1 of each cell; zone east: host2 of each cell (os-aggregates)."""
    for zone, hosts in (("west", WEST), ("east", EAST)):
        status, body = cloud.api("POST", "/os-aggregates", {"aggregate": {
            "name": zone, "availability_zone": zone}})
        assert status == 200, body
        agg_id = body["aggregate"]["id"]
        for host in hosts:
            status, body = cloud.api("POST", f"/os-aggregates/{agg_id}/action",
                                     {"add_host": {"host": host}})
            assert status == 200, body
    status, body = cloud.api("GET", "/os-availability-zone")
    assert sorted(z["zoneName"] for z in body["availabilityZoneInfo"]) == ["east", "west"]


def _zone_of(cloud, sid):
    """(the zone shown, the zone the server was booted into or None)."""
    srv = cloud.api("GET", f"/servers/{sid}", version="2.96")[1]["server"]
    return srv["OS-EXT-AZ:availability_zone"], srv["pinned_availability_zone"]


@pytest.mark.parametrize("placement_prefilter", [False, True])
def test_pinned_server_stays_in_its_zone_across_cells(make_xcloud, placement_prefilter):
    cloud = make_xcloud(hosts_per_cell=2, scheduler={
        "query_placement_for_availability_zone": placement_prefilter})
    cloud.allow_cross_cell()
    _zones(cloud)
    sid = _boot(cloud, "cell1-host1", zone="west")
    assert _zone_of(cloud, sid) == ("west", "west") and cloud.mapped_cell(sid) == "cell1"
    assert cloud.usages() == usages(cell1_host1=[TINY])

    # The weigher prefers cell1-host2, in east: the only other west host is in cell2.
    mig = _move(cloud, sid, {"resize": {"flavorRef": "2"}})
    assert_resized_across(cloud, sid, mig, "cell1-host1", "cell2-host1", TINY, SMALL)
    assert cloud.usages() == usages(cell1_host1=[TINY], cell2_host1=[SMALL])
    assert _zone_of(cloud, sid) == ("west", "west")
    _confirm(cloud, sid)
    assert_confirmed_across(cloud, sid, mig, "cell1-host1", "cell2-host1", SMALL)
    assert cloud.usages() == usages(cell2_host1=[SMALL])

    # And back: cell2-host2 is east, cell1-host1 the only west host left.
    mig = _move(cloud, sid, {"resize": {"flavorRef": "3"}})
    assert_resized_across(cloud, sid, mig, "cell2-host1", "cell1-host1", SMALL, MEDIUM,
                          src_history=[("confirmed", False, True)])
    assert cloud.usages() == usages(cell1_host1=[MEDIUM], cell2_host1=[SMALL])
    assert _zone_of(cloud, sid) == ("west", "west")
    status, body = cloud.action(sid, {"revertResize": None})
    assert status == 202, body
    cloud.aio.wait_idle()
    srv = cloud.server(sid)
    assert srv["status"] == "ACTIVE" and srv["OS-EXT-SRV-ATTR:host"] == "cell2-host1"
    assert cloud.mapped_cell(sid) == "cell2"
    rows = cloud.rows(sid)
    assert rows["cell1"] == ABSENT
    assert rows["cell2"]["instance"] == (False, "active", "cell2-host1")
    assert rows["cell2"]["migrations"] == [("confirmed", False, True), ("reverted", False, True)]
    assert cloud.books(sid, mig["uuid"]) == ({sid: {"cell2-host1": SMALL}, mig["uuid"]: {}},
                                             usages(cell2_host1=[SMALL]))
    assert _zone_of(cloud, sid) == ("west", "west")

    # No west host left (cell1-host1 disabled): the resize fails and changes nothing.
    status, body = cloud.api("GET", "/os-services?host=cell1-host1&binary=nova-compute",
                             version="2.53")
    service_id = body["services"][0]["id"]
    status, body = cloud.api("PUT", f"/os-services/{service_id}", {"status": "disabled"},
                             version="2.53")
    assert status == 200, body
    mig = _move(cloud, sid, {"resize": {"flavorRef": "3"}})
    assert_failed_in_place(cloud, sid, mig, "cell2-host1", SMALL, usages(cell2_host1=[SMALL]),
                           "No valid host")


def test_unpinned_server_may_move_to_any_zone(make_xcloud):
    cloud = make_xcloud(hosts_per_cell=2, **DRAIN)
    cloud.allow_cross_cell()
    _zones(cloud)
    # cell2's west host is full: draining cell1, the only room is in east.
    filler = _boot(cloud, "cell2-host1", flavor=cloud.flavor("filler", 1, 30000, 10))
    sid = _boot(cloud, "cell1-host1")
    assert _zone_of(cloud, sid) == ("west", None)
    start = usages(cell1_host1=[TINY], cell2_host1=[FILLER])
    assert cloud.usages() == start

    mig = _move(cloud, sid, {"resize": {"flavorRef": "4"}})
    assert_resized_across(cloud, sid, mig, "cell1-host1", "cell2-host2", TINY, LARGE)
    assert _zone_of(cloud, sid) == ("east", None)
    assert cloud.usages() == usages(cell1_host1=[TINY], cell2_host1=[FILLER],
                                    cell2_host2=[LARGE])
    _confirm(cloud, sid)
    assert_confirmed_across(cloud, sid, mig, "cell1-host1", "cell2-host2", LARGE)
    assert cloud.usages() == usages(cell2_host1=[FILLER], cell2_host2=[LARGE])
    assert _zone_of(cloud, sid) == ("east", None)
    assert cloud.host_of(filler) == "cell2-host1"

    # A named host in the other cell and the other zone (west) is fine too.
    mig = _move(cloud, sid, {"migrate": {"host": "cell1-host1"}}, version="2.56")
    assert_resized_across(cloud, sid, mig, "cell2-host2", "cell1-host1", LARGE, LARGE,
                          src_history=[("confirmed", False, True)])
    assert _zone_of(cloud, sid) == ("west", None)
    _confirm(cloud, sid)
    assert_confirmed_across(cloud, sid, mig, "cell2-host2", "cell1-host1", LARGE,
                            src_history=[("confirmed", False, True)])
    assert [(m["status"], m["dest_compute"]) for m in sorted(
        cloud.migrations(sid), key=lambda m: m["created_at"])] == [
        ("confirmed", "cell2-host2"), ("confirmed", "cell1-host1")]
    assert cloud.usages() == usages(cell1_host1=[LARGE], cell2_host1=[FILLER])


def test_migrate_to_a_host_of_another_zone_fails_for_a_pinned_server(make_xcloud):
    cloud = make_xcloud(hosts_per_cell=2)
    cloud.allow_cross_cell()
    _zones(cloud)
    sid = _boot(cloud, "cell1-host1", zone="west")
    start = usages(cell1_host1=[TINY])

    # Accepted (202, the move is asynchronous), then no valid host: as before.
    mig = _move(cloud, sid, {"migrate": {"host": "cell2-host2"}}, version="2.56")
    assert_failed_in_place(cloud, sid, mig, "cell1-host1", TINY, start, "No valid host")
    assert _zone_of(cloud, sid) == ("west", "west")

    # The same server to the west host of the other cell.
    mig = _move(cloud, sid, {"migrate": {"host": "cell2-host1"}}, version="2.56")
    failed = [("error", False, False)]  # the refused migration's row stays where it was
    assert_resized_across(cloud, sid, mig, "cell1-host1", "cell2-host1", TINY, TINY,
                          src_history=failed)
    assert cloud.usages() == usages(cell1_host1=[TINY], cell2_host1=[TINY])
    _confirm(cloud, sid)
    assert_confirmed_across(cloud, sid, mig, "cell1-host1", "cell2-host1", TINY,
                            src_history=failed)
    assert sorted(m["status"] for m in cloud.migrations(sid)) == ["confirmed", "error"]
    assert cloud.usages() == usages(cell2_host1=[TINY])
    assert _zone_of(cloud, sid) == ("west", "west")
