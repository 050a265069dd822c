"""Shelve, shelve offload and unshelve on a compute host (bound into ComputeManager).

    shelve_instance           the server's host   power off; an image-backed server's root
                                                  disk uploaded as its shelved image;
                                                  vm_state shelved (offloaded at once when
                                                  [DEFAULT] shelved_offload_time is 0, by
                                                  poll_shelved_instances after that many
                                                  seconds when it is positive)
    shelve_offload_instance   the server's host   guest destroyed, ports unbound, volumes
                                                  disconnected (a reserved attachment each),
                                                  allocation deleted: shelved_offloaded,
                                                  on no host
    unshelve_instance         the server's host   (shelved) power on
                              a scheduled host    (offloaded) claim, ports bound naming this
                                                  host's providers, volumes connected, the
                                                  guest spawned from the shelved image

A failed unshelve gives back everything it took on this host and raises
RescheduledException, so the conductor can try an alternate; the server stays
shelved_offloaded until one succeeds. One this host's service stopped in the
middle of is given back the same way when the service starts again
(``abandon_unshelve``, from novella/compute/recovery.py); the conductor that
takes the operation over then undoes it (the server stays shelved_offloaded,
with a fault).
"""
import datetime
import json

import sqlalchemy as sa

from novella.compute import cleanup
from novella.compute import pci
from novella.compute import exceptions as exc_mod
from novella.compute import states as vm_states
from novella.compute.states import power_state, task_states
from novella.compute import steps
from novella.compute import teardown
from novella.compute import volume_ops
from novella.compute import connections
from novella.compute import guest
from novella.rpc import notifications
from novella.context import get_admin_context
from novella.db import cell_models as m
from novella.db import records


def shelve_instance(compute, ctxt, instance_uuid, image_id=None, clean_shutdown=True):
    """Power off and keep the root disk as image ``image_id`` (image-backed servers)."""
    try:
        with steps.step(compute, ctxt, instance_uuid, "compute_shelve_instance",
                             notifications.SHELVE, standalone=True) as st:
            inst = st.instance
            was_running = guest.power(compute, instance_uuid) == power_state.RUNNING
            compute.driver.power_off(guest.instance_dict(inst), timeout=60 if clean_shutdown else 0)
            try:
                if image_id and not uploaded(compute, ctxt, image_id):
                    compute.driver.snapshot(ctxt, guest.instance_dict(inst), image_id)
            except Exception:
                if was_running:  # the server goes on as it was
                    with cleanup.step("power the server back on"):
                        compute.driver.power_on(ctxt, guest.instance_dict(inst),
                                             guest.network_info_of(inst),
                                             guest.block_device_info(compute, instance_uuid))
                raise
            records.set_system_metadata(compute.cell_db, instance_uuid,
                                        shelved_at=records.utcnow().isoformat(),
                                        shelved_image_id=image_id, shelved_host=compute.host,
                                        shelving_image_id=None)
            st.instance = guest.update(compute, instance_uuid, expected_task_state=task_states.SHELVING,
                                  vm_state=vm_states.SHELVED, task_state=None,
                                  power_state=guest.power(compute, instance_uuid))
    except Exception:
        if image_id and compute.image_api is not None:
            with cleanup.step("delete the unfinished shelved image"):
                compute.image_api.delete(ctxt, image_id)
        raise
    if compute.conf.shelved_offload_time == 0:
        guest.update(compute, instance_uuid, expected_task_state=None,
                     task_state=task_states.SHELVING_OFFLOADING, reload=False)
        shelve_offload_instance(compute, ctxt, instance_uuid)


def uploaded(compute, ctxt, image_id):
    """The shelved image is already whole (a shelve that runs again after its
    host's service died past the upload)."""
    return compute.image_api is not None and \
        compute.image_api.get(ctxt, image_id)["status"] == "active"


def poll_shelved_instances(compute, ctxt=None):
    """Offload the servers shelved here longer than ``shelved_offload_time`` (> 0)."""
    wait = compute.conf.shelved_offload_time
    if wait <= 0:
        return []
    return offload_shelved(compute, ctxt, wait)


def offload_shelved(compute, ctxt, wait):
    """Offload the servers shelved here at least ``wait`` seconds ago."""
    with compute.cell_db.read_session() as s:
        shelved = s.scalars(sa.select(m.Instance.uuid).where(
            m.Instance.host == compute.host, m.Instance.deleted == 0,
            m.Instance.vm_state == vm_states.SHELVED,
            m.Instance.task_state.is_(None))).all()
    due = datetime.timedelta(seconds=wait)
    offloaded = []
    for uuid in shelved:
        at = records.system_metadata(compute.cell_db, uuid).get("shelved_at")
        if at and records.utcnow() - datetime.datetime.fromisoformat(at) < due:
            continue
        actx = ctxt or get_admin_context()
        with cleanup.step(f"offload shelved server {uuid}"):
            guest.update(compute, uuid, expected_task_state=None,
                         task_state=task_states.SHELVING_OFFLOADING, reload=False)
            records.start_action(compute.cell_db, actx, uuid, "shelveOffload")
            try:
                shelve_offload_instance(compute, actx, uuid)
            finally:
                records.finish_action(compute.cell_db, actx, uuid)
            offloaded.append(uuid)
    return offloaded


def shelve_offload_instance(compute, ctxt, instance_uuid):
    """Free this host of a shelved server: it keeps its ports, volumes and image."""
    with steps.step(compute, ctxt, instance_uuid, "compute_shelve_offload_instance",
                         notifications.SHELVE_OFFLOAD, standalone=True) as st:
        inst = st.instance
        # It keeps its ports and volumes, parked on no host; its allocation goes.
        teardown.give_back(compute, ctxt, inst, guest=(teardown.GUEST,),
                           ports=teardown.UNBIND, volumes=teardown.PARK,
                           bdms=guest.bdms_of(compute, instance_uuid),
                           allocation=instance_uuid, strict=True)
        st.instance = guest.update(compute, 
            instance_uuid, expected_task_state=task_states.SHELVING_OFFLOADING,
            vm_state=vm_states.SHELVED_OFFLOADED, task_state=None,
            power_state=power_state.NOSTATE, host=None, node=None, launched_on=None,
            availability_zone=None)
        compute.rt.instance_removed(inst)


def unshelve_instance(compute, ctxt, instance_uuid, image_id=None, flavor=None,
                      port_profiles=None, availability_zone=None):
    """The server runs again: here on its host if shelved, else from its image here."""
    inst = guest.get(compute, instance_uuid)
    if inst.vm_state == vm_states.SHELVED:
        with steps.step(compute, ctxt, instance_uuid, "compute_unshelve_instance",
                             notifications.UNSHELVE, standalone=True) as st:
            compute.driver.power_on(ctxt, guest.instance_dict(st.instance), guest.network_info_of(st.instance),
                                 guest.block_device_info(compute, instance_uuid))
            st.instance = guest.update(compute, instance_uuid, expected_task_state=task_states.UNSHELVING,
                                  vm_state=vm_states.ACTIVE, task_state=None,
                                  power_state=guest.power(compute, instance_uuid))
    else:
        _unshelve_here(compute, ctxt, instance_uuid, image_id, flavor or records.flavor_of(inst),
                            port_profiles, availability_zone)
    _forget_shelved_image(compute, ctxt, instance_uuid, image_id)


def _forget_shelved_image(compute, ctxt, instance_uuid, image_id):
    """The shelved image deleted, then its notes (so a service that dies between finds
    the image to delete as it starts: ``finish_unshelved``)."""
    if image_id and compute.image_api is not None:
        with cleanup.step("delete the shelved image"):
            compute.image_api.delete(ctxt, image_id)
    records.set_system_metadata(compute.cell_db, instance_uuid, shelved_at=None,
                                shelved_image_id=None, shelved_host=None)


def finish_unshelved(compute, ctxt):
    """Servers this host unshelved whose shelved image outlived the unshelve (the
    service died once the server ran here, before deleting it): deleted now."""
    sm = m.InstanceSystemMetadata
    with compute.cell_db.read_session() as s:
        left = s.execute(sa.select(m.Instance.uuid, sm.value).join(
            sm, sm.instance_uuid == m.Instance.uuid).where(
            m.Instance.host == compute.host, m.Instance.deleted == 0,
            m.Instance.vm_state.notin_((vm_states.SHELVED, vm_states.SHELVED_OFFLOADED)),
            m.Instance.task_state.is_(None), sm.key == "shelved_image_id")).all()
    for instance_uuid, image_id in left:
        with cleanup.step(f"finish the unshelve of {instance_uuid}"):
            _forget_shelved_image(compute, ctxt, instance_uuid, image_id)


def _unshelve_here(compute, ctxt, instance_uuid, image_id, flavor, port_profiles, zone):
    with guest.locked(compute, instance_uuid):
        inst = guest.get(compute, instance_uuid)
        done = {"claim": None, "network": False, "spawned": False}
        try:
            with records.action_event(compute.cell_db, ctxt, instance_uuid,
                                      "compute_unshelve_instance", host=compute.host):
                guest.notify(compute, ctxt, inst, notifications.event_type(notifications.UNSHELVE, "start"))
                done["claim"] = compute.rt.instance_claim(
                    ctxt, inst, flavor, ports=connections.sriov_ports(compute, ctxt, instance_uuid),
                    port_profiles=port_profiles, expected_task_state=task_states.UNSHELVING,
                    expected_vm_state=vm_states.SHELVED_OFFLOADED,
                    task_state=task_states.SPAWNING, availability_zone=zone)
                network_info = []
                if compute.network_api is not None:
                    done["network"] = True
                    network_info = compute.network_api.migrate_instance_finish(
                        ctxt, instance_uuid, compute.host, port_profiles=pci.with_devices(
                            port_profiles, done["claim"].pci_devices))
                    guest.save_network_info(compute, instance_uuid, network_info)
                _connect_volumes(compute, ctxt, inst)
                done["spawned"] = True
                compute.driver.spawn(ctxt, guest.instance_dict(inst, flavor),
                                  {"id": image_id or inst.image_ref, "properties": {}},
                                  network_info=network_info,
                                  block_device_info=guest.block_device_info(compute, instance_uuid))
                guest.update(compute, instance_uuid, expected_task_state=task_states.SPAWNING,
                             vm_state=vm_states.ACTIVE, task_state=None,
                             power_state=guest.power(compute, instance_uuid), reload=False)
        except Exception as exc:  # noqa: BLE001 - all given back; the conductor decides
            _unshelve_failed(compute, ctxt, instance_uuid, done)
            raise exc_mod.RescheduledException(instance_uuid=instance_uuid,
                                               reason=str(exc) or type(exc).__name__)
        guest.notify(compute, ctxt, guest.get(compute, instance_uuid),
                 notifications.event_type(notifications.UNSHELVE, "end"))


def _connect_volumes(compute, ctxt, inst):
    """Each parked attachment connected to this host, and the BDM with it."""
    if compute.volume_api is None:
        return
    connector = compute.driver.get_volume_connector(guest.instance_dict(inst))
    bdms = guest.bdms_of(compute, inst.uuid)
    used = [b.device_name for b in bdms] + ["/dev/vda"]
    for bdm in bdms:
        if not guest.is_volume(bdm):
            continue
        # A volume attached while the server was offloaded may have no device yet
        # (and, if the API stopped half-way, no attachment).
        device = bdm.device_name or volume_ops.next_device_name(used)
        used.append(device)
        attachment_id = bdm.attachment_id or compute.volume_api.attachment_create(
            ctxt, bdm.volume_id, inst.uuid)["id"]
        att = compute.volume_api.attachment_update(ctxt, attachment_id, connector,
                                                mountpoint=device)
        compute.volume_api.attachment_complete(ctxt, attachment_id)
        connections.set_bdm(compute, bdm.id, attachment_id=attachment_id,
                            connection_info=json.dumps(dict(att.get("connection_info") or {},
                                                            volume_id=bdm.volume_id)),
                            device_name=device)


def _unshelve_failed(compute, ctxt, instance_uuid, done):
    """Give back what this host took: guest, ports, volume connections, claim."""
    # Parked again as before the unshelve: the volumes connected here, the ports.
    teardown.give_back(compute, ctxt, guest.get(compute, instance_uuid),
                       guest=(teardown.GUEST,) if done["spawned"] else (),
                       ports=teardown.UNBIND if done["network"] else None,
                       volumes=teardown.PARK, claim=done["claim"],
                       bdms=[b for b in guest.bdms_of(compute, instance_uuid) if b.connection_info])
    with cleanup.step("reset for another host"):
        _offloaded_again(compute, instance_uuid, task_states.UNSHELVING)


def _offloaded_again(compute, instance_uuid, task_state):
    records.update_instance(compute.cell_db, instance_uuid,
                            vm_state=vm_states.SHELVED_OFFLOADED, task_state=task_state,
                            host=None, node=None, launched_on=None, availability_zone=None,
                            power_state=power_state.NOSTATE, reload=False)


def abandon_unshelve(compute, ctxt, instance_uuid):
    """An unshelve this host's service stopped in the middle of (the server still
    shelved_offloaded, its row naming this host), given back as a failed one is,
    from what the services hold: the guest, the ports unbound, every volume parked
    again (connected here or half), the claim. The server is on no host; the
    conductor's operation, which still holds the scheduler's allocation, decides
    the rest (its task state is kept while the operation runs)."""
    with guest.locked(compute, instance_uuid):
        inst = guest.get(compute, instance_uuid)
        teardown.give_back(compute, ctxt, inst, guest=(teardown.GUEST,), ports=teardown.UNBIND,
                           volumes=teardown.PARK, strict=True)
        _offloaded_again(compute, instance_uuid,
                         task_states.UNSHELVING if inst.task_state is not None else None)
        compute.rt.instance_removed(inst)
