"""Cross-cell resize and cold migrate on a compute host (bound into ComputeManager).

The super-conductor drives a move between cells by calling each host in turn;
the hosts never talk to each other. Each host works on the copy of the
server in its own cell database (docs/cross-cell.md):

    prep_snapshot_based_resize_at_dest        destination  resize claim, volume
                                                           connector, INACTIVE port
                                                           bindings on this host
    prep_snapshot_based_resize_at_source      source       power off, root disk to an
                                                           image, volumes disconnected
    finish_snapshot_based_resize_at_dest      destination  spawn from the image, ports
                                                           active here, volumes attached
    confirm_snapshot_based_resize_at_source   source       guest destroyed, its bindings
                                                           and attachments gone
    revert_snapshot_based_resize_at_dest      destination  guest destroyed, bindings,
                                                           attachments and claim gone
    finish_revert_snapshot_based_resize_at_source  source  the old guest back, ports and
                                                           volumes here

A step that fails undoes its own half-done work before raising, so the
conductor's rollback of the completed steps leaves the host as it was. The
revert methods also undo a failed move (only a revert asked for, the
migration 'reverting', ends it 'reverted'). No step here changes an
allocation: the conductor's task around each does
(novella/placement/allocations.py).
"""
import contextlib
import json

from novella.compute import cleanup
from novella.compute import pci
from novella.compute import states as vm_states
from novella.compute.states import migration_status as ms, power_state, task_states
from novella.compute import steps
from novella.compute import teardown
from novella.compute import connections
from novella.compute import guest
from novella.compute import resize
from novella.rpc import notifications
from novella.db import records


def _volume_bdms(compute, instance_uuid):
    return [b for b in guest.bdms_of(compute, instance_uuid)
            if b.destination_type == "volume" and b.volume_id]


def _plug_volumes(compute, ctxt, inst, connect=True):
    """Connect (or disconnect) every volume of the guest on this host."""
    for bdm in _volume_bdms(compute, inst.uuid):
        if bdm.boot_index in (0, "0"):
            continue  # the root volume is the guest's disk, not a hot-plugged device
        info = json.loads(bdm.connection_info) if bdm.connection_info else {}
        info.setdefault("volume_id", bdm.volume_id)
        if connect:
            compute.driver.attach_volume(ctxt, info, guest.instance_dict(inst), bdm.device_name)
        else:
            compute.driver.detach_volume(ctxt, info, guest.instance_dict(inst), bdm.device_name)


def prep_snapshot_based_resize_at_dest(compute, ctxt, instance_uuid, migration_uuid,
                                       new_flavor, port_profiles=None):
    """Claim for ``new_flavor`` (the driver's ``prep_resize`` may refuse the host),
    check the volumes can connect, bind ports INACTIVE here (with
    ``port_profiles``: this host's providers of their resource requests; the
    source's bindings keep theirs for a revert).

    Works on the hidden copy in this cell. On failure everything made
    here is given back and the error raised (the conductor tries an
    alternate host of this cell).
    """
    cur = records.flavors(compute.cell_db, instance_uuid)["cur"] or new_flavor
    with steps.step(compute, ctxt, instance_uuid, "compute_prep_snapshot_based_resize_at_dest",
                    notifications.RESIZE_PREP, flavor=cur, new_flavor=new_flavor,
                    end_always=True) as st:
        mig = guest.migration(compute, migration_uuid)
        claim = None
        try:
            records.set_flavors(compute.cell_db, instance_uuid, cur, old=cur, new=new_flavor)
            claim = compute.rt.resize_claim(ctxt, instance_uuid, new_flavor, {
                "uuid": migration_uuid, "source_compute": mig["source_compute"],
                "source_node": mig["source_node"]},
                ports=connections.sriov_ports(compute, ctxt, instance_uuid), port_profiles=port_profiles)
            compute.driver.prep_resize(ctxt, guest.instance_dict(st.instance), new_flavor, mig)
            connector = compute.driver.get_volume_connector(guest.instance_dict(st.instance))
            if compute.volume_api is not None:
                for bdm in _volume_bdms(compute, instance_uuid):
                    if bdm.attachment_id:  # made by the conductor for this cell's copy
                        att = compute.volume_api.attachment_update(
                            ctxt, bdm.attachment_id, connector, mountpoint=bdm.device_name)
                        connections.set_bdm(compute, bdm.id, connection_info=json.dumps(dict(
                            att.get("connection_info") or {}, volume_id=bdm.volume_id)))
            if compute.network_api is not None:
                compute.network_api.bind_ports_to_host(
                    ctxt, instance_uuid, compute.host,
                    port_profiles=pci.with_devices(port_profiles, claim.pci_devices))
        except Exception:
            teardown.give_back(compute, ctxt, st.instance, bindings=True, claim=claim)
            records.set_flavors(compute.cell_db, instance_uuid, cur)
            raise
        node = compute.rt.compute_node or {}
        guest.migration(compute, migration_uuid, dest_compute=compute.host, dest_node=compute.rt.nodename,
                        dest_host=node.get("host_ip") or compute.host)
        st.instance = guest.get(compute, instance_uuid)
    return {"host": compute.host, "node": compute.rt.nodename,
            "dest_host": node.get("host_ip") or compute.host}


def finish_snapshot_based_resize_at_dest(compute, ctxt, instance_uuid, migration_uuid,
                                         snapshot_id=None, power_on=True):
    """Spawn the guest from the snapshot (or its volume), ports active, volumes attached.

    The copy here becomes the server in VERIFY_RESIZE (vm_state resized).
    On failure the guest is destroyed and the ports are active on the
    source host again before the error is raised.
    """
    flavors = records.flavors(compute.cell_db, instance_uuid)
    new, old = flavors["new"] or flavors["cur"], flavors["old"] or flavors["cur"]
    with steps.step(compute, ctxt, instance_uuid, "compute_finish_snapshot_based_resize_at_dest",
                    notifications.RESIZE_FINISH, flavor=new) as st:
        inst = st.instance
        mig = guest.migration(compute, migration_uuid)
        inst = guest.update(compute, instance_uuid, task_state=task_states.RESIZE_FINISH,
                            host=compute.host, node=compute.rt.nodename)
        spawned = activated = False
        try:
            network_info = guest.network_info_of(inst)
            if compute.network_api is not None:
                network_info = compute.network_api.activate_port_bindings(
                    ctxt, instance_uuid, compute.host)
                activated = True
                guest.save_network_info(compute, instance_uuid, network_info)
            if compute.volume_api is not None:
                for bdm in _volume_bdms(compute, instance_uuid):
                    if bdm.attachment_id:
                        compute.volume_api.attachment_complete(ctxt, bdm.attachment_id)
            spawned = True
            image_meta = {"id": snapshot_id or inst.image_ref, "properties": {}}
            compute.driver.spawn(ctxt, guest.instance_dict(inst, new), image_meta,
                              network_info=network_info,
                              block_device_info=guest.block_device_info(compute, instance_uuid),
                              power_on=power_on)
            compute.rt.apply_migration_context(ctxt, instance_uuid)
        except Exception:
            teardown.give_back(compute, ctxt, inst, guest=(teardown.GUEST,) if spawned else ())
            if activated:
                with cleanup.step("activate source bindings"):
                    compute.network_api.activate_port_bindings(ctxt, instance_uuid,
                                                            mig["source_compute"])
            with cleanup.step("reset the copy"):
                guest.update(compute, instance_uuid, task_state=task_states.RESIZE_MIGRATED,
                             host=mig["source_compute"], node=mig["source_node"])
            raise
        records.set_flavors(compute.cell_db, instance_uuid, new, old=old, new=new,
                            vm_state=vm_states.RESIZED, task_state=None,
                            power_state=guest.power(compute, instance_uuid), launched_on=compute.host)
        guest.migration(compute, migration_uuid, status=ms.FINISHED)
        compute.rt.refresh_usage()
        st.instance = guest.get(compute, instance_uuid)
    return {"host": compute.host, "node": compute.rt.nodename}


def revert_snapshot_based_resize_at_dest(compute, ctxt, instance_uuid, migration_uuid):
    """Destroy the guest here, delete this host's bindings, attachments and claim."""
    mig = guest.migration(compute, migration_uuid)
    with steps.step(compute, ctxt, instance_uuid, "compute_revert_snapshot_based_resize_at_dest",
                         None) as st:
        inst = st.instance
        teardown.give_back(compute, ctxt, inst, guest=(teardown.GUEST,), strict=True)
        if compute.network_api is not None:
            # The source binding is made active again before this host's goes,
            # so the port is never left unbound.
            with contextlib.suppress(Exception):
                compute.network_api.activate_port_bindings(ctxt, instance_uuid,
                                                        mig["source_compute"])
        teardown.give_back(compute, ctxt, inst, bindings=True, volumes=teardown.DETACH,
                           claim=teardown.MOVE_CLAIM, strict=True)
        if inst.host == compute.host:
            guest.update(compute, instance_uuid, host=mig["source_compute"], node=mig["source_node"])
        compute.rt.refresh_usage()


def prep_snapshot_based_resize_at_source(compute, ctxt, instance_uuid, migration_uuid,
                                         snapshot_id=None, clean_shutdown=True):
    """Power off, upload the root disk to image ``snapshot_id``, disconnect volumes.

    The guest and its disks stay on this host for a revert. On failure
    the guest is put back (volumes, power) before the error is raised.
    """
    flavors = records.flavors(compute.cell_db, instance_uuid)
    with steps.step(compute, ctxt, instance_uuid, "compute_prep_snapshot_based_resize_at_source",
                    notifications.RESIZE, flavor=flavors["cur"]) as st:
        inst = st.instance
        was_running = guest.power(compute, instance_uuid) == power_state.RUNNING
        guest.migration(compute, migration_uuid, status=ms.MIGRATING)
        guest.update(compute, instance_uuid, task_state=task_states.RESIZE_MIGRATING)
        powered_off = unplugged = False
        try:
            compute.driver.power_off(guest.instance_dict(inst),
                                  timeout=60 if clean_shutdown else 0)
            powered_off = True
            if snapshot_id:
                # As Nova's drivers see it: the instance's task state says why.
                compute.driver.snapshot(ctxt, dict(guest.instance_dict(inst),
                                                task_state=task_states.RESIZE_MIGRATING),
                                     snapshot_id)
            unplugged = True
            _plug_volumes(compute, ctxt, inst, connect=False)
        except Exception:
            if unplugged:
                with cleanup.step("reconnect volumes"):
                    _plug_volumes(compute, ctxt, inst, connect=True)
            if powered_off and was_running:
                with cleanup.step("power on"):
                    compute.driver.power_on(ctxt, guest.instance_dict(inst),
                                         guest.network_info_of(inst),
                                         guest.block_device_info(compute, instance_uuid))
            with cleanup.step("reset task state"):
                guest.update(compute, instance_uuid, task_state=task_states.RESIZE_PREP)
            raise
        guest.migration(compute, migration_uuid, status=ms.POST_MIGRATING)
        st.instance = guest.update(compute, instance_uuid, task_state=task_states.RESIZE_MIGRATED,
                              power_state=power_state.SHUTDOWN)
    return {"snapshot_id": snapshot_id}


def confirm_snapshot_based_resize_at_source(compute, ctxt, instance_uuid, migration_uuid):
    """The move is kept: the old guest, its bindings and attachments go. The
    conductor then hard-deletes this copy."""
    with steps.step(compute, ctxt, instance_uuid,
                         "compute_confirm_snapshot_based_resize_at_source", None) as st:
        teardown.give_back(compute, ctxt, st.instance, guest=(teardown.GUEST,), bindings=True,
                           volumes=teardown.DETACH, strict=True)
        guest.migration(compute, migration_uuid, status=ms.CONFIRMED)
    return ms.CONFIRMED


def finish_revert_snapshot_based_resize_at_source(compute, ctxt, instance_uuid,
                                                  migration_uuid, power_on=True):
    """The old guest back on this host with the old flavor; a revert asked for
    (the migration 'reverting') ends the migration 'reverted'."""
    flavors = records.flavors(compute.cell_db, instance_uuid)
    old = flavors["old"] or flavors["cur"]
    mig = guest.migration(compute, migration_uuid)
    with steps.step(compute, ctxt, instance_uuid,
                         "compute_finish_revert_snapshot_based_resize_at_source") as st:
        inst = st.instance
        network_info = guest.network_info_of(inst)
        if compute.network_api is not None:
            network_info = compute.network_api.activate_port_bindings(ctxt, instance_uuid,
                                                                   compute.host)
            guest.save_network_info(compute, instance_uuid, network_info)
        if not compute.driver.instance_exists({"uuid": instance_uuid}):
            compute.driver.spawn(ctxt, guest.instance_dict(inst, old),
                              {"id": inst.image_ref, "properties": {}},
                              network_info=network_info,
                              block_device_info=guest.block_device_info(compute, instance_uuid),
                              power_on=power_on)
        else:
            _plug_volumes(compute, ctxt, inst, connect=True)
            if power_on and guest.power(compute, instance_uuid) != power_state.RUNNING:
                compute.driver.power_on(ctxt, guest.instance_dict(inst, old), network_info,
                                     guest.block_device_info(compute, instance_uuid))
        resize.back_on_source(compute, instance_uuid, mig, old, power_on)
        compute.rt.refresh_usage()
        st.instance = guest.get(compute, instance_uuid)
