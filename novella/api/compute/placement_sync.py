"""Keeping placement in step with what the API changes.

Host aggregates are mirrored as placement aggregates on the host's compute
node providers (the node uuid is the provider uuid), so member_of queries
see them; a deleted compute service takes its providers with it. Placement
being unreachable or a provider missing is logged, never a failed request,
as in the reference.
"""
import logging

from novella.api.compute import hosts

LOG = logging.getLogger(__name__)


class PlacementSync:
    def __init__(self, api, client):
        self.api = api
        self.client = client

    def node_uuids(self, host):
        return [n.uuid for _c, n in hosts.compute_nodes(self.api, host=host)]

    def __call__(self, event, aggregate_uuid, host):
        """The aggregate hook: ``add_host`` / ``remove_host``."""
        for rp_uuid in self.node_uuids(host):
            try:
                _gen, aggs = self.client.get_aggregates(rp_uuid)
                wanted = set(aggs) | {aggregate_uuid} if event == "add_host" else \
                    set(aggs) - {aggregate_uuid}
                if wanted != set(aggs):
                    self.client.set_aggregates(rp_uuid, wanted, retries=5)
            except Exception:  # noqa: BLE001 - placement trouble never fails the request
                LOG.warning("Could not %s %s in placement aggregate %s", event, host,
                            aggregate_uuid, exc_info=True)

    def delete_providers(self, rp_uuids):
        for rp_uuid in rp_uuids:
            try:
                self.client.delete_resource_provider(rp_uuid)
            except Exception:  # noqa: BLE001
                LOG.warning("Could not delete resource provider %s", rp_uuid, exc_info=True)
