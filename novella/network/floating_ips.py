"""Floating IPs of the embedded network service, as Neutron keeps them.

A floating IP is an address of an external network (``router:external``) that
a project holds; its address is the fixed IP of a port the service makes on
that network for it (``device_owner`` ``network:floatingip``, ``device_id`` the
floating IP's id), so addresses are allocated and freed as any port's. It may
be associated with a port of the project (one of that port's fixed addresses,
the first IPv4 one unless named); deleting that port disassociates it. No
traffic is translated: the association is what the service records and shows.
"""
import ipaddress
import uuid

import sqlalchemy as sa

from novella.db.timestamps import isotime
from novella.network import models

OWNER = "network:floatingip"


class FloatingIPError(Exception):
    code = 400


class FloatingIPNotFound(FloatingIPError):
    code = 404


class ExternalNetworkNotFound(FloatingIPError):
    code = 404


class FloatingIPConflict(FloatingIPError):
    code = 409


class FloatingIPMixin:
    """Mixed into ``NetworkAPI`` (``self.db``, ``_new_port``, ``_delete_port``, ``_port``)."""

    def _fip_dict(self, s, f):
        return {"id": f.id, "floating_network_id": f.floating_network_id,
                "floating_ip_address": f.floating_ip_address, "project_id": f.project_id,
                "tenant_id": f.project_id, "port_id": f.port_id,
                "fixed_ip_address": f.fixed_ip_address,
                "status": "ACTIVE" if f.port_id else "DOWN", "router_id": None,
                "description": f.description, "tags": [], "revision_number": 0,
                "port_details": None, "port_forwardings": [], "qos_policy_id": None,
                "dns_domain": "", "dns_name": "",
                "created_at": isotime(f.created_at), "updated_at": isotime(f.updated_at or f.created_at)}

    def _fip(self, s, ctxt, fip_id, lock=False):
        q = sa.select(models.FloatingIP).where(models.FloatingIP.id == fip_id)
        f = s.scalars(q.with_for_update() if lock else q).first()
        if f is None or not (ctxt is None or ctxt.is_admin or f.project_id == ctxt.project_id):
            raise FloatingIPNotFound(f"Floating IP {fip_id} could not be found")
        return f

    def _associate(self, s, ctxt, f, port_id, fixed_ip_address=None):
        """Point ``f`` at the port (and one of its fixed addresses), or at nothing."""
        if port_id is None:
            f.port_id = f.fixed_ip_address = None
            return
        port = self._port(s, port_id, lock=True)
        if not (ctxt is None or ctxt.is_admin or port.project_id == ctxt.project_id):
            raise FloatingIPNotFound(f"Port {port_id} could not be found.")
        ips = list(s.scalars(sa.select(models.IPAllocation.ip_address).where(
            models.IPAllocation.port_id == port.id).order_by(models.IPAllocation.subnet_id)))
        if fixed_ip_address is not None:
            if fixed_ip_address not in ips:
                raise FloatingIPError(f"Port {port.id} does not have fixed ip "
                                      f"{fixed_ip_address}.")
        else:
            v4 = [ip for ip in ips if ipaddress.ip_address(ip).version == 4]
            if not v4:
                raise FloatingIPError(f"Port {port.id} has no IPv4 address for a floating IP.")
            fixed_ip_address = v4[0]
        taken = s.scalars(sa.select(models.FloatingIP.id).where(
            models.FloatingIP.port_id == port.id,
            models.FloatingIP.fixed_ip_address == fixed_ip_address,
            models.FloatingIP.id != f.id)).first()
        if taken is not None:
            raise FloatingIPConflict(
                f"Cannot associate floating IP {f.floating_ip_address} ({f.id}) with port "
                f"{port.id} using fixed IP {fixed_ip_address}, as that fixed IP already has "
                f"a floating IP on external network {f.floating_network_id}.")
        f.port_id, f.fixed_ip_address = port.id, fixed_ip_address

    def create_floatingip(self, ctxt, floating_network_id, port_id=None, fixed_ip_address=None,
                          project_id=None, description=""):
        project_id = project_id or getattr(ctxt, "project_id", None)
        with self.db.session(write=True) as s:
            net = s.get(models.Network, floating_network_id)
            if net is None or not net.external:
                raise ExternalNetworkNotFound(
                    f"External network {floating_network_id} could not be found.")
            f = models.FloatingIP(id=str(uuid.uuid4()), floating_network_id=net.id,
                                  project_id=project_id, description=description or "")
            _port, _binding, ips, _groups = self._new_port(s, {
                "network_id": net.id, "device_owner": OWNER, "device_id": f.id}, project_id=None)
            f.floating_ip_address = ips[0].ip_address
            s.add(f)
            s.flush()
            if port_id is not None:
                self._associate(s, ctxt, f, port_id, fixed_ip_address)
            return self._fip_dict(s, f)

    def get_floatingip(self, ctxt, fip_id):
        with self.db.session() as s:
            return self._fip_dict(s, self._fip(s, ctxt, fip_id))

    def list_floatingips(self, ctxt, **filters):
        with self.db.session() as s:
            q = sa.select(models.FloatingIP).order_by(models.FloatingIP.created_at,
                                                      models.FloatingIP.id)
            if not (ctxt is None or ctxt.is_admin):
                q = q.where(models.FloatingIP.project_id == ctxt.project_id)
            for key, value in filters.items():
                q = q.where(getattr(models.FloatingIP, key) == value)
            return [self._fip_dict(s, f) for f in s.scalars(q)]

    def update_floatingip(self, ctxt, fip_id, port_id, fixed_ip_address=None,
                          description=None):
        """Associate with ``port_id`` (None: disassociate); ``description``: a new one."""
        with self.db.session(write=True) as s:
            f = self._fip(s, ctxt, fip_id, lock=True)
            if description is not None:
                f.description = description
            self._associate(s, ctxt, f, port_id, fixed_ip_address)
            s.flush()
            return self._fip_dict(s, f)

    def delete_floatingip(self, ctxt, fip_id):
        with self.db.session(write=True) as s:
            f = self._fip(s, ctxt, fip_id, lock=True)
            own = s.scalars(sa.select(models.Port).where(
                models.Port.device_owner == OWNER, models.Port.device_id == f.id)).first()
            s.delete(f)
            s.flush()
            if own is not None:
                self._delete_port(s, own)

    def instances_floating_ips(self, ctxt, instance_uuids):
        """{server uuid: {(port id, fixed address): [floating addresses]}}, one query."""
        if not instance_uuids:
            return {}
        with self.db.session() as s:
            rows = s.execute(
                sa.select(models.Port.device_id, models.FloatingIP.port_id,
                          models.FloatingIP.fixed_ip_address,
                          models.FloatingIP.floating_ip_address)
                .join(models.Port, models.Port.id == models.FloatingIP.port_id)
                .where(models.Port.device_id.in_(list(instance_uuids)))
                .order_by(models.FloatingIP.created_at)).all()
        out = {}
        for server, port_id, fixed, address in rows:
            out.setdefault(server, {}).setdefault((port_id, fixed), []).append(address)
        return out

    def _floating_of(self, s, port_ids):
        """{(port id, fixed address): floating address} of the ports' associations."""
        if not port_ids:
            return {}
        rows = s.execute(sa.select(models.FloatingIP.port_id, models.FloatingIP.fixed_ip_address,
                                   models.FloatingIP.floating_ip_address)
                         .where(models.FloatingIP.port_id.in_(list(port_ids))))
        return {(p, fixed): floating for p, fixed, floating in rows}
