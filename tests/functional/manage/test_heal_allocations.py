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


# --- exit codes of failures: each leaves the books and the ports as they were ------------
def _broken_with_port(cloud):
    port = cloud.bandwidth_port()
    sid = cloud.boot(networks=[{"port": port["id"]}])
    _break(cloud, sid, port["id"])
    return sid, port["id"], dict(cloud.port(port["id"])["binding:profile"])


def test_dry_run_heals_nothing_and_counts_nothing(cloud):
    first, second = cloud.boot(name="a"), cloud.boot(name="b")
    for sid in (first, second):
        cloud.aio.placement.delete_allocations(sid)
    code, out = cloud.manage("placement", "heal_allocations", "--dry-run", "--max-count", "1",
                             "--verbose")
    assert code == 4, out        # nothing healed: the count is never reached
    assert out.count("[dry-run] Create allocations") == 2
    assert "Processed 0 instances." in out
    assert cloud.allocations(first) == {} and cloud.allocations(second) == {}


def test_exit_2_when_the_instance_node_is_not_in_its_cell(cloud):
    import sqlalchemy as sa
    from novella.db import cell_models as cm
    sid = cloud.boot()
    cloud.aio.placement.delete_allocations(sid)
    with cloud.cell_db().session(write=True) as s:
        s.execute(sa.update(cm.Instance).where(cm.Instance.uuid == sid)
                  .values(host="gone", node="gone"))
    code, out = cloud.manage("placement", "heal_allocations")
    assert code == 2, out
    assert "Compute host gone could not be found." in out
    assert cloud.allocations(sid) == {}


def test_exit_3_when_placement_refuses_restores_the_ports(cloud, monkeypatch):
    from novella.placement.client import PlacementError
    sid, port, profile = _broken_with_port(cloud)
    usages = cloud.usages()

    def refuse(consumer, *a, **kw):
        raise PlacementError("PUT", f"/allocations/{consumer}", 409,
                             detail="Unable to allocate inventory")
    monkeypatch.setattr(cloud.aio.placement, "put_allocations", refuse)
    code, out = cloud.manage("placement", "heal_allocations")
    assert code == 3, out
    assert f"Failed to create allocations for consumer {sid}" in out
    assert "Unable to allocate inventory" in out
    assert cloud.allocations(sid) == {} and cloud.usages() == usages
    assert cloud.port(port)["binding:profile"] == profile     # updated, then restored


def test_exit_5_when_the_ports_cannot_be_read(cloud, monkeypatch):
    sid, port, profile = _broken_with_port(cloud)

    def down(*a, **kw):
        raise ConnectionError("network service unreachable")
    monkeypatch.setattr(cloud.aio.network_api, "list_ports", down)
    code, out = cloud.manage("placement", "heal_allocations")
    assert code == 5, out
    assert f"Unable to query ports for instance {sid}" in out
    assert cloud.allocations(sid) == {}
    # Without the ports, the flavor's part alone is healed.
    code, out = cloud.manage("placement", "heal_allocations", "--skip-port-allocations")
    assert code == 0, out
    assert set(cloud.allocations(sid)) == {cloud.provider(cloud.host_of(sid))}
    assert cloud.port(port)["binding:profile"] == profile


def test_exit_6_when_a_port_cannot_be_updated(cloud, monkeypatch):
    sid, port, profile = _broken_with_port(cloud)

    def refuse(ctxt, port_id, changes):
        raise RuntimeError(f"port {port_id} is locked")
    monkeypatch.setattr(cloud.aio.network_api, "update_port", refuse)
    code, out = cloud.manage("placement", "heal_allocations")
    assert code == 6, out
    assert f"Unable to update ports with allocations that are about to be created in " \
           f"placement: {port}" in out
    assert cloud.allocations(sid) == {}
    assert cloud.port(port)["binding:profile"] == profile


def test_exit_7_when_the_port_updates_cannot_be_rolled_back(cloud, monkeypatch):
    from novella.placement.client import PlacementError
    sid, port, _profile = _broken_with_port(cloud)
    net, real_update = cloud.aio.network_api, cloud.aio.network_api.update_port
    real_put = cloud.aio.placement.put_allocations
    calls = []

    def update_once(ctxt, port_id, changes):
        calls.append(port_id)
        if len(calls) > 1:
            raise RuntimeError("network service went away")
        return real_update(ctxt, port_id, changes)

    def refuse(consumer, *a, **kw):
        raise PlacementError("PUT", f"/allocations/{consumer}", 409, detail="refused")
    monkeypatch.setattr(net, "update_port", update_once)
    monkeypatch.setattr(cloud.aio.placement, "put_allocations", refuse)
    code, out = cloud.manage("placement", "heal_allocations")
    assert code == 7, out
    assert "Failed to roll back the port updates" in out and port in out
    monkeypatch.setattr(net, "update_port", real_update)
    monkeypatch.setattr(cloud.aio.placement, "put_allocations", real_put)
    assert cloud.allocations(sid) == {}
    # The port still names a provider, as the message says: removing the key
    # by hand and running again heals everything.
    held = cloud.port(port)["binding:profile"]
    assert "allocation" in held
    held.pop("allocation")
    net.update_port(get_admin_context(), port, {"binding:profile": held})
    code, out = cloud.manage("placement", "heal_allocations")
    assert code == 0, out
    assert set(cloud.port(port)["binding:profile"]["allocation"].values()) == {
        cloud.provider(_bw_name(cloud.host_of(sid)))}
