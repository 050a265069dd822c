"""The two services the API casts to: the conductor and compute hosts.

Each is one small function, so the RPC client modules of those services are
used when present and the same message is cast directly otherwise.
"""
from novella import rpc


def schedule_and_build_instances(transport, ctxt, build_requests, request_specs,
                                 requested_networks, block_device_mappings, tags):
    kwargs = dict(build_requests=build_requests, request_specs=request_specs,
                  requested_networks=requested_networks,
                  block_device_mappings=block_device_mappings, tags=tags)
    try:
        from novella.conductor.rpcapi import ConductorAPI
    except ImportError:
        transport.cast(ctxt, "conductor", None, "schedule_and_build_instances", **kwargs)
        return
    ConductorAPI(transport).schedule_and_build_instances(ctxt, **kwargs)


def cache_images(transport, ctxt, aggregate_id, hosts, image_ids):
    try:
        from novella.conductor.rpcapi import ConductorAPI
    except ImportError:
        transport.cast(ctxt, "conductor", None, "cache_images", aggregate_id=aggregate_id,
                       hosts=hosts, image_ids=image_ids)
        return
    ConductorAPI(transport).cache_images(ctxt, aggregate_id, hosts, image_ids)


def cast_to_compute(ctxt, cell, host, method, **kwargs):
    """Cast ``method`` to the compute service on ``host`` over its cell's transport."""
    transport = rpc.get_transport(cell.transport_url)
    try:
        from novella.compute import rpcapi
        client = rpcapi.ComputeAPI(transport)
        fn = getattr(client, method)
    except (ImportError, AttributeError, TypeError):
        transport.cast(ctxt, "compute", host, method, **kwargs)
        return
    fn(ctxt, host=host, **kwargs)
