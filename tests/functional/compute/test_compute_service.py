import os

import pytest
import sqlalchemy as sa

from novella.compute import SERVICE_VERSION
from novella.compute import exceptions
from novella.compute.states import power_state, task_states
from novella.db import cell_models as m
from novella.virt import simulated

from tests.functional.compute.conftest import FLAVOR

PCI_FLAVOR = dict(FLAVOR, extra_specs={"pci_passthrough:alias": "nic:1", "hw:numa_nodes": "1"})


@pytest.fixture(autouse=True)
def pci_alias():
    from novella.conf import CONF
    CONF.set_override("alias", ['{"name": "nic", "vendor_id": "8086", "product_id": "1520"}'],
                      group="pci")
    yield
    CONF.clear_override("alias", group="pci")


def _files(env, host, inst_uuid):
    path = os.path.join(env.instances_path, host, inst_uuid)
    return sorted(os.listdir(path)) if os.path.isdir(path) else []


def test_hosts_report_services_nodes_and_providers(env):
    for host in (env.host1, env.host2):
        svc = env.service(host)
        assert (svc.binary, svc.topic, svc.version) == ("nova-compute", "compute", SERVICE_VERSION)
        with env.cell_db.session() as s:
            node = s.scalars(sa.select(m.ComputeNode).where(m.ComputeNode.host == host)).one()
        assert (node.hypervisor_hostname, node.vcpus, node.service_id) == (host, 16, svc.id)
        rp = env.placement.get_resource_provider(node.uuid)
        assert rp["name"] == host
        _gen, inv = env.placement.get_inventories(node.uuid)
        assert inv["VCPU"]["total"] == 16 and inv["VCPU"]["allocation_ratio"] == 4.0
        assert inv["MEMORY_MB"]["total"] == 32768 and inv["MEMORY_MB"]["reserved"] == 512
        assert inv["DISK_GB"]["total"] == 1000 and inv["DISK_GB"]["max_unit"] == 1000
        _gen, traits = env.placement.get_traits(node.uuid)
        assert "COMPUTE_NODE" in traits and "COMPUTE_STATUS_DISABLED" not in traits


def test_build_stop_start_reboot_terminate(env):
    inst_uuid = env.make_instance()
    result = env.build(env.host1, inst_uuid)
    assert result["host"] == env.host1
    inst = env.instance(inst_uuid)
    assert (inst.vm_state, inst.task_state, inst.power_state) == ("active", None, power_state.RUNNING)
    assert (inst.host, inst.node, inst.launched_on) == (env.host1, env.host1, env.host1)
    assert inst.launched_at is not None and inst.info_cache.network_info == "[]"
    assert _files(env, env.host1, inst_uuid) == ["console.log", "disk", "disk.local",
                                                 "disk.swap", "domain.json"]
    assert env.usages(env.host1) == {"VCPU": 2, "MEMORY_MB": 512, "DISK_GB": 11}
    assert env.usages(env.host2) == {"VCPU": 0, "MEMORY_MB": 0, "DISK_GB": 0}
    assert env.events(inst_uuid) == [("compute__do_build_and_run_instance", "Success", env.host1)]
    assert [(p, t) for p, t, _ in env.notifications] == [
        (f"nova-compute:{env.host1}", "instance.create.start"),
        (f"nova-compute:{env.host1}", "instance.create.end")]
    assert env.notifications[-1][2]["nova_object.data"]["state"] == "active"
    env.managers[env.host1].update_available_resource()
    with env.cell_db.session() as s:
        node = s.scalars(sa.select(m.ComputeNode).where(m.ComputeNode.host == env.host1)).one()
    assert (node.vcpus_used, node.memory_mb_used, node.local_gb_used, node.running_vms) == (2, 512, 11, 1)

    env.set_task_state(inst_uuid, task_states.POWERING_OFF)
    env.compute.stop_instance(env.ctxt, env.host1, inst_uuid)
    env.transport.wait_idle()
    inst = env.instance(inst_uuid)
    assert (inst.vm_state, inst.task_state, inst.power_state) == ("stopped", None, power_state.SHUTDOWN)
    assert simulated.driver_for(env.host1).get_info({"uuid": inst_uuid})["state"] == power_state.SHUTDOWN

    env.set_task_state(inst_uuid, task_states.POWERING_ON)
    env.compute.start_instance(env.ctxt, env.host1, inst_uuid)
    env.transport.wait_idle()
    inst = env.instance(inst_uuid)
    assert (inst.vm_state, inst.task_state, inst.power_state) == ("active", None, power_state.RUNNING)

    for kind, pending in (("SOFT", task_states.REBOOTING), ("HARD", task_states.REBOOTING_HARD)):
        env.set_task_state(inst_uuid, pending)
        env.compute.reboot_instance(env.ctxt, env.host1, inst_uuid, reboot_type=kind)
        env.transport.wait_idle()
        inst = env.instance(inst_uuid)
        assert (inst.vm_state, inst.task_state, inst.power_state) == ("active", None, power_state.RUNNING)
    events = [t for _, t, _ in env.notifications]
    assert events[2:] == ["instance.power_off.start", "instance.power_off.end",
                          "instance.power_on.start", "instance.power_on.end",
                          "instance.reboot.start", "instance.reboot.end",
                          "instance.reboot.start", "instance.reboot.end"]

    env.set_task_state(inst_uuid, task_states.DELETING)
    env.compute.terminate_instance(env.ctxt, env.host1, inst_uuid)
    env.transport.wait_idle()
    inst = env.instance(inst_uuid)
    assert inst.deleted == inst.id and inst.vm_state == "deleted" and inst.task_state is None
    assert inst.terminated_at is not None and inst.deleted_at is not None
    assert env.placement.get_allocations(inst_uuid)["allocations"] == {}
    assert env.usages(env.host1) == {"VCPU": 0, "MEMORY_MB": 0, "DISK_GB": 0}
    assert _files(env, env.host1, inst_uuid) == []
    assert [e[0] for e in env.events(inst_uuid)][-1] == "compute_terminate_instance"
    assert all(result == "Success" for _, result, _ in env.events(inst_uuid))
    assert [t for _, t, _ in env.notifications][-4:] == [
        "instance.delete.start", "instance.shutdown.start", "instance.shutdown.end",
        "instance.delete.end"]
    # a second delete finds nothing to do
    env.compute.terminate_instance(env.ctxt, env.host1, inst_uuid)
    env.transport.wait_idle()


def test_spawn_fault_reschedules_with_everything_cleaned_up(env):
    inst_uuid = env.make_instance(PCI_FLAVOR)
    simulated.inject_fault(env.host1, "spawn", instance_uuid=inst_uuid)
    with pytest.raises(exceptions.RescheduledException) as err:
        env.build(env.host1, inst_uuid, PCI_FLAVOR)
    assert err.value.instance_uuid == inst_uuid
    inst = env.instance(inst_uuid)
    assert (inst.vm_state, inst.task_state, inst.host, inst.node) == ("building", "scheduling", None, None)
    assert inst.extra.pci_devices is None and inst.extra.numa_topology is None
    assert _files(env, env.host1, inst_uuid) == []
    usage = env.managers[env.host1].rt.usage()
    assert usage["pci"] == [] and usage["running_vms"] == 0
    assert all(c["vcpus"] == 0 for c in usage["numa"].values())
    assert [f.host for f in env.faults(inst_uuid)] == [env.host1]
    assert env.events(inst_uuid) == [("compute__do_build_and_run_instance", "Error", env.host1)]
    assert [t for _, t, _ in env.notifications][-1] == "instance.create.error"

    # the conductor frees the claim and tries the alternate
    env.placement.delete_allocations(inst_uuid)
    env.build(env.host2, inst_uuid, PCI_FLAVOR)
    inst = env.instance(inst_uuid)
    assert (inst.vm_state, inst.host) == ("active", env.host2)
    assert env.managers[env.host2].rt.usage()["pci"] != []
    assert env.usages(env.host1)["VCPU"] == 0 and env.usages(env.host2)["VCPU"] == 2


def test_pci_claim_failure_reschedules(env):
    greedy = dict(FLAVOR, extra_specs={"pci_passthrough:alias": "nic:2"})
    first = env.make_instance(greedy)
    env.build(env.host1, first, greedy)
    assert len(env.managers[env.host1].rt.usage()["pci"]) == 2
    second = env.make_instance(PCI_FLAVOR)
    with pytest.raises(exceptions.RescheduledException, match="PCI"):
        env.build(env.host1, second, PCI_FLAVOR)
    inst = env.instance(second)
    assert inst.host is None and _files(env, env.host1, second) == []
    assert len(env.managers[env.host1].rt.usage()["pci"]) == 2


def test_build_of_a_deleted_server_is_aborted(env):
    inst_uuid = env.make_instance()
    env.claim(inst_uuid, env.host1)
    with env.cell_db.session(write=True) as s:
        s.execute(sa.update(m.Instance).where(m.Instance.uuid == inst_uuid).values(deleted=1))
    with pytest.raises(exceptions.BuildAbortException):
        env.compute.build_and_run_instance(env.ctxt, env.host1, inst_uuid, {"flavor": FLAVOR})
    assert _files(env, env.host1, inst_uuid) == []


def test_failed_power_off_keeps_state_and_records_fault(env):
    inst_uuid = env.make_instance()
    env.build(env.host1, inst_uuid)
    simulated.inject_fault(env.host1, "power_off", exc=RuntimeError("stuck"))
    env.set_task_state(inst_uuid, task_states.POWERING_OFF)
    env.compute.stop_instance(env.ctxt, env.host1, inst_uuid)
    env.transport.wait_idle()
    inst = env.instance(inst_uuid)
    assert (inst.vm_state, inst.task_state, inst.power_state) == ("active", None, power_state.RUNNING)
    assert [f.message for f in env.faults(inst_uuid)] == ["stuck"]
    assert env.events(inst_uuid)[-1] == ("compute_stop_instance", "Error", env.host1)
    # instance.power_off has no .error phase (as the reference's): it started, never
    # ended, and the host told what failed as compute.exception.
    sent = [t for _, t, _ in env.notifications]
    assert sent[-2:] == ["instance.power_off.start", "compute.exception"]
    assert "instance.power_off.end" not in sent


def test_failed_reboot_puts_server_in_error(env):
    inst_uuid = env.make_instance()
    env.build(env.host1, inst_uuid)
    simulated.inject_fault(env.host1, "reboot")
    env.set_task_state(inst_uuid, task_states.REBOOTING_HARD)
    env.compute.reboot_instance(env.ctxt, env.host1, inst_uuid, reboot_type="HARD")
    env.transport.wait_idle()
    inst = env.instance(inst_uuid)
    assert (inst.vm_state, inst.task_state) == ("error", None)
    assert len(env.faults(inst_uuid)) == 1


def test_heartbeat_updates_the_service_row(env):
    before = env.service(env.host1)
    mgr = env.managers[env.host1]
    mgr.heartbeat()
    mgr.heartbeat()
    after = env.service(env.host1)
    assert after.report_count == before.report_count + 2
    assert after.last_seen_up >= before.last_seen_up
    assert env.service(env.host2).report_count == before.report_count
    assert set(mgr.periodic_tasks) >= {"heartbeat", "update_available_resource"}


def test_heartbeat_of_many_hosts_in_one_statement(env):
    from novella.compute.manager import ComputeManager
    one, two = env.service(env.host1), env.service(env.host2)
    with env.cell_db.session(write=True) as s:  # host2's row is gone: it makes it again
        s.execute(sa.delete(m.Service).where(m.Service.host == env.host2))
    ComputeManager.heartbeat_hosts([env.managers[env.host1], env.managers[env.host2]])
    ComputeManager.heartbeat_hosts([env.managers[env.host1]])
    after = env.service(env.host1)
    assert after.report_count == one.report_count + 2
    assert after.last_seen_up >= one.last_seen_up
    assert after.updated_at is not None
    remade = env.service(env.host2)
    assert remade.report_count == 1 and remade.uuid != two.uuid


def test_disabled_service_reports_the_trait(env):
    with env.cell_db.session(write=True) as s:
        s.execute(sa.update(m.Service).where(m.Service.host == env.host1).values(disabled=True))
    env.managers[env.host1].update_available_resource()
    assert "COMPUTE_STATUS_DISABLED" in env.placement.get_traits(env.rp(env.host1))[1]
    assert "COMPUTE_STATUS_DISABLED" not in env.placement.get_traits(env.rp(env.host2))[1]
    assert env.compute.set_host_enabled(env.ctxt, env.host1, True) == "enabled"
    assert "COMPUTE_STATUS_DISABLED" not in env.placement.get_traits(env.rp(env.host1))[1]


def test_restart_finds_node_and_claims_again(env):
    inst_uuid = env.make_instance(PCI_FLAVOR)
    env.build(env.host1, inst_uuid, PCI_FLAVOR)
    old = env.managers[env.host1]
    rp = old.rt.provider_uuid
    old.stop_service()
    again = env.start_host(env.host1)
    assert again.rt.provider_uuid == rp
    assert again.rt.usage()["pci"] == old.rt.usage()["pci"] != []
    assert again.driver.get_info({"uuid": inst_uuid})["state"] == power_state.RUNNING


def test_restart_destroys_guests_of_servers_deleted_meanwhile(env):
    kept, gone = env.make_instance(), env.make_instance()
    env.build(env.host1, kept)
    env.build(env.host1, gone)
    env.managers[env.host1].stop_service()
    with env.cell_db.session(write=True) as s:
        s.execute(sa.update(m.Instance).where(m.Instance.uuid == gone)
                  .values(deleted=m.Instance.id, vm_state="deleted"))
    env.start_host(env.host1)
    assert _files(env, env.host1, gone) == []
    assert _files(env, env.host1, kept) != []


def test_power_state_sync_records_what_the_hypervisor_says_unless_a_task_runs(env):
    """A guest stopped behind the service's back is recorded as the hypervisor
    says, by each host's sync and by one sync of all the cell's hosts at once;
    a server in a task is left to its task."""
    off, busy, other = env.make_instance(), env.make_instance(), env.make_instance()
    for inst_uuid in (off, busy):
        env.build(env.host1, inst_uuid)
    env.build(env.host2, other)
    for inst_uuid, host in ((off, env.host1), (busy, env.host1), (other, env.host2)):
        env.managers[host].driver.power_off({"uuid": inst_uuid})
    with env.cell_db.session(write=True) as s:
        s.execute(sa.update(m.Instance).where(m.Instance.uuid == busy)
                  .values(task_state=task_states.REBOOTING))

    env.managers[env.host1].sync_power_states()
    assert [env.instance(u).power_state for u in (off, busy, other)] == [
        power_state.SHUTDOWN, power_state.RUNNING, power_state.RUNNING]

    env.managers[env.host1].driver.power_on(None, {"uuid": off})
    type(env.managers[env.host1]).sync_power_states_hosts(list(env.managers.values()))
    assert [env.instance(u).power_state for u in (off, busy, other)] == [
        power_state.RUNNING, power_state.RUNNING, power_state.SHUTDOWN]
    assert env.instance(busy).task_state == task_states.REBOOTING
