"""Live migration on a compute host (bound into ComputeManager).

The conductor drives it by calling, in order (docs/live-migration.md):

    prepare_live_migration_at_destination   destination  claim (NUMA/PCI), INACTIVE port
                                                         bindings naming this host's
                                                         providers, volume attachments
                                                         for this host, the driver's
                                                         pre_live_migration
    live_migration                          source       the driver moves the running guest
    post_live_migration_at_destination      destination  bindings and attachments here
                                                         become the server's (the source's
                                                         attachments are deleted); the
                                                         instance is on this host
    post_live_migration_at_source           source       the old guest and bindings go

``rollback_live_migration_at_destination`` undoes the first two (what arrived
here, the bindings, attachments and claim); the source's guest runs on
untouched until the destination has taken over, and
``rollback_live_migration_at_source`` (a cast) stops a copy that may still
run there. Each side tells its rollback (instance.live_migration_rollback
from the source, instance.live_migration_rollback_dest from the destination),
also when a destination failed its preparation (no copy to stop then).

While the source runs ``live_migration``, two casts steer it (the API's
``DELETE /servers/{id}/migrations/{id}`` and ``force_complete`` action):
``live_migration_abort`` stops the copy, which then raises
LiveMigrationAborted to the conductor, whose rollback leaves the server on
this host and the migration 'cancelled'; ``live_migration_force_complete``
ends the copy at once. An abort that arrives before the copy starts (the
migration 'queued' or 'preparing') is kept until it does.
"""
import logging
import threading

from novella.compute import exceptions
from novella.compute import states as vm_states
from novella.compute.states import migration_status as ms, task_states
from novella.compute import steps
from novella.compute import teardown
from novella.compute import connections
from novella.compute import guest
from novella.rpc import notifications
from novella.db import migration_records
from novella.db import records
from novella.virt.driver import LiveMigrationSteering

LOG = logging.getLogger(__name__)

# The statuses of a live migration whose copy has not started yet.
NOT_STARTED = ("queued", ms.PREPARING)
# Guards every host's registry of the steerings of its running live migrations.
_STEERING_LOCK = threading.Lock()


def prepare_live_migration_at_destination(compute, ctxt, instance_uuid, migration_uuid,
                                          port_profiles=None):
    """Make this host ready for the running guest; returns the new attachments.

    ``{"host", "node", "attachments": {volume id: attachment id}}``. On
    failure everything made here is given back and the error raised.
    """
    with steps.step(compute, ctxt, instance_uuid, "compute_check_can_live_migrate_destination",
                    notifications.LIVE_MIGRATION_PRE) as st:
        inst = st.instance
        made = {"claim": None, "bindings": False, "attachments": {}}
        try:
            block_device_info = connections.take_in(compute, ctxt, inst, migration_uuid, port_profiles,
                                              made)
            compute.driver.pre_live_migration(ctxt, guest.instance_dict(inst), block_device_info,
                                           guest.network_info_of(inst))
        except Exception:
            teardown.give_back(compute, ctxt, inst, bindings=made["bindings"],
                               attachments=made["attachments"].values(),
                               claim=teardown.MOVE_CLAIM if made["claim"] is not None else None)
            raise
        guest.migration(compute, migration_uuid, status=ms.PREPARING, dest_compute=compute.host,
                        dest_node=compute.rt.nodename,
                        dest_host=(compute.rt.compute_node or {}).get("host_ip") or compute.host)
    return {"host": compute.host, "node": compute.rt.nodename, "attachments": made["attachments"]}


def rollback_live_migration_at_destination(compute, ctxt, instance_uuid, migration_uuid,
                                           attachments=None):
    """A failed live migration: nothing of the server stays on this host."""
    with steps.step(compute, ctxt, instance_uuid,
                    "compute_rollback_live_migration_at_destination",
                    notifications.LIVE_MIGRATION_ROLLBACK_DEST) as st:
        teardown.give_back(compute, ctxt, st.instance, guest=(teardown.LIVE_ARRIVED,),
                           bindings=True, attachments=(attachments or {}).values(),
                           claim=teardown.MOVE_CLAIM)


def post_live_migration_at_destination(compute, ctxt, instance_uuid, migration_uuid,
                                       attachments=None):
    """The guest runs here: its bindings, attachments and the instance are this host's.

    The driver's step comes first: until it succeeds nothing has changed
    hands, and the conductor's rollback finds the move as it was.
    """
    with steps.step(compute, ctxt, instance_uuid,
                         "compute_post_live_migration_at_destination",
                    notifications.LIVE_MIGRATION_POST_DEST) as st:
        inst = st.instance
        compute.driver.post_live_migration_at_destination(ctxt, guest.instance_dict(inst),
                                                       guest.network_info_of(inst))
        if compute.network_api is not None:
            guest.save_network_info(compute, instance_uuid, compute.network_api.activate_port_bindings(
                ctxt, instance_uuid, compute.host))
        connections.switch_attachments(compute, ctxt, instance_uuid, attachments or {})
        compute.rt.apply_migration_context(ctxt, instance_uuid)
        records.update_instance(
            compute.cell_db, instance_uuid, expected_task_state=task_states.MIGRATING,
            host=compute.host, node=compute.rt.nodename, task_state=None,
            # A paused server arrives paused, as the reference's do.
            vm_state=(vm_states.PAUSED if inst.vm_state == vm_states.PAUSED
                      else vm_states.ACTIVE),
            power_state=guest.power(compute, instance_uuid), reload=False)
        teardown.give_back(compute, ctxt, inst, claim=teardown.MOVE_CLAIM, strict=True)


def live_migration(compute, ctxt, instance_uuid, migration_uuid, dest):
    """Move the running guest to ``dest`` (its copy here stays until the cleanup).

    Raises LiveMigrationAborted when an abort was asked for (before or
    during the copy): nothing of the guest is then on ``dest``.
    """
    steering = steering_of(compute, migration_uuid, create=True)
    try:
        with steps.step(compute, ctxt, instance_uuid, "compute_live_migration") as st:
            if steering.asked == LiveMigrationSteering.ABORT:
                raise exceptions.LiveMigrationAborted(
                    f"Live migration of instance {instance_uuid} was aborted before "
                    "it started.")
            guest.migration(compute, migration_uuid, status=ms.RUNNING)
            steering.report_to = lambda figures: guest.migration(compute, migration_uuid,
                                                                 **figures)
            compute.driver.live_migration(ctxt, guest.instance_dict(st.instance), dest,
                                       steering=steering)
    finally:
        steering_of(compute, migration_uuid, drop=True)


def post_live_migration_at_source(compute, ctxt, instance_uuid, migration_uuid):
    """The server runs elsewhere now: what is left of it here goes."""
    with steps.step(compute, ctxt, instance_uuid, "compute_post_live_migration_at_source",
                    notifications.LIVE_MIGRATION_POST) as st:
        teardown.give_back(compute, ctxt, st.instance, guest=(teardown.LIVE_SOURCE,),
                           bindings=True)
        compute.rt.refresh_usage()


def rollback_live_migration_at_source(compute, ctxt, instance_uuid, migration_uuid,
                                      copy_started=True):
    """The move failed: the guest runs on here. After the copy began, a copy
    that may still be running is stopped; when a destination failed its
    preparation (``copy_started`` False) there is none, and the rollback
    is only told (a cast)."""
    try:
        inst = guest.get(compute, instance_uuid)
    except records.InstanceNotFound:
        return

    def send(event_type, fault=None):
        guest.notify(compute, ctxt, guest.get(compute, instance_uuid) if event_type.endswith(".end")
                     else inst, event_type, fault=fault)

    with notifications.action(send, notifications.LIVE_MIGRATION_ROLLBACK):
        if copy_started:
            live_migration_abort(compute, ctxt, instance_uuid, migration_uuid)
            # The move is undone after its copy: the server is this host's, its guest
            # runs here (a destination that died before taking over never ran its own).
            compute.driver.rollback_live_migration_at_source(ctxt, guest.instance_dict(inst))


def steering_of(compute, migration_uuid, create=False, drop=False):
    """The LiveMigrationSteering of a live migration of this host, or None;
    ``create``: made if missing; ``drop``: forgotten (its copy ended)."""
    with _STEERING_LOCK:
        registry = compute.__dict__.setdefault("_live_migration_steering", {})
        if drop:
            return registry.pop(migration_uuid, None)
        if create:
            return registry.setdefault(migration_uuid, LiveMigrationSteering())
        return registry.get(migration_uuid)


def live_migration_abort(compute, ctxt, instance_uuid, migration_uuid):
    """Stop the live migration's copy (or keep the abort until it starts); a cast.

    The conductor's rollback then finishes the abort. Also cast by the
    conductor when it takes back a move whose copy may still be running.
    """
    def abort():
        try:
            waiting = guest.migration(compute, migration_uuid)["status"] in NOT_STARTED
        except migration_records.MigrationNotFound:
            waiting = False
        steering = steering_of(compute, migration_uuid, create=waiting)
        return steering is not None and steering.ask(LiveMigrationSteering.ABORT)

    _steer(compute, ctxt, instance_uuid, migration_uuid, "abort", abort)


def live_migration_force_complete(compute, ctxt, instance_uuid, migration_uuid):
    """End the running copy at once so that the move completes; a cast."""
    def force():
        steering = steering_of(compute, migration_uuid)
        return steering is not None and steering.ask(LiveMigrationSteering.FORCE_COMPLETE)

    _steer(compute, ctxt, instance_uuid, migration_uuid, "force_complete", force)


def _steer(compute, ctxt, instance_uuid, migration_uuid, what, request):
    """``request()`` (True: the copy will obey it), recorded as the
    compute_live_migration_<what> event and told by the
    instance.live_migration_<what> notifications. When there is nothing to
    steer (the copy ended, or the other request came first) only a log line
    says so.

    No instance lock: the copy being steered holds it.
    """
    if not request():
        LOG.info("live migration %s of %s is not in progress on %s: nothing to %s",
                 migration_uuid, instance_uuid, compute.host, what.replace("_", " "))
        return
    try:
        inst = guest.get(compute, instance_uuid)
    except records.InstanceNotFound:
        return
    name = {"abort": notifications.LIVE_MIGRATION_ABORT,
            "force_complete": notifications.LIVE_MIGRATION_FORCE_COMPLETE}[what]
    with notifications.action(
            lambda event_type, fault=None: guest.notify(compute, ctxt, inst, event_type, fault=fault),
            name):
        with records.action_event(compute.cell_db, ctxt, instance_uuid,
                                  f"compute_live_migration_{what}", host=compute.host,
                                  finish_action=True):
            pass
