"""Building a server on a compute host (bound into ComputeManager).

    build_and_run_instance   the resource claim (NUMA cells, PCI devices, a device for
                             each SR-IOV port), the ports bound here, the volumes made and
                             attached, the guest spawned: ACTIVE

The conductor chose this host and claimed it in Placement; a build that fails
here gives back everything it made on this host and raises
RescheduledException (the conductor tries an alternate) or, for a server
deleted meanwhile, BuildAbortException.
"""
import contextlib
import json
import logging
import uuid as uuid_mod

from novella.compute import cleanup
from novella.compute import connections
from novella.compute import exceptions as exc_mod
from novella.compute import guest
from novella.compute import pci
from novella.compute import states as vm_states
from novella.compute import teardown
from novella.compute.guest_actions import injected
from novella.compute.states import power_state, task_states
from novella.compute import volume_ops
from novella.db import cell_models as m
from novella.db import records
from novella.rpc import notifications

LOG = logging.getLogger(__name__)


def _store_bdms(compute, instance_uuid, block_device_mappings):
    """The instance's BDM rows, first adding those the caller passed if the cell has none.

    An empty list passed (not None) says the build has none: nothing to read.
    """
    if block_device_mappings == []:
        return []
    bdms = guest.bdms_of(compute, instance_uuid)
    if not block_device_mappings or bdms:
        return bdms
    fields = {c.name for c in m.BlockDeviceMapping.__table__.columns} - {"id", "deleted"}
    with compute.cell_db.session(write=True) as s:
        for bdm in block_device_mappings:
            row = {k: v for k, v in bdm.items() if k in fields}
            if "uuid" in bdm:
                row["uuid"] = bdm["uuid"]
            else:
                row["uuid"] = str(uuid_mod.uuid4())
            s.add(m.BlockDeviceMapping(instance_uuid=instance_uuid, **{
                k: v for k, v in row.items() if k not in ("instance_uuid", "created_at",
                                                         "updated_at", "deleted_at")}))
    return guest.bdms_of(compute, instance_uuid)


def build_and_run_instance(compute, ctxt, instance_uuid, request_spec=None, node=None,
                           allocations=None, requested_networks=None,
                           block_device_mappings=None, port_profiles=None,
                           injected_files=None, **kwargs):
    """Claim, network, volumes, spawn; on failure clean up and ask for a reschedule.

    Raises RescheduledException (this host could not build it) or
    BuildAbortException (the server was deleted meanwhile).
    """
    request_spec = request_spec or {}
    with guest.locked(compute, instance_uuid):
        try:
            inst = guest.get(compute, instance_uuid)
        except records.InstanceNotFound as exc:
            raise exc_mod.BuildAbortException(instance_uuid=instance_uuid, reason=str(exc))
        flavor = records.flavor_of(inst) or request_spec.get("flavor")
        image_meta = request_spec.get("image") or {"id": inst.image_ref, "properties": {}}
        done = {"claim": None, "network": False, "attachments": [], "spawned": False}
        try:
            # The action is finished by the conductor when this call returns.
            with records.action_event(compute.cell_db, ctxt, instance_uuid,
                                      records.BUILD_EVENT, host=compute.host):
                guest.notify(compute, ctxt, inst, notifications.event_type(notifications.CREATE,
                                                                  "start"), flavor=flavor)
                inst = _build(compute, ctxt, inst, flavor, image_meta, requested_networks,
                                   block_device_mappings, port_profiles, done,
                                   request_spec.get("security_groups"), injected_files)
        except Exception as exc:  # noqa: BLE001 - every failure is cleaned up here
            raise _build_failed(compute, ctxt, instance_uuid, flavor, exc, done,
                                     requested_networks) from exc
        guest.notify(compute, ctxt, inst, notifications.event_type(notifications.CREATE, "end"),
                     flavor=flavor, network_info=guest.network_info_of(inst))
        return {"instance_uuid": instance_uuid, "host": compute.host, "node": compute.rt.nodename,
                "vm_state": inst.vm_state}


def _build(compute, ctxt, inst, flavor, image_meta, requested_networks,
           block_device_mappings, port_profiles, done, security_groups=None,
           injected_files=None):
    uuid = inst.uuid
    done["claim"] = compute.rt.instance_claim(
        ctxt, inst, flavor, ports=connections.sriov_ports(compute, ctxt, requested_networks=requested_networks),
        port_profiles=port_profiles, expected_task_state=(task_states.SCHEDULING, None),
        expected_vm_state=vm_states.BUILDING, task_state=task_states.NETWORKING)
    # The ports' devices, in their bindings.
    port_profiles = pci.with_devices(port_profiles, done["claim"].pci_devices)
    # What the claim wrote, on the copy the driver is told about (the
    # task-state steps below change nothing it reads).
    inst.host, inst.node, inst.launched_on = compute.host, compute.rt.nodename, compute.host
    inst.task_state = task_states.NETWORKING
    network_info = connections.allocate_network(compute, ctxt, inst, requested_networks, port_profiles,
                                          security_groups)
    done["network"] = True
    bdms = volume_ops.create_volumes(compute, ctxt, inst, _store_bdms(compute, uuid, block_device_mappings))
    # block_device_mapping only while there are volumes to attach.
    has_volumes = any(guest.is_volume(b) for b in bdms)
    records.update_instance(compute.cell_db, uuid, expected_task_state=task_states.NETWORKING,
                            task_state=(task_states.BLOCK_DEVICE_MAPPING if has_volumes
                                        else task_states.SPAWNING),
                            network_info=network_info, reload=False)
    if has_volumes:
        connections.attach_volumes(compute, ctxt, inst, done["attachments"], bdms)
        records.update_instance(compute.cell_db, uuid,
                                expected_task_state=task_states.BLOCK_DEVICE_MAPPING,
                                task_state=task_states.SPAWNING, reload=False)
    done["spawned"] = True  # from here a half-made guest may exist
    compute.driver.spawn(ctxt, guest.instance_dict(inst, flavor), image_meta,
                      network_info=network_info,
                      block_device_info=guest.block_device_info(compute, uuid, bdms),
                      **injected(injected_files))
    now = records.utcnow()
    active = {"vm_state": vm_states.ACTIVE, "task_state": None, "launched_at": now,
              "power_state": compute.driver.get_info({"uuid": uuid})["state"],
              "updated_at": now}
    records.update_instance(compute.cell_db, uuid, expected_task_state=task_states.SPAWNING,
                            reload=False, **active)
    if inst.info_cache is None:  # no cache row read with it: read the instance back
        return guest.get(compute, uuid)
    # The copy in hand, as the row now is (for the create.end notification).
    for column, value in active.items():
        setattr(inst, column, value)
    inst.info_cache.network_info = json.dumps(network_info or [])
    return inst


def _build_failed(compute, ctxt, instance_uuid, flavor, exc, done, requested_networks):
    """Undo what this host made for the build; return the exception to raise."""
    inst = None
    with contextlib.suppress(records.InstanceNotFound):
        inst = guest.get(compute, instance_uuid)
    # Deleted meanwhile, or its task state says someone else owns it now.
    aborted = inst is None or isinstance(exc, (records.InstanceNotFound,
                                               records.UnexpectedTaskStateError))
    teardown.give_back(compute, ctxt, inst or instance_uuid,
                       guest=(teardown.GUEST,) if done["spawned"] else (),
                       attachments=done["attachments"],
                       ports=teardown.DEALLOCATE if done["network"] else None,
                       requested_networks=requested_networks, claim=done["claim"])
    if inst is not None:
        guest.notify(compute, ctxt, inst, notifications.event_type(notifications.CREATE, "error"),
                     fault=exc, flavor=flavor)
    reason = str(exc) or type(exc).__name__
    if aborted:
        return exc_mod.BuildAbortException(instance_uuid=instance_uuid, reason=reason)
    with cleanup.step("reset for reschedule"):
        records.add_fault(compute.cell_db, instance_uuid, exc, host=compute.host)
        with compute.cell_db.session(write=True) as s:
            row = records.get_instance(s, instance_uuid)
            if row.vm_state == vm_states.BUILDING:
                row.task_state = task_states.SCHEDULING
                row.host = row.node = row.launched_on = None
                row.power_state = power_state.NOSTATE
    return exc_mod.RescheduledException(instance_uuid=instance_uuid, reason=reason)

