"""Small helpers the conductor's tasks share: reaching compute hosts."""
from novella import rpc
from novella.compute.rpcapi import ComputeAPI


def compute_api(conf, cell_mapping):
    """The compute RPC client on the cell's own transport."""
    return ComputeAPI(rpc.get_transport(cell_mapping.transport_url),
                      timeout=conf.rpc_response_timeout, long_timeout=conf.long_rpc_timeout)
