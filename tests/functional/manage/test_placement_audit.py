"""`novella manage placement audit`: orphaned allocations found, reported and deleted."""
import uuid

from novella.db import cell_models as cm

TINY = {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}


def _orphan(cloud, rp, resources=TINY):
    consumer = str(uuid.uuid4())
    cloud.aio.placement.put_allocations(consumer, {rp: {"resources": resources}}, "p", "u")
    return consumer


def test_audit_reports_then_deletes_orphans_and_keeps_live_consumers(cloud):
    sid = cloud.boot()
    host = cloud.host_of(sid)
    rp = cloud.provider(host)
    before = cloud.usages()[host]
    orphan = _orphan(cloud, rp)
    # A migration in progress holds an allocation of its own: not an orphan.
    migration = str(uuid.uuid4())
    with cloud.cell_db().session(write=True) as s:
        s.add(cm.Migration(uuid=migration, instance_uuid=sid, source_compute=host,
                           dest_compute=host, status="migrating", migration_type="migration"))
    cloud.aio.placement.put_allocations(migration, {rp: {"resources": TINY}}, "p", "u",
                                        consumer_type="MIGRATION")
    # A finished one's allocation is an orphan.
    done = str(uuid.uuid4())
    with cloud.cell_db().session(write=True) as s:
        s.add(cm.Migration(uuid=done, instance_uuid=sid, source_compute=host,
                           dest_compute=host, status="confirmed", migration_type="migration"))
    cloud.aio.placement.put_allocations(done, {rp: {"resources": TINY}}, "p", "u")

    code, out = cloud.manage("placement", "audit")
    assert (code, out) == (3, "")
    assert cloud.allocations(orphan)            # reported, not touched

    code, out = cloud.manage("placement", "audit", "--verbose")
    assert code == 3
    assert f"Allocations for consumer UUID {orphan} on Resource Provider {rp} can be deleted" in out
    assert done in out and migration not in out and sid not in out
    assert "Processed 2 allocations." in out

    code, out = cloud.manage("placement", "audit", "--delete", "--verbose")
    assert code == 4
    assert f"Deleted allocations for consumer UUID {orphan} on Resource Provider {rp}" in out
    assert cloud.allocations(orphan) == {} and cloud.allocations(done) == {}
    assert cloud.allocations(sid)[rp]["resources"] == TINY
    assert cloud.allocations(migration)[rp]["resources"] == TINY
    assert cloud.usages()[host] == {rc: n + TINY[rc] for rc, n in before.items()}

    assert cloud.manage("placement", "audit", "--delete") == (0, "")


def test_audit_deletes_only_the_audited_providers_share(cloud):
    """--resource_provider: one provider; a consumer spread over two keeps the other part."""
    sid = cloud.boot()
    host = cloud.host_of(sid)
    rp, bw = cloud.provider(host), cloud.provider(f"{host}:Open vSwitch agent:physnet0")
    consumer = str(uuid.uuid4())
    cloud.aio.placement.put_allocations(consumer, {
        rp: {"resources": TINY}, bw: {"resources": {"NET_BW_EGR_KILOBIT_PER_SEC": 10}}}, "p", "u")

    code, _ = cloud.manage("placement", "audit", "--resource_provider", rp, "--delete")
    assert code == 4
    assert {k: v["resources"] for k, v in cloud.allocations(consumer).items()} == {
        bw: {"NET_BW_EGR_KILOBIT_PER_SEC": 10}}
    assert cloud.manage("placement", "audit", "--resource_provider", rp)[0] == 0
    assert cloud.manage("placement", "audit", "--delete")[0] == 4
    assert cloud.allocations(consumer) == {}
    assert cloud.usages()[f"{host}:Open vSwitch agent:physnet0"]["NET_BW_EGR_KILOBIT_PER_SEC"] == 0


def test_audit_of_an_unknown_provider_is_invalid_input(cloud):
    missing = str(uuid.uuid4())
    code, out = cloud.manage("placement", "audit", "--resource_provider", missing)
    assert code == 127
    assert f"Resource provider with UUID {missing} does not exist." in out


def test_audit_leaves_allocations_of_other_classes_alone(cloud):
    """A consumer holding no compute class (another service's) is not the audit's business."""
    pl = cloud.aio.placement
    pl.ensure_resource_class("CUSTOM_FOREIGN")
    rp = pl.create_resource_provider(name="foreign")["uuid"]
    pl.set_inventory(rp, {"CUSTOM_FOREIGN": {"total": 10}})
    consumer = _orphan(cloud, rp, {"CUSTOM_FOREIGN": 3})
    assert cloud.manage("placement", "audit", "--delete") == (0, "")
    assert cloud.allocations(consumer)[rp]["resources"] == {"CUSTOM_FOREIGN": 3}
