"""What this host made for a server, given back: the one function every path
that takes a server's share of this host apart calls (a delete, an offload,
a failed build or unshelve, a move undone or ended, what a restarted host
finds left of a server that is no longer its own).

``give_back`` is told which parts go; they go in this order:

    guest        what of the guest is here, each by the driver's call for it:
                 GUEST (the guest and its disks destroyed), KEPT_COPY (the copy a
                 resize kept for a revert), LIVE_SOURCE (what a live migration left
                 on its source), LIVE_ARRIVED (what arrived for one that failed)
    bindings     this host's port bindings deleted
    attachments  these volume attachments (ids) deleted
    ports        DEALLOCATE: the ports let go (the user's unbound and kept, the
                 others deleted); UNBIND: kept, bound to no host (shelved)
    volumes      DELETE: every attachment of each volume deleted, and the volumes
                 deleted on termination; DETACH: each volume's attachment deleted;
                 PARK: each volume's attachment replaced by a reserved one,
                 connected nowhere (shelved)
    claim        a Claim aborted; MOVE_CLAIM: the move's claim forgotten (the
                 destination's when the move is undone, the source's once the
                 server runs here); REVERTED_MOVE: the move's claim forgotten and
                 the one before it current again
    allocation   the consumer (server or migration) whose allocation is deleted

Each part is its own cleanup step: a failure is logged and the next part
runs, so an undo neither hides the error it handles nor stops half way.
``strict`` is for a step that owns the work and runs again when it fails (a
delete, an offload, a revert): the first failure raises. The volume
attachment deleted while a volume is detached or parked may already be gone:
that never stops the others.
"""
import contextlib

from novella.compute import cleanup
from novella.compute import connections
from novella.compute import guest as guest_mod
from novella.compute import volume_ops
from novella.db import records
from novella.network import ownership
from novella.placement import allocations

GUEST, KEPT_COPY, LIVE_SOURCE, LIVE_ARRIVED = ("guest", "kept copy", "live migration source",
                                               "live migration arrival")
DEALLOCATE, UNBIND = "deallocate", "unbind"
DELETE, DETACH, PARK = "delete", "detach", "park"
MOVE_CLAIM, REVERTED_MOVE = "move claim", "reverted move"


class _Gone:
    """What is read of a server this cell has no row of: its uuid, no ports cached."""

    info_cache = None

    def __init__(self, uuid):
        self.uuid = uuid


def give_back(compute, ctxt, server, *, guest=(), bindings=False, attachments=(), ports=None,
              requested_networks=None, volumes=None, bdms=None, claim=None,
              migration_uuid=None, allocation=None, strict=False):
    """Give back the parts named (see above) of what this host made for ``server``:
    its instance row, or its uuid when this cell has no row of it (the driver is
    then told only the uuid). ``requested_networks``: the ports the build was
    given (the user's, kept); ``bdms``: the server's BDM rows as the caller read
    them (the volumes to detach or park; read here when None);
    ``migration_uuid``: only that migration's claim is forgotten."""
    inst = _Gone(server) if isinstance(server, str) else server
    uuid = inst.uuid

    def part(what):
        return contextlib.nullcontext() if strict else cleanup.step(what)

    for kind in guest:
        with part(f"remove the {kind} of {uuid}"):
            _remove_guest(compute, ctxt, kind, inst, bdms)
    if bindings and compute.network_api is not None:
        with part(f"delete the port bindings of {uuid}"):
            compute.network_api.delete_port_bindings(ctxt, uuid, compute.host)
    for attachment_id in attachments if compute.volume_api is not None else ():
        with part(f"delete volume attachment {attachment_id}"):
            compute.volume_api.attachment_delete(ctxt, attachment_id)
    if ports is not None:
        with part(f"{ports} the ports of {uuid}"):
            _let_ports_go(compute, ctxt, ports, inst, requested_networks)
    if volumes is not None:
        with part(f"{volumes} the volumes of {uuid}"):
            _let_volumes_go(compute, ctxt, volumes, inst, bdms)
    if claim is not None:
        with part(f"give back the claim of {uuid}"):
            if claim == MOVE_CLAIM:
                compute.rt.drop_move_claim(ctxt, uuid, migration_uuid=migration_uuid)
            elif claim == REVERTED_MOVE:
                compute.rt.revert_migration_context(ctxt, uuid)
            else:
                claim.abort()
    if allocation is not None:
        with part(f"give back the allocation of {allocation}"):
            allocations.give_back(compute.placement, allocation)


def _remove_guest(compute, ctxt, kind, inst, bdms):
    gone = isinstance(inst, _Gone)
    told = {"uuid": inst.uuid} if gone else guest_mod.instance_dict(inst)
    if kind == GUEST:
        compute.driver.destroy(ctxt, told, guest_mod.network_info_of(inst),
                               None if gone else guest_mod.block_device_info(
                                   compute, inst.uuid, bdms),
                               destroy_disks=True)
    elif kind == KEPT_COPY:
        compute.driver.confirm_migration(ctxt, None, told)
    elif kind == LIVE_SOURCE:
        compute.driver.cleanup_live_migration_source(ctxt, told)
    elif kind == LIVE_ARRIVED:
        compute.driver.rollback_live_migration_at_destination(ctxt, told)
    else:
        raise ValueError(f"no such part of a guest: {kind}")


def _let_ports_go(compute, ctxt, how, inst, requested_networks):
    if compute.network_api is None:
        return
    if how == DEALLOCATE:  # the user's: its records say which, and those the build was given
        keep = ownership.user_ports(guest_mod.network_info_of(inst),
                                    records.system_metadata(compute.cell_db, inst.uuid),
                                    ownership.requested_port_ids(requested_networks))
        compute.network_api.deallocate_for_instance(ctxt, inst.uuid, keep)
    else:  # UNBIND
        guest_mod.save_network_info(compute, inst.uuid,
                                    compute.network_api.unbind_ports(ctxt, inst.uuid))


def _let_volumes_go(compute, ctxt, how, inst, bdms):
    for bdm in guest_mod.bdms_of(compute, inst.uuid) if bdms is None else bdms:
        if not guest_mod.is_volume(bdm):
            continue
        if how == DELETE:
            _delete_volume(compute, ctxt, inst.uuid, bdm)
            continue
        if compute.volume_api is None:
            continue
        parked = (compute.volume_api.attachment_create(ctxt, bdm.volume_id, inst.uuid)
                  if how == PARK else None)
        if bdm.attachment_id:
            with cleanup.step(f"delete volume attachment {bdm.attachment_id}"):
                compute.volume_api.attachment_delete(ctxt, bdm.attachment_id)
        if parked is not None:
            connections.set_bdm(compute, bdm.id, attachment_id=parked["id"],
                                connection_info=None)
        elif bdm.attachment_id:  # DETACH
            connections.set_bdm(compute, bdm.id, attachment_id=None)


def _delete_volume(compute, ctxt, instance_uuid, bdm):
    """The server goes: each attachment of the volume (also one a build that stopped
    left), and the volume if it goes with the server (a build may stop before it
    was made)."""
    if compute.volume_api is not None:
        ids = [bdm.attachment_id] if bdm.attachment_id else []
        ids += [a["id"] for a in compute.volume_api.attachment_list(
            ctxt, volume_id=bdm.volume_id, instance_uuid=instance_uuid) if a["id"] not in ids]
        for attachment_id in ids:
            compute.volume_api.attachment_delete(ctxt, attachment_id)
        if bdm.delete_on_termination and volume_ops.volume_exists(compute, ctxt, bdm.volume_id):
            compute.volume_api.delete(ctxt, bdm.volume_id)
    connections.set_bdm(compute, bdm.id, attachment_id=None)
