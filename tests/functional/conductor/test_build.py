"""Builds through the conductor and scheduler, asserted on every database and placement."""
import json

import sqlalchemy as sa

from novella.compute import states
from novella.db import cell_models as cm
from novella.db import cells as cells_mod

FLAVOR_USAGE = {"VCPU": 1, "MEMORY_MB": 1024, "DISK_GB": 10}


def _resources(allocations):
    return {rp: a["resources"] for rp, a in allocations.items()}


def test_build_lands_in_chosen_cell_with_allocation(cloud):
    cloud.add_host("cell1", "h1")
    (server,) = cloud.boot(tags=["web"], bdms=[{"source_type": "image", "destination_type": "local",
                                                 "boot_index": 0, "image_id": "img"}])
    assert cloud.mapping_cell(server) == "cell1"
    inst = cloud.instance(server)
    assert (inst.vm_state, inst.task_state, inst.host, inst.node) == (states.ACTIVE, None, "h1", "h1")
    assert (inst.memory_mb, inst.vcpus, inst.root_gb, inst.instance_type_id) == (1024, 1, 10, 1)
    assert inst.availability_zone == "nova"
    assert json.loads(inst.extra.flavor)["cur"]["name"] == "m1.small"
    assert {m.key: m.value for m in inst.metadata_items} == {"role": "test"}
    assert [t.tag for t in inst.tags] == ["web"]
    assert json.loads(inst.info_cache.network_info) == []
    assert [b.boot_index for b in cloud.rows("cell1", cm.BlockDeviceMapping, instance_uuid=server)] == [0]
    assert not cloud.build_request_exists(server)
    assert _resources(cloud.allocations(server)) == {cloud.nodes["h1"]: FLAVOR_USAGE}
    assert cloud.usages("h1") == FLAVOR_USAGE
    call = cloud.computes["h1"].calls[0]
    assert call["node"] == "h1" and _resources(call["allocations"]) == {cloud.nodes["h1"]: FLAVOR_USAGE}
    # The create action, ended, with the compute's event only (the conductor's
    # part is an event when it fails), as the reference shows a build.
    (action,) = cloud.rows("cell1", cm.InstanceAction, instance_uuid=server)
    assert action.action == "create" and action.finish_time is not None
    assert action.message is None
    assert [(e.event, e.result) for e in action.events] == [
        ("compute__do_build_and_run_instance", "Success")]
    assert cloud.rows("cell0", cm.Instance) == []


def test_builds_spread_over_cells_and_usages_match_flavors(cloud):
    cloud.add_host("cell1", "h1")
    cloud.add_host("cell2", "h2")
    servers = cloud.boot(count=4)
    by_host = {}
    for s in servers:
        inst = cloud.instance(s)
        assert inst.vm_state == states.ACTIVE
        assert cloud.mapping_cell(s) == {"h1": "cell1", "h2": "cell2"}[inst.host]
        assert _resources(cloud.allocations(s)) == {cloud.nodes[inst.host]: FLAVOR_USAGE}
        by_host[inst.host] = by_host.get(inst.host, 0) + 1
    # RAM weigher spreads: two each.
    assert by_host == {"h1": 2, "h2": 2}
    for host in ("h1", "h2"):
        assert cloud.usages(host) == {rc: 2 * n for rc, n in FLAVOR_USAGE.items()}


def test_no_valid_host_buries_in_cell0_with_fault_and_no_allocation(cloud):
    cloud.add_host("cell1", "h1", memory_mb=512)
    (server,) = cloud.boot()
    assert cloud.mapping_cell(server) == "cell0"
    inst = cloud.instance(server)
    assert (inst.vm_state, inst.task_state, inst.host) == (states.ERROR, None, None)
    (fault,) = cloud.rows("cell0", cm.InstanceFault, instance_uuid=server)
    assert fault.code == 500 and fault.message.startswith("No valid host was found.")
    (action,) = cloud.rows("cell0", cm.InstanceAction, instance_uuid=server)
    assert [(e.event, e.result) for e in action.events] == [
        ("conductor_schedule_and_build_instances", "Error")]
    assert json.loads(inst.extra.flavor)["cur"]["memory_mb"] == 1024
    assert not cloud.build_request_exists(server)
    assert cloud.allocations(server) == {}
    assert cloud.usages("h1") == {"VCPU": 0, "MEMORY_MB": 0, "DISK_GB": 0}
    assert cloud.rows("cell1", cm.Instance) == []
    ((publisher, event_type, payload),) = cloud.notifications
    assert event_type == "compute_task.build_instances.error"
    data = payload["nova_object.data"]
    assert data["instance_uuid"] == server and data["state"] == "error"
    assert data["reason"]["nova_object.data"]["exception"] == "NoValidHost"


def test_multi_create_without_room_for_all_leaves_nothing_claimed(cloud):
    cloud.add_host("cell1", "h1", vcpus=1)
    servers = cloud.boot(count=2)
    for s in servers:
        assert cloud.mapping_cell(s) == "cell0"
        assert cloud.instance(s).vm_state == states.ERROR
        assert cloud.allocations(s) == {}
    assert cloud.usages("h1")["VCPU"] == 0


def test_reschedule_frees_failed_claim_and_claims_alternate(cloud):
    cloud.add_host("cell1", "h1", memory_mb=8192)   # most free RAM: chosen first
    cloud.add_host("cell1", "h2")
    cloud.add_host("cell2", "h3")                   # another cell: never an alternate
    cloud.computes["h1"].fail = True
    (server,) = cloud.boot()
    inst = cloud.instance(server)
    assert (inst.vm_state, inst.host, cloud.mapping_cell(server)) == (states.ACTIVE, "h2", "cell1")
    assert len(cloud.computes["h1"].calls) == 1 and len(cloud.computes["h2"].calls) == 1
    assert cloud.computes["h3"].calls == []
    assert _resources(cloud.allocations(server)) == {cloud.nodes["h2"]: FLAVOR_USAGE}
    assert cloud.usages("h1") == {"VCPU": 0, "MEMORY_MB": 0, "DISK_GB": 0}
    assert cloud.usages("h2") == FLAVOR_USAGE
    (action,) = cloud.rows("cell1", cm.InstanceAction, instance_uuid=server)
    assert [(e.event, e.result, e.host) for e in action.events] == [
        ("compute__do_build_and_run_instance", "Error", "h1"),
        ("compute__do_build_and_run_instance", "Success", "h2")]
    assert action.finish_time is not None
    # The failure counts against h1 for the next build: BuildFailureWeigher.
    (second,) = cloud.boot()
    assert cloud.instance(second).host in ("h2", "h3")
    assert len(cloud.computes["h1"].calls) == 1


def test_max_attempts_exhausted_leaves_error_and_no_allocation(make_cloud):
    cloud = make_cloud({("scheduler", "max_attempts"): 2})
    for host in ("h1", "h2", "h3"):
        cloud.add_host("cell1", host)
        cloud.computes[host].fail = True
    (server,) = cloud.boot()
    inst = cloud.instance(server)
    assert cloud.mapping_cell(server) == "cell1"
    assert (inst.vm_state, inst.task_state, inst.host) == (states.ERROR, None, None)
    assert sum(len(c.calls) for c in cloud.computes.values()) == 2
    (fault,) = cloud.rows("cell1", cm.InstanceFault, instance_uuid=server)
    assert "Exceeded maximum number of retries" in fault.message
    assert cloud.allocations(server) == {}
    for host in ("h1", "h2", "h3"):
        assert cloud.usages(host)["VCPU"] == 0
    (action,) = cloud.rows("cell1", cm.InstanceAction, instance_uuid=server)
    assert action.message == "Error" and action.finish_time is not None
    # The conductor's part failed: its event, after the compute's two, says why.
    assert [(e.event, e.result, e.host) for e in action.events] == [
        ("compute__do_build_and_run_instance", "Error", "h1"),
        ("compute__do_build_and_run_instance", "Error", "h2"),
        ("conductor_schedule_and_build_instances", "Error", None)]
    assert "MaxRetriesExceeded" in action.events[-1].traceback


def test_affinity_group_lands_on_one_host_and_records_members(cloud):
    for host in ("h1", "h2"):
        cloud.add_host("cell1", host)
    group = cloud.add_group("affinity")
    servers = cloud.boot(count=3, group=group)
    assert {cloud.instance(s).host for s in servers} == {cloud.instance(servers[0]).host}
    later = cloud.boot(group=group)
    assert cloud.instance(later[0]).host == cloud.instance(servers[0]).host
    from novella.db import api_models as am
    import sqlalchemy as sa
    with cloud.api_db.session() as s:
        members = set(s.scalars(sa.select(am.InstanceGroupMember.instance_uuid)))
    assert members == set(servers + later)


def test_anti_affinity_spreads_then_refuses(cloud):
    for host in ("h1", "h2"):
        cloud.add_host("cell1", host)
    group = cloud.add_group("anti-affinity")
    servers = cloud.boot(count=2, group=group)
    assert {cloud.instance(s).host for s in servers} == {"h1", "h2"}
    (third,) = cloud.boot(group=group)
    assert cloud.mapping_cell(third) == "cell0"
    (fault,) = cloud.rows("cell0", cm.InstanceFault, instance_uuid=third)
    assert "ServerGroupAntiAffinityFilter" in fault.message
    assert cloud.allocations(third) == {}


def test_availability_zone(cloud):
    for cell, host in (("cell1", "h1"), ("cell2", "h2")):
        cloud.add_host(cell, host)
    cloud.add_aggregate("agg-az2", ["h2"], {"availability_zone": "az2"})
    servers = cloud.boot(count=2, az="az2")
    for s in servers:
        inst = cloud.instance(s)
        assert (inst.host, inst.availability_zone, cloud.mapping_cell(s)) == ("h2", "az2", "cell2")
    (nowhere,) = cloud.boot(az="az9")
    assert cloud.mapping_cell(nowhere) == "cell0"


def test_availability_zone_through_placement(make_cloud):
    cloud = make_cloud({("scheduler", "query_placement_for_availability_zone"): True,
                        ("filter_scheduler", "enabled_filters"): ["ComputeFilter"]})
    cloud.add_host("cell1", "h1", memory_mb=8192)
    cloud.add_host("cell2", "h2")
    cloud.add_aggregate("agg-az2", ["h2"], {"availability_zone": "az2"})
    (server,) = cloud.boot(az="az2")
    assert cloud.instance(server).host == "h2"


def test_disabled_and_down_hosts_are_skipped(cloud):
    cloud.add_host("cell1", "down", memory_mb=8192, up=False)
    cloud.add_host("cell1", "ok")
    (server,) = cloud.boot()
    assert cloud.instance(server).host == "ok"
    assert cloud.computes["down"].calls == []


def _disable(cloud, cell_name, host):
    """The host's service disabled, and its provider marked, as os-services and the host do."""
    db = cells_mod.cell_database(cloud.cells[cell_name])
    with db.session(write=True) as s:
        s.execute(sa.update(cm.Service).where(cm.Service.host == host).values(disabled=True))
    generation, traits = cloud.placement.get_traits(cloud.nodes[host])
    cloud.placement.set_traits(cloud.nodes[host], traits + ["COMPUTE_STATUS_DISABLED"])


def test_disabled_hosts_do_not_fill_the_candidate_limit(make_cloud):
    """Placement leaves disabled hosts out, so the max_placement_results
    candidates it answers are hosts that can build, even when the disabled
    ones come first in its order."""
    cloud = make_cloud({("scheduler", "max_placement_results"): 2})
    for host in ("off1", "off2", "on1"):
        cloud.add_host("cell1", host)
    _disable(cloud, "cell1", "off1")
    _disable(cloud, "cell1", "off2")
    (server,) = cloud.boot()
    assert cloud.mapping_cell(server) == "cell1"
    assert cloud.instance(server).host == "on1"
    assert _resources(cloud.allocations(server)) == {cloud.nodes["on1"]: FLAVOR_USAGE}
    nothing = {rc: 0 for rc in FLAVOR_USAGE}
    assert cloud.usages("off1") == nothing and cloud.usages("off2") == nothing
    assert cloud.computes["off1"].calls == [] and cloud.computes["off2"].calls == []


def test_a_forced_host_bypasses_the_filters_but_not_its_disabled_service(cloud):
    """An administrator's forced host bypasses the filters; a disabled one is still left
    out by placement (the reference's compute_status_filter applies to forced hosts
    too): no valid host, the server buried in cell0 holding nothing."""
    cloud.add_host("cell1", "off")
    cloud.add_host("cell1", "on")
    _disable(cloud, "cell1", "off")
    (refused,) = cloud.boot(force_hosts=["off"])
    assert cloud.mapping_cell(refused) == "cell0"
    assert cloud.instance(refused).vm_state == states.ERROR
    assert cloud.allocations(refused) == {}
    assert cloud.usages("off") == {rc: 0 for rc in FLAVOR_USAGE}
    (server,) = cloud.boot(force_hosts=["on"])
    assert cloud.instance(server).host == "on"
    assert _resources(cloud.allocations(server)) == {cloud.nodes["on"]: FLAVOR_USAGE}


def test_requested_destination_host(cloud):
    for cell, host in (("cell1", "h1"), ("cell2", "h2")):
        cloud.add_host(cell, host)
    (server,) = cloud.boot(requested_destination={"host": "h2", "node": None, "cell_uuid": None})
    assert cloud.instance(server).host == "h2"
    (other,) = cloud.boot(requested_destination={"host": None, "node": None,
                                                  "cell_uuid": cloud.cells["cell1"].uuid})
    assert cloud.instance(other).host == "h1"


def test_required_trait_in_flavor(cloud):
    cloud.add_host("cell1", "plain", memory_mb=8192)
    cloud.add_host("cell2", "fast", traits=["CUSTOM_FAST"])
    flavor = {"id": 2, "flavorid": "2", "name": "fast", "memory_mb": 512, "vcpus": 1,
              "root_gb": 1, "ephemeral_gb": 0, "swap": 0,
              "extra_specs": {"trait:CUSTOM_FAST": "required"}}
    (server,) = cloud.boot(flavor=flavor)
    assert cloud.instance(server).host == "fast"


def test_build_request_deleted_meanwhile_rolls_back(cloud, monkeypatch):
    """The user deletes the server while it is scheduled: nothing is left behind."""
    cloud.add_host("cell1", "h1")
    real = cloud.scheduler.select_destinations

    def select_then_user_deletes(ctxt, request_spec, instance_uuids, return_alternates=True):
        result = real(ctxt, request_spec, instance_uuids, return_alternates)
        from novella.db import api_models as am
        import sqlalchemy as sa
        with cloud.api_db.session(write=True) as s:
            s.execute(sa.delete(am.BuildRequest))
        return result

    monkeypatch.setattr(cloud.scheduler, "select_destinations", select_then_user_deletes)
    (server,) = cloud.boot()
    inst = cloud.instance(server, "cell1")
    assert inst.deleted and inst.vm_state == states.DELETED
    assert cloud.mapping_cell(server) is None
    assert cloud.allocations(server) == {}
    assert cloud.usages("h1")["VCPU"] == 0
    assert cloud.computes["h1"].calls == []


def test_server_deleted_during_build_is_not_rescheduled(cloud):
    cloud.add_host("cell1", "h1", memory_mb=8192)
    cloud.add_host("cell1", "h2")
    cloud.computes["h1"].abort = True
    (server,) = cloud.boot()
    assert cloud.computes["h2"].calls == []
    inst = cloud.instance(server)
    assert inst.vm_state == states.BUILDING  # the delete, not the build, decides its fate
    assert cloud.rows("cell1", cm.InstanceFault, instance_uuid=server) == []
    assert cloud.allocations(server) == {}
    assert cloud.usages("h1")["VCPU"] == 0


def test_soft_anti_affinity_outweighs_free_ram(make_cloud):
    cloud = make_cloud({("filter_scheduler", "weight_classes"): [
                            "RAMWeigher", "ServerGroupSoftAntiAffinityWeigher"],
                        ("filter_scheduler", "soft_anti_affinity_weight_multiplier"): 2.0})
    cloud.add_host("cell1", "roomy", memory_mb=8192)
    cloud.add_host("cell2", "small", memory_mb=4096)
    group = cloud.add_group("soft-anti-affinity")
    (first,) = cloud.boot(group=group)
    (second,) = cloud.boot(group=group)   # a separate request: members read back from the cells
    assert [cloud.instance(s).host for s in (first, second)] == ["roomy", "small"]
    (third,) = cloud.boot()               # no group: free RAM decides
    assert cloud.instance(third).host == "roomy"
