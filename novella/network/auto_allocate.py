"""Auto-allocated topologies ("get me a network", Neutron's auto-allocated-topology).

A project with no network of its own asks for one:
``get_auto_allocated_topology`` returns the project's network, making it
first if the project has none: a network ``auto_allocated_network``, a subnet
cut from the default subnet pool, a router ``auto_allocated_router`` with its
gateway on the default external network (``is_default``) and an interface on
the subnet, and the ``auto_allocated_topologies`` row naming them (one per
project). Everything is made in one transaction, its row inserted right after
the network: a process that dies midway leaves nothing, and the next request
makes the whole topology; two requests at once make one topology (the second
waits on the first's row, finds it taken and returns it). With ``dry_run``
only the requirements are checked. Without a default external network or a
default subnet pool the answer is ``AutoAllocationFailure`` (409), as the
reference's. ``delete_auto_allocated_topology`` removes it all again, in one
transaction.

Deleting the network or the router by hand (as Tempest's clean-up does) drops
or clears the row (foreign keys): the next request makes a new topology.
"""
import uuid

import sqlalchemy as sa

from novella.network import models
from novella.network.routers import INTERFACE

NETWORK_NAME, ROUTER_NAME = "auto_allocated_network", "auto_allocated_router"
DRY_RUN_PASS = "dry-run=pass"


class AutoAllocationFailure(Exception):
    code = 409


class TopologyNotFound(Exception):
    code = 404


def _topology(network_id, project_id):
    return {"id": network_id, "tenant_id": project_id, "project_id": project_id}


class AutoAllocateMixin:
    """Mixed into ``NetworkAPI`` (networks, subnets, routers and subnet pools)."""

    def _default_external_network(self, s):
        nets = s.scalars(sa.select(models.Network).where(
            models.Network.external.is_(True), models.Network.is_default.is_(True))
            .order_by(models.Network.created_at)).all()
        if not nets:
            raise AutoAllocationFailure("Deployment error: No default router:external "
                                        "network.")
        return nets[0]

    def _requirements(self, s):
        """(default external network, default subnet pool); AutoAllocationFailure if not."""
        external = self._default_external_network(s)
        pool = self._default_pool(s, 4) or self._default_pool(s, 6)
        if pool is None:
            raise AutoAllocationFailure("Deployment error: No default subnetpools defined.")
        return external, pool

    def get_auto_allocated_topology(self, ctxt, project_id, dry_run=False):
        """``{"id": network id, "project_id", "tenant_id"}`` of the project's topology,
        made if missing; with ``dry_run`` ``id`` is ``dry-run=pass`` and nothing is made."""
        if dry_run:
            with self.db.read_session() as s:
                self._requirements(s)
            return _topology(DRY_RUN_PASS, project_id)
        for attempt in range(3):
            try:
                with self.db.session(write=True) as s:
                    return _topology(self._ensure_topology(s, ctxt, project_id), project_id)
            except sa.exc.IntegrityError:  # another request made it meanwhile: read it
                if attempt == 2:
                    raise

    def _existing_topology(self, s, project_id):
        row = s.get(models.AutoAllocatedTopology, project_id)
        return row.network_id if row is not None else None

    def _ensure_topology(self, s, ctxt, project_id):
        """The project's auto-allocated network id, the topology made in ``s`` if missing."""
        network_id = self._existing_topology(s, project_id)
        if network_id is not None:
            return network_id
        external, pool = self._requirements(s)
        net = models.Network(id=str(uuid.uuid4()), name=NETWORK_NAME, project_id=project_id,
                             shared=False, network_type="vxlan", mtu=1500,
                             qos_policy_id=self.default_qos_policy_id(s, project_id))
        s.add(net)
        s.flush()
        # The claim: a concurrent request blocks here until this one ends, then fails
        # on the key and reads this topology.
        row = models.AutoAllocatedTopology(project_id=project_id, network_id=net.id)
        s.add(row)
        s.flush()
        subnet = self._add_subnet(s, net, self._cut_from_pool(s, pool),
                                  name=f"auto_allocated_subnet_v{pool.ip_version}",
                                  subnetpool_id=pool.id)
        router = self._add_router(s, None, ROUTER_NAME, project_id,
                                  gateway={"network_id": external.id})
        self._add_interface(s, None, router, subnet_id=subnet.id)
        row.router_id = router.id
        s.flush()
        return net.id

    def delete_auto_allocated_topology(self, ctxt, project_id):
        """The project's auto-allocated router, subnets and network go (404 if it has none;
        409, and nothing changes, while a server still has a port on the network)."""
        with self.db.session(write=True) as s:
            row = s.get(models.AutoAllocatedTopology, project_id)
            if row is None:
                raise TopologyNotFound(f"Auto-allocated topology of project {project_id} "
                                       f"could not be found.")
            network_id, router_id = row.network_id, row.router_id
            router = s.get(models.Router, router_id) if router_id else None
            if router is not None:
                for port in s.scalars(sa.select(models.Port).join(
                        models.RouterPort, models.RouterPort.port_id == models.Port.id)
                        .where(models.RouterPort.router_id == router.id,
                               models.RouterPort.port_type == INTERFACE)).all():
                    self._delete_port(s, port)
                self._remove_router(s, router)
            s.delete(row)
            s.flush()
            self._remove_network(s, self._network(s, network_id))
