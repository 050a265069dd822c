"""Small helpers the conductor's tasks share: reaching compute hosts, host zones."""
import sqlalchemy as sa

from novella import rpc
from novella.compute.rpcapi import ComputeAPI
from novella.db import api_models as am


def compute_api(conf, cell_mapping):
    """The compute RPC client on the cell's own transport."""
    return ComputeAPI(rpc.get_transport(cell_mapping.transport_url),
                      timeout=conf.rpc_response_timeout, long_timeout=conf.long_rpc_timeout)


def host_availability_zone(api_db, host, default_zone):
    """The zone of a host: its aggregates' availability_zone metadata, else the default."""
    with api_db.session() as s:
        zones = sorted(set(s.scalars(
            sa.select(am.AggregateMetadata.value)
            .join(am.AggregateHost, am.AggregateHost.aggregate_id == am.AggregateMetadata.aggregate_id)
            .where(am.AggregateHost.host == host, am.AggregateMetadata.key == "availability_zone"))))
    return ",".join(zones) if zones else default_zone
