"""Every change a server's operations make to its allocations, in one place.

A move books Placement in three consumers' names: the instance, the
migration record, and nobody. Each change is one function here, named for
what it does to the books; the conductor's task that owns the journal step
calls it, so a step is recorded before its Placement change and a fresh
conductor repeats or undoes it (each function is safe to run twice):

    claim          a destination for the instance    (an alternate host; the
                                                      scheduler claims the first)
    to_migration   the instance's -> the migration's  (the move begins)
    hand_back      the migration's -> the instance's  (a revert, or the undo of a
                                                      move that failed)
    confirm        the migration's dropped            (the move is kept)
    give_back      a consumer's dropped               (a refused claim, a failed
                                                      build, a delete)
    set_on_providers  part of the instance's set anew (a port attached or detached)

The compute host's move steps change no allocation: the conductor does it in
the step that asks the host to act. A few operations no conductor runs call
these functions from the compute host itself: a delete, a shelve offload, a
port attached or detached, the periodic confirm of a host's own resizes and
the cleanup of an evacuated server's source host as it starts again.

Outside this module, on purpose:

- the scheduler's claim of its first choice (novella/scheduler/manager.py):
  choosing and claiming are one act of the scheduler, as in the reference;
- the resource tracker's inventory and traits (what a host has, not what a
  server uses);
- Placement's own API (handlers/, ledger.py), which these calls reach;
- ``novella manage placement`` heal/audit (novella/cmd/manage_placement.py):
  an operator's repair of books that drifted, not an operation's step;
- the network service's QoS update of a bound port's allocation
  (novella/network/qos.py), which Neutron, not Nova, makes in the reference;
- the Compute API's delete of a server no host will clean up after (shelved
  offloaded, or on a host that is down: novella/api/compute/handlers/servers.py),
  where no compute host is there to give its allocation back.
"""
import logging

from novella.placement import client as placement_client

LOG = logging.getLogger(__name__)


def claim(placement, instance_uuid, allocation_request, project_id, user_id):
    """The instance claims a destination's ``allocation_request`` (an alternate host the
    scheduler kept). Before: the instance holds nothing (a refused claim was given back).
    After: the instance holds the destination's resources. False if Placement refuses
    (the resources went meanwhile): the books are as before."""
    try:
        return placement.put_allocations(
            instance_uuid, allocation_request["allocations"], project_id, user_id,
            consumer_generation=None, mappings=allocation_request.get("mappings"))
    except placement_client.Conflict as exc:
        LOG.info("claim of %s refused: %s", instance_uuid, exc)
        return False


def to_migration(placement, instance_uuid, migration_uuid):
    """A move begins. Before: the instance holds the source host's resources. After:
    the migration holds them and the instance nothing (the scheduler then claims the
    destination in the instance's name), in one POST /allocations. Run again (the
    instance holds nothing), it raises; an instance that never held any cannot move."""
    if not placement.move_allocations(instance_uuid, migration_uuid, retries=3):
        raise placement_client.PlacementError(
            "PUT", f"/allocations/{instance_uuid}", 409,
            detail=f"Instance {instance_uuid} has no allocation to move")


def hand_back(placement, migration_uuid, instance_uuid):
    """A revert, or the undo of a move that failed. Before: the migration holds the
    source's resources, the instance perhaps a destination's. After: the instance holds
    the source's (replacing any destination claim) and the migration nothing, in one
    POST /allocations. Run again (the migration holds nothing), nothing changes."""
    placement.move_allocations(migration_uuid, instance_uuid,
                               target_consumer_type="INSTANCE", retries=3)


def confirm(placement, migration_uuid):
    """The move is kept. Before: the migration holds the source's resources, the
    instance the destination's. After: the migration holds nothing."""
    placement.delete_allocations(migration_uuid)


def give_back(placement, consumer):
    """``consumer`` (an instance or a migration) lets go. Before: it holds resources or
    nothing. After: it holds nothing (a refused or failed claim, the destination of a
    revert, a server deleted or offloaded)."""
    placement.delete_allocations(consumer)


def set_on_providers(placement, instance_uuid, needed, project_id, user_id):
    """A port attached or detached: the instance's allocation on the providers of
    ``needed`` ({provider: {class: amount}}, an empty dict where nothing is left) is
    set to it, the rest kept. Before: what the server's ports asked of those providers
    until now. After: what they ask now; nothing is sent when that is the same."""
    if not needed:
        return
    current = placement.get_allocations(instance_uuid)
    held = {rp: dict(a["resources"]) for rp, a in current["allocations"].items()}
    wanted = {rp: res for rp, res in held.items() if rp not in needed}
    wanted.update({rp: res for rp, res in needed.items() if res})
    if wanted != held:
        placement.put_allocations(
            instance_uuid, {rp: {"resources": res} for rp, res in wanted.items()},
            current.get("project_id") or project_id, current.get("user_id") or user_id,
            consumer_generation=current.get("consumer_generation"))
