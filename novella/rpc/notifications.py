"""Every versioned notification Novella sends: event type, payload class, version.

The names and versions are those an OpenStack consumer knows. A service
never spells an event type itself: it names an action of ``EVENTS`` and
``action()`` sends its phases::

    with notifications.action(send, notifications.RESIZE_FINISH):
        ...                          # .start before, .end after

``send(event_type, fault=None)`` builds the payload (the table gives its
class and version) and hands it to the service's notifier. On failure an
action that has an ``.error`` phase sends it with the exception as the
payload's fault (priority ERROR); one that has none sends nothing more,
as the exception ends the action.
"""
import collections
import contextlib

# ``priority``: ERROR for an event that tells a failure without an .error phase.
Event = collections.namedtuple("Event", "payload version phases priority", defaults=(None,))

START, END, ERROR = "start", "end", "error"
PAIR = (START, END)
TRIO = (START, END, ERROR)
SINGLE = ()

# Payload classes and their versions.
INSTANCE_ACTION = ("InstanceActionPayload", "1.9")
RESIZE_PREP_PAYLOAD = ("InstanceActionResizePrepPayload", "1.4")
REBUILD_PAYLOAD = ("InstanceActionRebuildPayload", "1.10")
VOLUME_PAYLOAD = ("InstanceActionVolumePayload", "1.7")
VOLUME_SWAP_PAYLOAD = ("InstanceActionVolumeSwapPayload", "1.9")
CREATE_PAYLOAD = ("InstanceCreatePayload", "1.13")
COMPUTE_TASK_PAYLOAD = ("ComputeTaskPayload", "1.0")
RESCUE_PAYLOAD = ("InstanceActionRescuePayload", "1.4")
SNAPSHOT_PAYLOAD = ("InstanceActionSnapshotPayload", "1.10")

# Nested payloads.
FLAVOR = ("FlavorPayload", "1.4")
IP = ("IpPayload", "1.0")
BLOCK_DEVICE = ("BlockDevicePayload", "1.0")
EXCEPTION = ("ExceptionPayload", "1.1")
REQUEST_SPEC = ("RequestSpecPayload", "1.1")
IMAGE_META = ("ImageMetaPayload", "1.0")
IMAGE_META_PROPS = ("ImageMetaPropsPayload", "1.20")
SERVER_GROUP = ("ServerGroupPayload", "1.1")
DESTINATION = ("DestinationPayload", "1.0")
CELL_MAPPING = ("CellMappingPayload", "2.0")
SCHEDULER_RETRIES = ("SchedulerRetriesPayload", "1.0")

# Actions (event types without their phase).
CREATE = "instance.create"
DELETE = "instance.delete"
SHUTDOWN = "instance.shutdown"
POWER_ON = "instance.power_on"
POWER_OFF = "instance.power_off"
REBOOT = "instance.reboot"
SHELVE = "instance.shelve"
SHELVE_OFFLOAD = "instance.shelve_offload"
UNSHELVE = "instance.unshelve"
VOLUME_ATTACH = "instance.volume_attach"
VOLUME_DETACH = "instance.volume_detach"
VOLUME_SWAP = "instance.volume_swap"
INTERFACE_ATTACH = "instance.interface_attach"
INTERFACE_DETACH = "instance.interface_detach"
RESIZE_PREP = "instance.resize_prep"
RESIZE = "instance.resize"
RESIZE_FINISH = "instance.resize_finish"
RESIZE_CONFIRM = "instance.resize_confirm"
RESIZE_REVERT = "instance.resize_revert"
LIVE_MIGRATION_PRE = "instance.live_migration_pre"
LIVE_MIGRATION_POST = "instance.live_migration_post"
LIVE_MIGRATION_POST_DEST = "instance.live_migration_post_dest"
LIVE_MIGRATION_ROLLBACK = "instance.live_migration_rollback"
LIVE_MIGRATION_ROLLBACK_DEST = "instance.live_migration_rollback_dest"
LIVE_MIGRATION_ABORT = "instance.live_migration_abort"
LIVE_MIGRATION_FORCE_COMPLETE = "instance.live_migration_force_complete"
EVACUATE = "instance.evacuate"
REBUILD = "instance.rebuild"
REBUILD_SCHEDULED = "instance.rebuild_scheduled"
BUILD_INSTANCES = "compute_task.build_instances"
MIGRATE_SERVER = "compute_task.migrate_server"
REBUILD_SERVER = "compute_task.rebuild_server"
COMPUTE_EXCEPTION = "compute.exception"  # a compute host's step failed (steps.py)
PAUSE = "instance.pause"
UNPAUSE = "instance.unpause"
SUSPEND = "instance.suspend"
RESUME = "instance.resume"
RESCUE = "instance.rescue"
UNRESCUE = "instance.unrescue"
SNAPSHOT = "instance.snapshot"
TRIGGER_CRASH_DUMP = "instance.trigger_crash_dump"
SOFT_DELETE = "instance.soft_delete"
RESTORE = "instance.restore"
LOCK = "instance.lock"
UNLOCK = "instance.unlock"

EVENTS = {
    CREATE: Event(*CREATE_PAYLOAD, TRIO),
    DELETE: Event(*INSTANCE_ACTION, PAIR),
    SHUTDOWN: Event(*INSTANCE_ACTION, PAIR),
    POWER_ON: Event(*INSTANCE_ACTION, PAIR),
    POWER_OFF: Event(*INSTANCE_ACTION, PAIR),
    REBOOT: Event(*INSTANCE_ACTION, TRIO),
    SHELVE: Event(*INSTANCE_ACTION, PAIR),
    SHELVE_OFFLOAD: Event(*INSTANCE_ACTION, PAIR),
    UNSHELVE: Event(*INSTANCE_ACTION, PAIR),
    VOLUME_ATTACH: Event(*VOLUME_PAYLOAD, TRIO),
    VOLUME_DETACH: Event(*VOLUME_PAYLOAD, PAIR),
    VOLUME_SWAP: Event(*VOLUME_SWAP_PAYLOAD, TRIO),
    INTERFACE_ATTACH: Event(*INSTANCE_ACTION, TRIO),
    INTERFACE_DETACH: Event(*INSTANCE_ACTION, PAIR),
    RESIZE_PREP: Event(*RESIZE_PREP_PAYLOAD, PAIR),
    RESIZE: Event(*INSTANCE_ACTION, TRIO),
    RESIZE_FINISH: Event(*INSTANCE_ACTION, PAIR),
    RESIZE_CONFIRM: Event(*INSTANCE_ACTION, PAIR),
    RESIZE_REVERT: Event(*INSTANCE_ACTION, PAIR),
    LIVE_MIGRATION_PRE: Event(*INSTANCE_ACTION, PAIR),
    LIVE_MIGRATION_POST: Event(*INSTANCE_ACTION, PAIR),
    LIVE_MIGRATION_POST_DEST: Event(*INSTANCE_ACTION, PAIR),
    LIVE_MIGRATION_ROLLBACK: Event(*INSTANCE_ACTION, PAIR),
    LIVE_MIGRATION_ROLLBACK_DEST: Event(*INSTANCE_ACTION, PAIR),
    LIVE_MIGRATION_ABORT: Event(*INSTANCE_ACTION, PAIR),
    LIVE_MIGRATION_FORCE_COMPLETE: Event(*INSTANCE_ACTION, PAIR),
    EVACUATE: Event(*INSTANCE_ACTION, SINGLE),
    REBUILD: Event(*REBUILD_PAYLOAD, TRIO),
    REBUILD_SCHEDULED: Event(*REBUILD_PAYLOAD, SINGLE),
    BUILD_INSTANCES: Event(*COMPUTE_TASK_PAYLOAD, (ERROR,)),
    MIGRATE_SERVER: Event(*COMPUTE_TASK_PAYLOAD, (ERROR,)),
    REBUILD_SERVER: Event(*COMPUTE_TASK_PAYLOAD, (ERROR,)),
    COMPUTE_EXCEPTION: Event(*EXCEPTION, SINGLE, "ERROR"),
    PAUSE: Event(*INSTANCE_ACTION, PAIR),
    UNPAUSE: Event(*INSTANCE_ACTION, PAIR),
    SUSPEND: Event(*INSTANCE_ACTION, PAIR),
    RESUME: Event(*INSTANCE_ACTION, PAIR),
    RESCUE: Event(*RESCUE_PAYLOAD, PAIR),
    UNRESCUE: Event(*INSTANCE_ACTION, PAIR),
    SNAPSHOT: Event(*SNAPSHOT_PAYLOAD, PAIR),
    TRIGGER_CRASH_DUMP: Event(*INSTANCE_ACTION, PAIR),
    SOFT_DELETE: Event(*INSTANCE_ACTION, PAIR),
    RESTORE: Event(*INSTANCE_ACTION, PAIR),
    LOCK: Event(*INSTANCE_ACTION, SINGLE),
    UNLOCK: Event(*INSTANCE_ACTION, SINGLE),
}


def event_types():
    """Every event type sent, phases included."""
    return sorted(f"{action}.{phase}" if phase else action
                  for action, event in EVENTS.items() for phase in (event.phases or ("",)))


def event_type(action, phase=None):
    """``action.phase``, refused unless the table has it."""
    event = EVENTS[action]
    if phase is None:
        if event.phases:
            raise ValueError(f"{action} is sent with a phase: {event.phases}")
        return action
    if phase not in event.phases:
        raise ValueError(f"{action} has no {phase!r} phase")
    return f"{action}.{phase}"


def action_of(event_type_):
    """(action, phase or None) of an event type in the table."""
    if event_type_ in EVENTS:
        return event_type_, None
    action, _, phase = event_type_.rpartition(".")
    if action in EVENTS and phase in EVENTS[action].phases:
        return action, phase
    raise KeyError(f"unknown event type {event_type_!r}")


def payload_of(event_type_):
    """(payload class name, version) of an event type."""
    event = EVENTS[action_of(event_type_)[0]]
    return event.payload, event.version


def priority_of(event_type_):
    action_, phase = action_of(event_type_)
    return "ERROR" if phase == ERROR or EVENTS[action_].priority == "ERROR" else "INFO"


@contextlib.contextmanager
def action(send, name, error_as=None, end_always=False):
    """Send ``name``'s .start, run the body, then its .end (or .error).

    ``error_as``: on failure send that action's .error instead of this one's
    (instance.resize_prep fails as instance.resize.error); ``end_always``:
    the .end goes out after a failure too (instance.resize_prep does so).
    """
    send(event_type(name, START))
    try:
        yield
    except Exception as exc:
        failed = error_as or name
        if ERROR in EVENTS[failed].phases:
            send(event_type(failed, ERROR), fault=exc)
        if end_always:
            send(event_type(name, END))
        raise
    send(event_type(name, END))
