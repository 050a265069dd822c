"""The scheduler's RPC client: what the conductor calls (topic ``scheduler``)."""
from novella import rpc
from novella.scheduler.errors import NoValidHost

TOPIC = "scheduler"


class SchedulerAPI:
    def __init__(self, transport, timeout=None):
        self.transport = transport
        self.timeout = timeout

    def select_destinations(self, ctxt, request_spec, instance_uuids, return_alternates=True):
        """[[selection, alternate, ...], ...], one list per instance uuid.

        The first selection of each list is claimed in placement with the
        instance uuid as consumer. Raises NoValidHost.
        """
        try:
            return self.transport.call(ctxt, TOPIC, None, "select_destinations",
                                       timeout=self.timeout, request_spec=request_spec,
                                       instance_uuids=list(instance_uuids),
                                       return_alternates=return_alternates)
        except rpc.RemoteError as exc:
            if exc.exc_type == NoValidHost.__name__:
                raise NoValidHost(message=exc.message) from exc
            raise
