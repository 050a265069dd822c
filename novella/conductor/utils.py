"""Small helpers the conductor's tasks share: reaching compute hosts, host zones."""
import sqlalchemy as sa

from novella import rpc
from novella.db import api_models as am


class _CastingCompute:
    """Stand-in for novella.compute.rpcapi.ComputeAPI: the same calls, spelled directly."""

    CALLS = {"build_and_run_instance"}

    def __init__(self, transport, timeout=None):
        self.transport = transport
        self.timeout = timeout

    def __getattr__(self, method):
        def send(ctxt, host, **kwargs):
            if method in self.CALLS:
                return self.transport.call(ctxt, "compute", host, method,
                                           timeout=self.timeout, **kwargs)
            return self.transport.cast(ctxt, "compute", host, method, **kwargs)
        return send


def compute_api(cell_mapping, timeout=None):
    """The compute RPC client on the cell's own transport."""
    transport = rpc.get_transport(cell_mapping.transport_url)
    try:
        from novella.compute.rpcapi import ComputeAPI
    except ImportError:
        return _CastingCompute(transport, timeout)
    return ComputeAPI(transport)


def host_availability_zone(api_db, host, default_zone):
    """The zone of a host: its aggregates' availability_zone metadata, else the default."""
    with api_db.session() as s:
        zones = sorted(set(s.scalars(
            sa.select(am.AggregateMetadata.value)
            .join(am.AggregateHost, am.AggregateHost.aggregate_id == am.AggregateMetadata.aggregate_id)
            .where(am.AggregateHost.host == host, am.AggregateMetadata.key == "availability_zone"))))
    return ",".join(zones) if zones else default_zone
