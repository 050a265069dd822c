"""`novella manage placement heal_allocations`: lost allocations (flavor and port
bandwidth) written back, and the ports' binding profiles naming their provider."""
from novella.context import get_admin_context

TINY = {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}
BW = {"NET_BW_EGR_KILOBIT_PER_SEC": 1000, "NET_BW_IGR_KILOBIT_PER_SEC": 1000}


def _bw_name(host):
    return f"{host}:Open vSwitch agent:physnet0"


def _break(cloud, sid, port_id):
    """Lose the server's allocation and the port's record of its provider."""
    cloud.aio.placement.delete_allocations(sid)
    profile = dict(cloud.port(port_id)["binding:profile"])
    profile.pop("allocation", None)
    cloud.aio.network_api.update_port(get_admin_context(), port_id, {"binding:profile": profile})


def test_heal_recreates_flavor_and_port_allocations_and_the_port_profile(cloud):
    port = cloud.bandwidth_port()
    sid = cloud.boot(networks=[{"port": port["id"]}])
    host = cloud.host_of(sid)
    rp, bw = cloud.provider(host), cloud.provider(_bw_name(host))
    healthy = cloud.usages()
    _break(cloud, sid, port["id"])
    assert cloud.allocations(sid) == {}
    assert cloud.usages()[_bw_name(host)]["NET_BW_EGR_KILOBIT_PER_SEC"] == 0

    code, out = cloud.manage("placement", "heal_allocations", "--dry-run", "--verbose")
    assert code == 4
    assert f"[dry-run] Create allocations for instance {sid}" in out
    assert cloud.allocations(sid) == {}
    assert "allocation" not in cloud.port(port["id"])["binding:profile"]

    code, out = cloud.manage("placement", "heal_allocations", "--verbose")
    assert code == 0, out
    assert f"Successfully created allocations for instance {sid}." in out
    assert "Processed 1 instances." in out
    held = {p: a["resources"] for p, a in cloud.allocations(sid).items()}
    assert held == {rp: TINY, bw: BW}
    assert cloud.usages() == healthy
    assert set(cloud.port(port["id"])["binding:profile"]["allocation"].values()) == {bw}

    assert cloud.manage("placement", "heal_allocations")[0] == 4   # nothing left to heal


def test_heal_adds_a_missing_port_allocation_to_an_existing_one(cloud):
    port = cloud.bandwidth_port()
    sid = cloud.boot(networks=[{"port": port["id"]}])
    host = cloud.host_of(sid)
    rp, bw = cloud.provider(host), cloud.provider(_bw_name(host))
    current = cloud.aio.placement.get_allocations(sid)
    cloud.aio.placement.put_allocations(sid, {rp: current["allocations"][rp]},
                                        current["project_id"], current["user_id"],
                                        consumer_generation=current["consumer_generation"])
    assert cloud.manage("placement", "heal_allocations", "--skip-port-allocations")[0] == 4
    assert set(cloud.allocations(sid)) == {rp}

    code, out = cloud.manage("placement", "heal_allocations", "--instance", sid, "--verbose")
    assert code == 0, out
    assert f"Successfully updated allocations for instance {sid}." in out
    assert {p: a["resources"] for p, a in cloud.allocations(sid).items()} == {rp: TINY, bw: BW}
    assert set(cloud.port(port["id"])["binding:profile"]["allocation"].values()) == {bw}


def test_heal_skips_busy_servers_and_force_rebuilds_one(cloud):
    import sqlalchemy as sa
    from novella.db import cell_models as cm
    sid = cloud.boot()
    rp = cloud.provider(cloud.host_of(sid))
    cloud.aio.placement.delete_allocations(sid)
    with cloud.cell_db().session(write=True) as s:
        s.execute(sa.update(cm.Instance).where(cm.Instance.uuid == sid)
                  .values(task_state="migrating"))
    code, out = cloud.manage("placement", "heal_allocations", "--verbose")
    assert code == 4
    assert f"Instance {sid} is undergoing a task state transition: migrating" in out
    with cloud.cell_db().session(write=True) as s:
        s.execute(sa.update(cm.Instance).where(cm.Instance.uuid == sid).values(task_state=None))

    # A wrong allocation (too much memory) is replaced with --force.
    cloud.aio.placement.put_allocations(sid, {rp: {"resources": dict(TINY, MEMORY_MB=2048)}},
                                        "admin", "admin")
    assert cloud.manage("placement", "heal_allocations", "--instance", sid)[0] == 4
    assert cloud.manage("placement", "heal_allocations", "--instance", sid, "--force")[0] == 0
    assert cloud.allocations(sid)[rp]["resources"] == TINY


def test_heal_max_count_cells_and_invalid_input(cloud):
    first, second = cloud.boot(name="a"), cloud.boot(name="b")
    for sid in (first, second):
        cloud.aio.placement.delete_allocations(sid)
    code, out = cloud.manage("placement", "heal_allocations", "--max-count", "1", "--verbose")
    assert code == 1 and "Max count reached. Processed 1 instances." in out
    assert sum(bool(cloud.allocations(s)) for s in (first, second)) == 1
    # The count is reached again (as the reference, 1 until a run finds less to do).
    assert cloud.manage("placement", "heal_allocations", "--max-count", "1")[0] == 1
    assert all(cloud.allocations(s) for s in (first, second))
    assert cloud.manage("placement", "heal_allocations", "--max-count", "1")[0] == 4

    cell = cloud.aio.cells[0].uuid
    for argv, message in [
            (["--instance", first, "--cell", cell], "mutually exclusive"),
            (["--force"], "--instance flag is required"),
            (["--max-count", "0"], "positive integer"),
            (["--cell", "00000000-0000-0000-0000-0000000000ff"], "was not found"),
            (["--instance", "00000000-0000-0000-0000-0000000000ff"], "Unable to find cell")]:
        code, out = cloud.manage("placement", "heal_allocations", *argv)
        assert code == 127 and message in out, (argv, out)
