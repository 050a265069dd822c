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

    # -- resize and cold migrate (conductor/tasks/resize.py, cross_cell.py) ------------

    def migrate_server(self, ctxt, instance_uuid, migration_uuid, flavor=None, host=None,
                       clean_shutdown=True, allow_cross_cell=False):
        """Resize (``flavor``: the new flavor dict) or cold migrate (cast).

        ``allow_cross_cell``: the caller passed ``compute:servers:resize:cross_cell``.
        """
        kwargs = {"allow_cross_cell": True} if allow_cross_cell else {}
        self.transport.cast(ctxt, TOPIC, None, "migrate_server", instance_uuid=instance_uuid,
                            migration_uuid=migration_uuid, flavor=flavor, host=host,
                            clean_shutdown=clean_shutdown, **kwargs)

    def confirm_resize(self, ctxt, instance_uuid, migration_uuid, do_cast=True):
        """Confirm a move in VERIFY_RESIZE; ``do_cast=False`` waits for it (delete)."""
        send = self.transport.cast if do_cast else self.transport.call
        return send(ctxt, TOPIC, None, "confirm_resize", instance_uuid=instance_uuid,
                    migration_uuid=migration_uuid)

    def revert_resize(self, ctxt, instance_uuid, migration_uuid):
        """Revert a move in VERIFY_RESIZE (cast)."""
        self.transport.cast(ctxt, TOPIC, None, "revert_resize", instance_uuid=instance_uuid,
                            migration_uuid=migration_uuid)

    # -- live migration (novella/conductor/tasks/live_migrate.py) ------------------------

    def live_migrate_instance(self, ctxt, instance_uuid, migration_uuid, host=None):
        """Live-migrate a running server inside its cell, to ``host`` or a scheduled one (cast)."""
        self.transport.cast(ctxt, TOPIC, None, "live_migrate_instance",
                            instance_uuid=instance_uuid, migration_uuid=migration_uuid, host=host)

    # -- shelve (novella/conductor/tasks/shelve.py) --------------------------------------

    def unshelve_instance(self, ctxt, instance_uuid, host=None):
        """Run a shelved server again, scheduling it (to ``host`` if given) if it was
        offloaded (cast)."""
        self.transport.cast(ctxt, TOPIC, None, "unshelve_instance", instance_uuid=instance_uuid,
                            host=host)

    # -- evacuate (novella/conductor/tasks/evacuate.py) ----------------------------------

    def evacuate_instance(self, ctxt, instance_uuid, migration_uuid, host=None):
        """Rebuild elsewhere in its cell a server whose host is down (cast)."""
        self.transport.cast(ctxt, TOPIC, None, "evacuate_instance", instance_uuid=instance_uuid,
                            migration_uuid=migration_uuid, host=host)

    # -- image cache --------------------------------------------------------------------

    def cache_images(self, ctxt, aggregate_id, hosts, image_ids):
        """Ask each of an aggregate's hosts to fetch the images into its cache (cast)."""
        self.transport.cast(ctxt, TOPIC, None, "cache_images", aggregate_id=aggregate_id,
                            hosts=hosts, image_ids=image_ids)
