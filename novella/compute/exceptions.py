"""Errors the compute service raises, and their return across RPC.

An RPC call re-raises a remote error as ``novella.rpc.RemoteError`` carrying
only the class name; ``from_remote`` turns it back into the class below, so
callers (the conductor) can write ``except RescheduledException``.
"""
import re

from novella.virt.driver import LiveMigrationAborted  # the driver raises it


class ComputeException(Exception):
    code = 500

    def __init__(self, message=None, **kwargs):
        self.kwargs = kwargs
        super().__init__(message or self.__doc__.strip().splitlines()[0])


class RescheduledException(ComputeException):
    """Build of the instance was re-scheduled."""

    def __init__(self, message=None, instance_uuid=None, reason=None):
        self.instance_uuid = instance_uuid
        self.reason = reason
        super().__init__(message or f"Build of instance {instance_uuid} was re-scheduled: {reason}",
                         instance_uuid=instance_uuid, reason=reason)


class BuildAbortException(ComputeException):
    """Build of the instance aborted (the server was deleted or is gone)."""

    def __init__(self, message=None, instance_uuid=None, reason=None):
        self.instance_uuid = instance_uuid
        self.reason = reason
        super().__init__(message or f"Build of instance {instance_uuid} aborted: {reason}",
                         instance_uuid=instance_uuid, reason=reason)


class ComputeResourcesUnavailable(ComputeException):
    """Insufficient compute resources."""

    def __init__(self, reason=None):
        self.reason = reason
        super().__init__(f"Insufficient compute resources: {reason}." if reason else None)


class PciDeviceRequestFailed(ComputeResourcesUnavailable):
    pass


class InstanceInvalidState(ComputeException):
    """The instance is not in a state that allows this operation."""
    code = 409


class InstanceNotRunning(InstanceInvalidState):
    """The instance is not running."""


_BY_NAME = {cls.__name__: cls for cls in (
    ComputeException, RescheduledException, BuildAbortException, ComputeResourcesUnavailable,
    PciDeviceRequestFailed, InstanceInvalidState, InstanceNotRunning, LiveMigrationAborted)}


def from_remote(remote_error):
    """The local exception for an ``rpc.RemoteError`` (itself if unknown)."""
    cls = _BY_NAME.get(getattr(remote_error, "exc_type", None))
    if cls is None:
        return remote_error
    message = remote_error.message
    exc = cls(message)
    found = re.match(r"Build of instance (\S+) (?:was re-scheduled|aborted): (.*)", message, re.S)
    if found and isinstance(exc, (RescheduledException, BuildAbortException)):
        exc.instance_uuid, exc.reason = found.groups()
    exc.remote_traceback = getattr(remote_error, "remote_traceback", None)
    return exc
