"""Server states, named exactly as the reference names them.

``power_state`` is the guest's, as the hypervisor reports it (novella/virt/power.py).
"""
from novella.virt.power import power_state  # noqa: F401 - a server's states, in one place

# vm_state
ACTIVE = "active"
BUILDING = "building"
PAUSED = "paused"
SUSPENDED = "suspended"
STOPPED = "stopped"
RESCUED = "rescued"
RESIZED = "resized"
SOFT_DELETED = "soft-delete"
DELETED = "deleted"
ERROR = "error"
SHELVED = "shelved"
SHELVED_OFFLOADED = "shelved_offloaded"


class task_states:  # noqa: N801 - a namespace, spelled as in the reference
    SCHEDULING = "scheduling"
    BLOCK_DEVICE_MAPPING = "block_device_mapping"
    NETWORKING = "networking"
    SPAWNING = "spawning"
    REBOOTING = "rebooting"
    REBOOTING_HARD = "rebooting_hard"
    REBOOT_PENDING = "reboot_pending"
    REBOOT_STARTED = "reboot_started"
    REBOOT_PENDING_HARD = "reboot_pending_hard"
    REBOOT_STARTED_HARD = "reboot_started_hard"
    POWERING_OFF = "powering-off"
    POWERING_ON = "powering-on"
    RESIZE_PREP = "resize_prep"
    RESIZE_MIGRATING = "resize_migrating"
    RESIZE_MIGRATED = "resize_migrated"
    RESIZE_FINISH = "resize_finish"
    RESIZE_REVERTING = "resize_reverting"
    RESIZE_CONFIRMING = "resize_confirming"
    MIGRATING = "migrating"
    REBUILDING = "rebuilding"
    SHELVING = "shelving"
    SHELVING_OFFLOADING = "shelving_offloading"
    UNSHELVING = "unshelving"
    DELETING = "deleting"
    SOFT_DELETING = "soft-deleting"
    RESTORING = "restoring"
    PAUSING = "pausing"
    UNPAUSING = "unpausing"
    SUSPENDING = "suspending"
    RESUMING = "resuming"
    RESCUING = "rescuing"
    UNRESCUING = "unrescuing"
    UPDATING_PASSWORD = "updating_password"
    REBUILD_BLOCK_DEVICE_MAPPING = "rebuild_block_device_mapping"
    REBUILD_SPAWNING = "rebuild_spawning"
    IMAGE_SNAPSHOT_PENDING = "image_snapshot_pending"
    IMAGE_SNAPSHOT = "image_snapshot"
    IMAGE_PENDING_UPLOAD = "image_pending_upload"
    IMAGE_UPLOADING = "image_uploading"
    IMAGE_BACKUP = "image_backup"


_REBUILD = (task_states.REBUILDING, task_states.REBUILD_BLOCK_DEVICE_MAPPING,
            task_states.REBUILD_SPAWNING)


# Server "status" shown by the API, from (vm_state, task_state).
def server_status(vm_state, task_state):
    if vm_state == BUILDING:
        return "BUILD"
    if vm_state == ACTIVE:
        if task_state in (task_states.REBOOTING, task_states.REBOOT_PENDING,
                          task_states.REBOOT_STARTED):
            return "REBOOT"
        if task_state in (task_states.REBOOTING_HARD, task_states.REBOOT_PENDING_HARD,
                          task_states.REBOOT_STARTED_HARD):
            return "HARD_REBOOT"
        if task_state in (task_states.RESIZE_PREP, task_states.RESIZE_MIGRATING,
                          task_states.RESIZE_MIGRATED, task_states.RESIZE_FINISH):
            return "RESIZE"
        if task_state == task_states.MIGRATING:
            return "MIGRATING"
        if task_state in _REBUILD:
            return "REBUILD"
        if task_state == task_states.UPDATING_PASSWORD:
            return "PASSWORD"
        return "ACTIVE"
    if vm_state == STOPPED:
        if task_state in (task_states.RESIZE_PREP, task_states.RESIZE_MIGRATING,
                          task_states.RESIZE_MIGRATED, task_states.RESIZE_FINISH):
            return "RESIZE"
        if task_state in _REBUILD:
            return "REBUILD"
        return "SHUTOFF"
    if vm_state == RESIZED:
        if task_state == task_states.RESIZE_REVERTING:
            return "REVERT_RESIZE"
        return "VERIFY_RESIZE"
    if vm_state == ERROR and task_state in _REBUILD:
        return "REBUILD"
    return {
        PAUSED: "PAUSED", SUSPENDED: "SUSPENDED", RESCUED: "RESCUE",
        SOFT_DELETED: "SOFT_DELETED", DELETED: "DELETED", ERROR: "ERROR",
        SHELVED: "SHELVED", SHELVED_OFFLOADED: "SHELVED_OFFLOADED",
    }.get(vm_state, "UNKNOWN")


# Migration statuses
class migration_status:  # noqa: N801
    PRE_MIGRATING = "pre-migrating"
    MIGRATING = "migrating"
    POST_MIGRATING = "post-migrating"
    FINISHED = "finished"
    CONFIRMING = "confirming"
    CONFIRMED = "confirmed"
    REVERTING = "reverting"
    REVERTED = "reverted"
    ERROR = "error"
    FAILED = "failed"
    DONE = "done"
    ACCEPTED = "accepted"
    # live migration: accepted -> preparing -> running -> completed (or error, or
    # cancelled when aborted on request)
    PREPARING = "preparing"
    RUNNING = "running"
    COMPLETED = "completed"
    CANCELLED = "cancelled"
    # not yet ended ('done', an evacuation its down host has yet to clean up after,
    # ends when that host starts again)
    IN_PROGRESS = (PRE_MIGRATING, MIGRATING, POST_MIGRATING, FINISHED, CONFIRMING, REVERTING,
                   ACCEPTED, PREPARING, RUNNING)
