"""Small helpers the conductor's tasks share: reaching compute hosts, port profiles."""
from novella import rpc
from novella.compute.rpcapi import ComputeAPI
from novella.scheduler import utils as scheduler_utils


def compute_api(conf, cell_mapping):
    """The compute RPC client on the cell's own transport."""
    return ComputeAPI(rpc.get_transport(cell_mapping.transport_url),
                      timeout=conf.rpc_response_timeout, long_timeout=conf.long_rpc_timeout)


def held_port_profiles(placement, request_spec, consumer):
    """The binding profiles of the server's ports as ``consumer``'s allocation
    provides them (e.g. the migration's, holding the source host's), or None
    when no port asks for resources."""
    groups = [g for g in request_spec.get("requested_resources") or [] if g.get("requester_id")]
    if not groups:
        return None
    allocations = placement.get_allocations(consumer).get("allocations") or {}
    return scheduler_utils.port_profiles(
        groups, allocations=allocations, traits_of=lambda rp: placement.get_traits(rp)[1])
