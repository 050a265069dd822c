"""The conductor's RPC client (topic ``conductor``): what the API casts to."""
TOPIC = "conductor"


class ConductorAPI:
    def __init__(self, transport):
        self.transport = transport

    def schedule_and_build_instances(self, ctxt, build_requests, request_specs,
                                     requested_networks=None, block_device_mappings=None,
                                     tags=None):
        """Schedule and build the servers of one create request (cast).

        ``build_requests``: one per server, each its instance uuid or a dict
        holding ``instance_uuid`` (the API database row is the authority);
        ``request_specs``: the matching request spec dicts (None: read them
        from the API database); ``requested_networks``, ``block_device_mappings``
        and ``tags`` apply to every server (a build request's own block device
        mappings and tags win).
        """
        self.transport.cast(ctxt, TOPIC, None, "schedule_and_build_instances",
                            build_requests=build_requests, request_specs=request_specs,
                            requested_networks=requested_networks,
                            block_device_mappings=block_device_mappings, tags=tags)
