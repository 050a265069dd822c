"""Resize and cold migrate on a compute host (bound into ComputeManager).

The conductor drives a move by calling, in order (docs/moves.md):

    prep_resize          destination  NUMA/PCI resize claim for the new flavor
    resize_instance      source       power off, move the disks to the destination
    finish_resize        destination  spawn with the new flavor -> VERIFY_RESIZE

and afterwards ``confirm_resize`` (source: the kept copy goes) or
``revert_resize`` (destination: guest destroyed, its claim dropped) followed
by ``finish_revert_resize`` (source: the old guest back).

``revert_resize`` and ``finish_revert_resize`` also undo a move that failed
half way: only a revert the user asked for (the migration 'reverting') is
told and ends the migration 'reverted'; otherwise the conductor's undo ends
it. No step here changes an allocation: the conductor's task around each
does (novella/placement/allocations.py).
"""
import contextlib
import datetime
import logging

import sqlalchemy as sa

from novella.compute import states as vm_states
from novella.compute.states import migration_status as ms, power_state, task_states
from novella.compute import steps
from novella.compute import teardown
from novella.compute import connections
from novella.compute import guest
from novella.rpc import notifications
from novella.context import get_admin_context
from novella.db import cell_models as m
from novella.db import migration_records
from novella.db import records
from novella.placement import allocations

LOG = logging.getLogger(__name__)


def _zone(availability_zone):
    """The instance values that set its zone, when the caller named one."""
    return {"availability_zone": availability_zone} if availability_zone else {}


def revert_asked(mig):
    """Whether ``mig`` is being reverted at its user's request (the API made it
    'reverting'; a revert run again finds it 'reverted'), rather than undone after a
    failed step (then the conductor's undo ends it, and nothing is told)."""
    return mig["status"] in (ms.REVERTING, ms.REVERTED)


def back_on_source(compute, instance_uuid, mig, old_flavor, power_on, **instance_values):
    """The server is this host's again, with its old flavor; a revert asked
    for (``mig``, as read before, 'reverting') ends the migration 'reverted'."""
    records.set_flavors(compute.cell_db, instance_uuid, old_flavor, host=compute.host,
                        node=compute.rt.nodename,
                        vm_state=vm_states.ACTIVE if power_on else vm_states.STOPPED,
                        task_state=None, power_state=guest.power(compute, instance_uuid),
                        **instance_values)
    if revert_asked(mig):
        guest.migration(compute, mig["uuid"], status=ms.REVERTED)


def prep_resize(compute, ctxt, instance_uuid, migration_uuid, new_flavor, port_profiles=None):
    """Claim NUMA cells and PCI devices for ``new_flavor`` here (the destination),
    and a device for each SR-IOV port from the PF ``port_profiles`` names.

    Then the driver's ``prep_resize`` may refuse the host. On failure the
    claim is given back and the error raised, so the conductor can try an
    alternate host.
    """
    # The payload has the flavor the server has (``flavor``) and the one
    # asked for (``new_flavor``); a failure is told as instance.resize.error
    # (the conductor tries the next host), and the .end goes out either way.
    with steps.step(compute, ctxt, instance_uuid, "compute_prep_resize",
                    notifications.RESIZE_PREP,
                    flavor=lambda inst: records.flavor_of(inst) or new_flavor,
                    new_flavor=new_flavor, error_as=notifications.RESIZE,
                    end_always=True, migration_uuid=migration_uuid) as st:
        cur = records.flavor_of(st.instance) or new_flavor
        mig = st.migration
        claim = None
        try:
            # The new flavor is stored beside the claim, in its statement (the
            # size columns keep the current one until finish_resize).
            claim = compute.rt.resize_claim(
                ctxt, instance_uuid, new_flavor,
                {"uuid": migration_uuid, "source_compute": mig["source_compute"],
                 "source_node": mig["source_node"]},
                ports=connections.sriov_ports(compute, ctxt, instance_uuid, read=st.instance),
                port_profiles=port_profiles,
                instance=st.instance,
                flavors=records.flavor_doc(cur, old=cur, new=new_flavor))
            compute.driver.prep_resize(ctxt, guest.instance_dict(st.instance), new_flavor, mig)
        except Exception:
            # The driver refused the host: the claim goes back.
            teardown.give_back(compute, ctxt, st.instance, claim=claim)
            records.set_flavors(compute.cell_db, instance_uuid, cur)
            raise
        guest.migration(compute, migration_uuid, dest_compute=compute.host, dest_node=compute.rt.nodename,
                        dest_host=(compute.rt.compute_node or {}).get("host_ip") or compute.host)
        st.instance = st.instance  # what the .end reports: the claim wrote its extra
    return {"host": compute.host, "node": compute.rt.nodename}


def resize_instance(compute, ctxt, instance_uuid, migration_uuid, clean_shutdown=True):
    """Power the guest off and copy its disks to the destination host.

    Returns the driver's disk_info for finish_resize. On failure the guest
    is put back as it was (disks, power) before the error is raised.
    """
    with steps.step(compute, ctxt, instance_uuid, "compute_resize_instance",
                    notifications.RESIZE, flavor=records.flavor_of) as st:
        inst = st.instance
        flavors = records.flavors_of(inst)
        was_running = guest.power(compute, instance_uuid) == power_state.RUNNING
        mig = guest.migration(compute, migration_uuid, status=ms.MIGRATING)
        guest.update(compute, instance_uuid, expected_task_state=task_states.RESIZE_PREP,
                     task_state=task_states.RESIZE_MIGRATING, reload=False)
        try:
            disk_info = compute.driver.migrate_disk_and_power_off(
                ctxt, guest.instance_dict(inst), mig["dest_compute"], flavors["new"],
                network_info=guest.network_info_of(inst),
                block_device_info=guest.block_device_info(compute, instance_uuid))
        except Exception:
            with contextlib.suppress(Exception):
                compute.driver.finish_revert_migration(
                    ctxt, guest.instance_dict(inst), guest.network_info_of(inst),
                    block_device_info=guest.block_device_info(compute, instance_uuid),
                    power_on=was_running)
            raise
        guest.migration(compute, migration_uuid, status=ms.POST_MIGRATING)
        now = records.utcnow()
        guest.update(compute, instance_uuid, task_state=task_states.RESIZE_MIGRATED,
                     power_state=power_state.SHUTDOWN, updated_at=now, reload=False)
        # The row read under the lock, as the UPDATE left it (for the .end).
        inst.task_state, inst.power_state = task_states.RESIZE_MIGRATED, power_state.SHUTDOWN
        inst.updated_at = now
        st.instance = inst
    return disk_info


def finish_resize(compute, ctxt, instance_uuid, migration_uuid, disk_info=None, power_on=True,
                  availability_zone=None, port_profiles=None):
    """Take the server here with its new flavor: VERIFY_RESIZE (vm_state resized).

    ``availability_zone``: this host's zone, which the server shows from now on.
    ``port_profiles``: ``{port id: binding profile}`` for this host (its providers).
    """
    def new_of(inst):
        flavors = records.flavors_of(inst)
        return flavors["new"] or flavors["cur"]

    with steps.step(compute, ctxt, instance_uuid, "compute_finish_resize",
                    notifications.RESIZE_FINISH, flavor=new_of,
                    migration_uuid=migration_uuid) as st:
        flavors = records.flavors_of(st.instance)
        new = new_of(st.instance)
        mig = st.migration
        now = records.utcnow()
        guest.update(compute, instance_uuid, expected_task_state=task_states.RESIZE_MIGRATED,
                     task_state=task_states.RESIZE_FINISH, updated_at=now, reload=False)
        inst = st.instance  # read under the lock, as the UPDATE above left it
        inst.task_state, inst.updated_at = task_states.RESIZE_FINISH, now
        compute.rt.apply_migration_context(ctxt, instance_uuid, instance=inst)
        network_info = connections.bind_network_here(compute, ctxt, inst, port_profiles)
        bdms = connections.reattach_volumes(compute, ctxt, inst)
        old = flavors["old"] or flavors["cur"]
        resized = any(old.get(k) != new.get(k) for k in ("root_gb", "ephemeral_gb", "swap"))
        compute.driver.finish_migration(
            ctxt, mig, guest.instance_dict(inst, new), disk_info or [], network_info,
            {"id": inst.image_ref, "properties": {}}, resized,
            block_device_info=guest.block_device_info(compute, instance_uuid, bdms), power_on=power_on)
        updated = records.set_flavors(compute.cell_db, instance_uuid, new, old=old, new=new,
                                      host=compute.host, node=compute.rt.nodename,
                                      vm_state=vm_states.RESIZED, task_state=None,
                                      power_state=guest.power(compute, instance_uuid), row=inst,
                                      **_zone(availability_zone))
        guest.migration(compute, migration_uuid, status=ms.FINISHED)
        compute.rt.move_arrived(inst)
        if updated is not None:
            st.instance = updated
    return {"host": compute.host, "node": compute.rt.nodename}


def confirm_resize(compute, ctxt, instance_uuid, migration_uuid):
    """The move is kept: drop the source copy and its claim. Returns the migration's
    status ('confirmed', or what a revert that took it meanwhile made it)."""
    try:
        with steps.step(compute, ctxt, instance_uuid, "compute_confirm_resize",
                        notifications.RESIZE_CONFIRM, flavor=records.flavor_of,
                        migration_uuid=migration_uuid,
                        migration_in=(ms.FINISHED, ms.CONFIRMING)) as st:
            return _confirm_resize(compute, ctxt, st, instance_uuid, migration_uuid)
    except steps.MigrationNotReady as exc:
        LOG.info("migration %s is %s: nothing to confirm", migration_uuid, exc.status)
        return exc.status


def _confirm_resize(compute, ctxt, st, instance_uuid, migration_uuid):
    """confirm_resize's step (``st``), its migration finished or confirming."""
    mig = st.migration
    if mig["status"] == ms.FINISHED:  # confirmed other than by the API, which marks it
        mig = migration_records.update(compute.cell_db, migration_uuid,
                                       expected_status=ms.FINISHED, status=ms.CONFIRMING)
        if mig is None:  # a revert took it meanwhile
            raise steps.MigrationNotReady(guest.migration(compute, migration_uuid)["status"])
    inst = st.instance
    flavors = records.flavors_of(inst)
    compute.driver.confirm_migration(ctxt, mig, guest.instance_dict(inst),
                                  guest.network_info_of(inst))
    # The old and new flavors are forgotten with the claim, in its statement.
    doc = records.flavor_doc(flavors["cur"])
    compute.rt.drop_move_claim(ctxt, instance_uuid, flavors=doc)
    vm_state = (vm_states.STOPPED if inst.power_state == power_state.SHUTDOWN
                else vm_states.ACTIVE)
    now = records.utcnow()
    guest.update(compute, instance_uuid, vm_state=vm_state, task_state=None, updated_at=now,
                 reload=False)
    # The row read under the lock, as the statements left it (for the .end).
    inst.vm_state, inst.task_state, inst.updated_at = vm_state, None, now
    if inst.extra is not None:
        inst.extra.flavor = doc
        inst.extra.migration_context = inst.extra.move_claim_host = None
    st.instance = inst
    guest.migration(compute, migration_uuid, status=ms.CONFIRMED)
    return ms.CONFIRMED


def revert_resize(compute, ctxt, instance_uuid, migration_uuid):
    """Destination side of a revert (or of the undo of a failed move): destroy
    the new guest, drop its claim."""
    mig = guest.migration(compute, migration_uuid)
    # The revert is told by the source (finish_revert_resize), once.
    with steps.step(compute, ctxt, instance_uuid, "compute_revert_resize") as st:
        inst = st.instance
        same_host = mig["source_compute"] == compute.host
        # On the same host the guest directory is the original until the
        # disks were moved aside (post-migrating and later).
        copied = mig["status"] in (ms.POST_MIGRATING, ms.FINISHED, ms.REVERTING, ms.ERROR)
        teardown.give_back(  # also a copy whose guest never started
            compute, ctxt, inst, guest=(teardown.GUEST,) if not same_host or copied else (),
            claim=teardown.REVERTED_MOVE, strict=True)
        if inst.host == compute.host and not same_host:
            guest.update(compute, instance_uuid, host=mig["source_compute"], node=mig["source_node"])
        compute.rt.refresh_usage()


def finish_revert_resize(compute, ctxt, instance_uuid, migration_uuid, power_on=True,
                         availability_zone=None, port_profiles=None):
    """Source side of a revert (or of the undo of a failed move): the old guest
    and flavor back on this host. A revert asked for (the migration
    'reverting') is told and ends the migration 'reverted'.
    ``availability_zone``: this host's zone, which the server shows again;
    ``port_profiles`` as for ``finish_resize``.
    """
    def old_of(inst):
        flavors = records.flavors_of(inst)
        return flavors["old"] or flavors["cur"]

    mig = guest.migration(compute, migration_uuid)
    with steps.step(compute, ctxt, instance_uuid, "compute_finish_revert_resize",
                    notifications.RESIZE_REVERT if revert_asked(mig) else None,
                    flavor=old_of) as st:
        inst = st.instance
        old = old_of(inst)
        # Ports and volumes first: until then the bindings and the volumes'
        # connections are the destination's, and the driver must be given
        # this host's to bring the old guest back.
        network_info = connections.bind_network_here(compute, ctxt, inst, port_profiles, claim="old")
        bdms = connections.reattach_volumes(compute, ctxt, inst)
        compute.driver.finish_revert_migration(
            ctxt, guest.instance_dict(inst, old), network_info, migration=mig,
            block_device_info=guest.block_device_info(compute, instance_uuid, bdms), power_on=power_on)
        teardown.give_back(compute, ctxt, inst, claim=teardown.REVERTED_MOVE, strict=True)
        back_on_source(compute, instance_uuid, mig, old, power_on, **_zone(availability_zone))
        compute.rt.refresh_usage()
        st.instance = guest.get(compute, instance_uuid)


def poll_unconfirmed_resizes(compute, ctxt=None):
    """Confirm moves left in VERIFY_RESIZE longer than ``resize_confirm_window``."""
    window = compute.conf.resize_confirm_window
    if window <= 0:
        return []
    cutoff = records.utcnow() - datetime.timedelta(seconds=window)
    with compute.cell_db.session() as s:
        due = s.execute(sa.select(m.Migration.uuid, m.Migration.instance_uuid).where(
            m.Migration.source_compute == compute.host, m.Migration.status == ms.FINISHED,
            m.Migration.deleted == 0, m.Migration.updated_at <= cutoff,
            m.Migration.cross_cell_move.is_(False),  # the conductor confirms those
            m.Migration.migration_type.in_(("resize", "migration")))).all()
    confirmed = []
    for migration_uuid, instance_uuid in due:
        actx = get_admin_context()
        try:
            inst = guest.get(compute, instance_uuid)
            if inst.vm_state != vm_states.RESIZED or inst.task_state is not None:
                continue
            records.start_action(compute.cell_db, actx, instance_uuid, "confirmResize")
            if confirm_resize(compute, actx, instance_uuid, migration_uuid) == ms.CONFIRMED:
                allocations.confirm(compute.placement, migration_uuid)
            records.finish_action(compute.cell_db, actx, instance_uuid)
            confirmed.append(migration_uuid)
        except Exception:  # noqa: BLE001 - one stuck move must not block the others
            LOG.exception("automatic confirmation of migration %s failed", migration_uuid)
    return confirmed
