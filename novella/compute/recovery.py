"""What a compute service finishes when it starts again (bound into ComputeManager).

The API records what it asked of a host — the server's task state — before
it casts, so a service that died in the middle of its own work finds, as it
starts, every server of this host that still carries one. The operations
this host owns are finished forward, each being safe to run again from its
beginning; the moves belong to the conductor that journals them
(novella/conductor/operations.py) and are left to it:

    deleting                 the delete runs again: guest, ports, volumes,
                             allocation, row
    shelving                 the shelve runs again with the image the API
                             made for it (then the offload, as configured)
    shelving_offloading      the offload runs again: guest, bindings, parked
                             volumes, allocation (and a server left shelved when
                             ``shelved_offload_time`` is 0 is offloaded)
    block_device_mapping,    the build stopped on this host: ERROR with a fault
    networking, spawning     (the user deletes it; its allocation goes then)
    (any), shelved_offloaded the unshelve stopped on this host: what it made here
                             goes, the server is on no host again; the conductor
                             undoes the rest (shelve.py abandon_unshelve)
    powering-off, -on        the stop or start runs again
    rebooting...             the reboot runs again, of the kind asked
    pausing, unpausing,      the guest action runs again (novella/compute/
    suspending, resuming,    guest_actions.py): pause, unpause, suspend, resume,
    rescuing, unrescuing,    rescue, unrescue, rebuild in place, soft delete,
    rebuilding, soft-        restore, the snapshot or backup upload (with the
    deleting, restoring,     image the API made for it); an interrupted
    image_*, updating_       password change only clears its task state (the
    password                 password was never kept)

Each interrupted action event ends ``Error`` before the operation runs again.

The operations a host records in its cell's journal (novella/db/
host_operations.py) before it acts, because a task state does not say
enough, are run again next (``recover_host_operations``), each by the one
function ``RESUME`` names for its kind:

    swap_volume              the swap runs again from its beginning
    interface_operation      the attach or detach runs again from its beginning
    quiesced_for_snapshot    the guest is thawed
    rebuild_reimage_root     nothing (the rebuild, run again for its task
                             state, wrote the image or failed): the record ends

A note of one of those names left in a server's system metadata (where they
were recorded before the journal) becomes the journal's row before either
(``adopt_notes``): a rebuild run again reads its image for the root volume
from the journal.

An unshelve that ran here but whose service died before it deleted the
shelved image has it deleted as the service starts (shelve.py
``finish_unshelved``, called from ``init_host``).

A host that was down while the conductor undid a move could not take its own
part of the undo; it takes it as it starts (``reconcile_moves``):

    a server of this host whose latest move from here ended in error, with no
        guest here or a guest stopped though the server is active: the guest
        comes back from the copy kept for a revert, its ports and volumes here
    a guest here (or disks copied here for one) of a server that is another
        host's (or of none), with no move between the two in progress: it goes,
        with this host's bindings
    a claim this host made as a move's destination (NUMA cells, PCI devices,
        SR-IOV ports' VFs) that it never took over, the move having ended
        without it: the claim goes

``clean_up_deleted`` is the host's part of a delete that came in while the
server moved: the conductor asks each host the move touched, once the move
ended either way, to remove what is left there.
"""
import json
import logging

import sqlalchemy as sa

from novella.compute import cleanup
from novella.compute import guest_actions
from novella.compute import interface_ops
from novella.compute import volume_ops
from novella.compute import states as vm_states
from novella.compute.states import migration_status as ms, power_state, task_states
from novella.compute import shelve
from novella.compute import teardown
from novella.compute import guest
from novella.db import cell_models as m
from novella.db import host_operations
from novella.db import records

LOG = logging.getLogger(__name__)

_BUILDING = (task_states.BLOCK_DEVICE_MAPPING, task_states.NETWORKING, task_states.SPAWNING)
_REBOOTING = {task_states.REBOOTING: "SOFT", task_states.REBOOT_PENDING: "SOFT",
              task_states.REBOOT_STARTED: "SOFT", task_states.REBOOTING_HARD: "HARD",
              task_states.REBOOT_PENDING_HARD: "HARD", task_states.REBOOT_STARTED_HARD: "HARD"}
_POWER = (task_states.POWERING_OFF, task_states.POWERING_ON) + tuple(_REBOOTING)

# What runs again, for each kind of the host's journal: (manager, ctxt, server, state).
RESUME = {volume_ops.SWAP: volume_ops.resume_swap,
          interface_ops.INTERFACE: interface_ops.resume_interface_op,
          volume_ops.QUIESCE: volume_ops.resume_quiesce,
          volume_ops.REIMAGE_ROOT: volume_ops.resume_reimage_root}
# A system-metadata note of each kind, as written before the journal: its state.
_NOTE_STATE = {volume_ops.SWAP: json.loads, interface_ops.INTERFACE: json.loads,
               volume_ops.QUIESCE: lambda since: {"since": since},
               volume_ops.REIMAGE_ROOT: lambda image_id: {"image_id": image_id}}


class InterruptedOnHost(Exception):
    """The fault of a build this host's service stopped in the middle of."""


def recover_interrupted(compute, ctxt):
    """Every server of this host left with a task state this host owns, finished.
    Returns {instance uuid: the task state it was found in}."""
    with compute.cell_db.read_session() as s:
        # Still shelved_offloaded but this host's: an unshelve that did not end here.
        unshelving = dict(s.execute(sa.select(m.Instance.uuid, m.Instance.task_state).where(
            m.Instance.host == compute.host, m.Instance.deleted == 0,
            m.Instance.vm_state == vm_states.SHELVED_OFFLOADED)).all())
    for uuid, task_state in unshelving.items():
        LOG.info("%s: giving back the unshelve of %s, interrupted when this service stopped",
                 compute.host, uuid)
        records.finish_open_events(compute.cell_db, None, uuid, "Error")
        with cleanup.step(f"give back the unshelve of {uuid}"):
            shelve.abandon_unshelve(compute, ctxt, uuid)
    with compute.cell_db.read_session() as s:
        found = dict(s.execute(sa.select(m.Instance.uuid, m.Instance.task_state).where(
            m.Instance.host == compute.host, m.Instance.deleted == 0,
            m.Instance.task_state.in_(
                (task_states.DELETING, task_states.SHELVING,
                 task_states.SHELVING_OFFLOADING) + _BUILDING + _POWER
                + guest_actions.INTERRUPTIBLE))).all())
    for uuid, task_state in found.items():
        LOG.info("%s: finishing %s of %s, interrupted when this service stopped",
                 compute.host, task_state, uuid)
        records.finish_open_events(compute.cell_db, None, uuid, "Error")
        with cleanup.step(f"finish {task_state} of {uuid}"):
            _finish(compute, ctxt, uuid, task_state)
    if compute.conf.shelved_offload_time == 0:
        # Shelved, but the service died before the offload that follows at once.
        shelve.offload_shelved(compute, ctxt, 0)
    return dict(unshelving, **found)


def adopt_notes(compute):
    """The notes of this host's servers written before the journal, made its rows
    (see above). Returns the operations."""
    return host_operations.adopt_notes(compute.cell_db, compute.host, _NOTE_STATE)


def recover_host_operations(compute, ctxt):
    """Every unfinished operation of this host's journal run again (see above).
    Returns the operations."""
    found = host_operations.unfinished(compute.cell_db, compute.host)
    for op in found:
        LOG.info("%s: finishing %s of %s, interrupted when this service stopped",
                 compute.host, op.kind, op.instance_uuid)
        with cleanup.step(f"finish {op.kind} of {op.instance_uuid}"):
            RESUME[op.kind](compute, ctxt, op.instance_uuid, op.state)
    return found


def reconcile_moves(compute, ctxt):
    """This host's part of the moves undone while it was down (see above).
    Returns {instance uuid: 'restored' | 'removed'}."""
    _drop_claims_of_ended_moves(compute, ctxt)
    done = {}
    guests = set(compute.driver.list_instances())
    held = set(compute.driver.list_disks())
    with compute.cell_db.read_session() as s:
        mine = s.execute(sa.select(m.Instance.uuid, m.Instance.vm_state).where(
            m.Instance.host == compute.host, m.Instance.deleted == 0,
            m.Instance.task_state.is_(None),
            m.Instance.vm_state.in_((vm_states.ACTIVE, vm_states.STOPPED)))).all()
        hosts = dict(s.execute(sa.select(m.Instance.uuid, m.Instance.host).where(
            m.Instance.uuid.in_(held), m.Instance.deleted == 0)).all())
        moving = set(s.scalars(sa.select(m.Migration.instance_uuid).where(
            sa.or_(m.Migration.source_compute == compute.host,
                   m.Migration.dest_compute == compute.host),
            m.Migration.deleted == 0,
            m.Migration.status.in_(ms.IN_PROGRESS + (ms.DONE,)))))
        undone = {}
        for uuid, vm_state in mine:
            latest = s.execute(sa.select(m.Migration.uuid, m.Migration.status,
                                         m.Migration.migration_type).where(
                m.Migration.instance_uuid == uuid, m.Migration.source_compute == compute.host,
                m.Migration.deleted == 0).order_by(m.Migration.id.desc())).first()
            if latest is not None and latest.status == ms.ERROR and \
                    latest.migration_type in ("resize", "migration"):
                undone[uuid] = (latest.uuid, vm_state)
    for uuid, (migration_uuid, vm_state) in undone.items():
        running = vm_state == vm_states.ACTIVE
        if uuid in guests and (not running or guest.power(compute, uuid) == power_state.RUNNING):
            continue
        with cleanup.step(f"bring back {uuid} after an undone move"):
            compute.finish_revert_resize(ctxt, uuid, migration_uuid, power_on=running)
            done[uuid] = "restored"
    for uuid in held - moving:
        if hosts.get(uuid) == compute.host:
            continue  # this host's (a deleted server's guest went before)
        with cleanup.step(f"remove {uuid}, another host's"):
            teardown.give_back(compute, ctxt, uuid, guest=(teardown.GUEST,), bindings=True,
                               strict=True)
            done[uuid] = "removed"
    return done


def _drop_claims_of_ended_moves(compute, ctxt):
    """A destination's claim (a migration context naming this host) whose move ended
    while this host did not answer goes: one not applied, whatever the end; one
    applied (the host died once it took the server, before it let the source's part
    of the claim go) when the move went forward to its end."""
    with compute.cell_db.read_session() as s:
        claims, applied = {}, set()
        # (an applied claim counts on its source's node: found by the server's host)
        here = sa.select(m.Instance.uuid).where(m.Instance.host == compute.host,
                                               m.Instance.deleted == 0)
        for uuid, text in s.execute(sa.select(
                m.InstanceExtra.instance_uuid, m.InstanceExtra.migration_context).where(
                sa.or_(m.InstanceExtra.move_claim_host == compute.host,
                       m.InstanceExtra.instance_uuid.in_(here)),
                m.InstanceExtra.migration_context.is_not(None))):
            mc = json.loads(text)
            if mc.get("dest_compute") == compute.host and mc.get("migration_uuid"):
                claims[mc["migration_uuid"]] = uuid
                if mc.get("applied"):
                    applied.add(mc["migration_uuid"])
        ended = set(s.scalars(sa.select(m.Migration.uuid).where(
            m.Migration.uuid.in_(claims),
            m.Migration.status.not_in(ms.IN_PROGRESS + (ms.DONE,))).where(sa.or_(
                m.Migration.uuid.not_in(applied),
                m.Migration.status == ms.COMPLETED)))) if claims else set()
    for migration_uuid in ended:
        teardown.give_back(compute, ctxt, claims[migration_uuid], claim=teardown.MOVE_CLAIM,
                           migration_uuid=migration_uuid)


def clean_up_deleted(compute, ctxt, instance_uuid):
    """A server deleted while it moved: its guest here (or the copy kept for a
    revert) and this host's port bindings go, unless the server lives on or is
    this host's own to delete. Returns whether it cleaned up."""
    with compute.cell_db.read_session() as s:
        try:
            inst = records.get_instance(s, instance_uuid, read_deleted=True)
        except records.InstanceNotFound:
            inst = None  # never in this cell, or a copy already removed
    if inst is not None and not inst.deleted and (
            inst.task_state != task_states.DELETING or inst.host == compute.host):
        return False
    teardown.give_back(compute, ctxt, instance_uuid, guest=(teardown.GUEST, teardown.KEPT_COPY),
                       bindings=True, strict=True)
    return True


def _finish(compute, ctxt, uuid, task_state):
    if task_state == task_states.DELETING:
        compute.terminate_instance(ctxt, uuid)
    elif task_state == task_states.SHELVING:
        image_id = records.system_metadata(compute.cell_db, uuid).get("shelving_image_id")
        compute.shelve_instance(ctxt, uuid, image_id=image_id)
    elif task_state == task_states.SHELVING_OFFLOADING:
        compute.shelve_offload_instance(ctxt, uuid)
    elif task_state in _BUILDING:
        records.add_fault(compute.cell_db, uuid, InterruptedOnHost(
            f"The compute service on {compute.host} stopped while it built this server."),
            host=compute.host)
        guest.update(compute, uuid, vm_state=vm_states.ERROR, task_state=None, reload=False)
    elif task_state == task_states.POWERING_OFF:
        compute.stop_instance(ctxt, uuid)
    elif task_state == task_states.POWERING_ON:
        compute.start_instance(ctxt, uuid)
    elif guest_actions.resume_interrupted(compute, ctxt, uuid, task_state):
        pass
    else:
        guest.update(compute, uuid, task_state=None, reload=False)  # the reboot starts over
        compute.reboot_instance(ctxt, uuid, reboot_type=_REBOOTING[task_state])
