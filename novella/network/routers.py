"""Routers of the embedded network service (Neutron's L3 API, without routing).

A router belongs to a project. Its gateway (``external_gateway_info``) is a
port on an external network (``device_owner`` ``network:router_gateway``,
no project: the service's own), made and deleted with the gateway; each
interface is a port on a subnet with that subnet's gateway address
(``network:router_interface``), made for a subnet or adopted from a free port,
and deleted when the interface is removed. ``routerports`` says which ports
are a router's. A router with interfaces cannot be deleted (409), nor can its
ports through the port API. No packet is forwarded: the topology is recorded
and shown, as floating IPs are.
"""
import datetime
import uuid

import sqlalchemy as sa

from novella.db.timestamps import isotime
from novella.network import models

INTERFACE, GATEWAY = "network:router_interface", "network:router_gateway"
ROUTER_OWNERS = (INTERFACE, GATEWAY)


class RouterError(Exception):
    code = 400


class RouterNotFound(RouterError):
    code = 404


class RouterInterfaceNotFound(RouterError):
    code = 404


class RouterInterfaceNotFoundForSubnet(RouterError):
    code = 404


class RouterInUse(RouterError):
    code = 409


class ServicePortInUse(RouterError):
    code = 409


def _visible(ctxt, project_id):
    return ctxt is None or ctxt.is_admin or project_id == ctxt.project_id


class RouterMixin:
    """Mixed into ``NetworkAPI`` (``self.db``, ``_new_port``, ``_delete_port``, ``_port``,
    ``_network``)."""

    # --- views -----------------------------------------------------------------------
    def _router_dict(self, s, r):
        gateway = None
        if r.gw_port_id:
            port = s.get(models.Port, r.gw_port_id)
            ips = s.scalars(sa.select(models.IPAllocation).where(
                models.IPAllocation.port_id == r.gw_port_id)
                .order_by(models.IPAllocation.subnet_id)).all()
            gateway = {"network_id": port.network_id, "enable_snat": r.enable_snat,
                       "external_fixed_ips": [{"subnet_id": a.subnet_id,
                                               "ip_address": a.ip_address} for a in ips]}
        return {"id": r.id, "name": r.name, "description": r.description,
                "project_id": r.project_id, "tenant_id": r.project_id,
                "admin_state_up": r.admin_state_up, "status": "ACTIVE",
                "external_gateway_info": gateway, "routes": [], "tags": [],
                "availability_zones": ["nova"], "availability_zone_hints": [],
                "revision_number": 1, "created_at": isotime(r.created_at),
                "updated_at": isotime(r.updated_at or r.created_at)}

    def _router(self, s, ctxt, router_id, lock=False):
        q = sa.select(models.Router).where(models.Router.id == router_id)
        r = s.scalars(q.with_for_update() if lock else q).first()
        if r is None or not _visible(ctxt, r.project_id):
            raise RouterNotFound(f"Router {router_id} could not be found")
        return r

    # --- routers -----------------------------------------------------------------------
    def create_router(self, ctxt, name="", project_id=None, admin_state_up=True,
                      external_gateway_info=None, description=""):
        with self.db.session(write=True) as s:
            r = self._add_router(s, ctxt, name, project_id or getattr(ctxt, "project_id", None),
                                 admin_state_up, external_gateway_info, description)
            return self._router_dict(s, r)

    def _add_router(self, s, ctxt, name, project_id, admin_state_up=True, gateway=None,
                    description=""):
        r = models.Router(id=str(uuid.uuid4()), name=name or "",
                          description=description or "", project_id=project_id,
                          admin_state_up=admin_state_up, enable_snat=True)
        s.add(r)
        s.flush()
        if gateway:
            self._set_gateway(s, ctxt, r, gateway)
        return r

    def _set_gateway(self, s, ctxt, r, info):
        """Point the router's gateway at ``info["network_id"]`` (an external network), or
        remove it (``info`` empty). The old gateway port goes."""
        if not isinstance(info, dict):
            raise RouterError("Invalid input for external_gateway_info: a dictionary is "
                              "required.")
        unknown = set(info) - {"network_id", "enable_snat", "external_fixed_ips"}
        if unknown:
            raise RouterError(f"Invalid input for external_gateway_info: unexpected keys "
                              f"{sorted(unknown)}.")
        network_id = info.get("network_id")
        if "enable_snat" in info:
            if not (ctxt is None or ctxt.is_admin):
                raise RouterPolicyError("(rule:update_router:external_gateway_info:enable_snat)"
                                        " is disallowed by policy")
            r.enable_snat = bool(info["enable_snat"])
        current = s.get(models.Port, r.gw_port_id) if r.gw_port_id else None
        if current is not None and current.network_id == network_id:
            return
        if network_id:
            net = s.get(models.Network, network_id)
            if net is None or not net.external:
                raise RouterError(f"Bad router request: Network {network_id} is not a valid "
                                  f"external network.")
        if current is not None:
            r.gw_port_id = None
            s.flush()
            self._delete_port(s, current)
        if network_id:
            fixed = [{"subnet_id": f.get("subnet_id"), "ip_address": f.get("ip_address")}
                     for f in info.get("external_fixed_ips") or []] or None
            port, _b, ips, _g = self._new_port(s, {
                "network_id": network_id, "device_owner": GATEWAY, "device_id": r.id,
                "fixed_ips": fixed and [{k: v for k, v in f.items() if v} for f in fixed]},
                project_id=None)
            if not ips:
                raise RouterError(f"Bad router request: external network {network_id} has no "
                                  f"subnet for the gateway.")
            s.add(models.RouterPort(router_id=r.id, port_id=port.id, port_type=GATEWAY))
            r.gw_port_id = port.id
            s.flush()

    def get_router(self, ctxt, router_id):
        with self.db.session() as s:
            return self._router_dict(s, self._router(s, ctxt, router_id))

    def list_routers(self, ctxt, **filters):
        with self.db.session() as s:
            q = sa.select(models.Router).order_by(models.Router.created_at, models.Router.id)
            if not (ctxt is None or ctxt.is_admin):
                q = q.where(models.Router.project_id == ctxt.project_id)
            for key, value in filters.items():
                q = q.where(getattr(models.Router, key) == value)
            return [self._router_dict(s, r) for r in s.scalars(q)]

    def update_router(self, ctxt, router_id, changes):
        with self.db.session(write=True) as s:
            r = self._router(s, ctxt, router_id, lock=True)
            for key in ("name", "description", "admin_state_up"):
                if key in changes:
                    setattr(r, key, changes[key] if key == "admin_state_up"
                            else changes[key] or "")
            if "external_gateway_info" in changes:
                self._set_gateway(s, ctxt, r, changes["external_gateway_info"] or {})
            r.updated_at = datetime.datetime.utcnow()
            s.flush()
            return self._router_dict(s, r)

    def delete_router(self, ctxt, router_id):
        with self.db.session(write=True) as s:
            self._remove_router(s, self._router(s, ctxt, router_id, lock=True))

    def _remove_router(self, s, r):
        if s.scalars(sa.select(models.RouterPort.port_id).where(
                models.RouterPort.router_id == r.id,
                models.RouterPort.port_type == INTERFACE)).first():
            raise RouterInUse(f"Router {r.id} still has ports")
        gateway = s.get(models.Port, r.gw_port_id) if r.gw_port_id else None
        r.gw_port_id = None
        s.flush()
        if gateway is not None:
            self._delete_port(s, gateway)
        s.execute(sa.update(models.AutoAllocatedTopology)
                  .where(models.AutoAllocatedTopology.router_id == r.id).values(router_id=None))
        s.delete(r)
        s.flush()

    # --- interfaces --------------------------------------------------------------------
    @staticmethod
    def _interface_info(r, port, subnet_ids):
        return {"id": r.id, "tenant_id": r.project_id, "project_id": r.project_id,
                "port_id": port.id, "network_id": port.network_id,
                "subnet_id": subnet_ids[0] if subnet_ids else None,
                "subnet_ids": list(subnet_ids)}

    def _router_subnets(self, s, router_id):
        """{subnet id: interface port id} of the router's interfaces."""
        rows = s.execute(sa.select(models.IPAllocation.subnet_id, models.IPAllocation.port_id)
                         .join(models.RouterPort,
                               models.RouterPort.port_id == models.IPAllocation.port_id)
                         .where(models.RouterPort.router_id == router_id,
                                models.RouterPort.port_type == INTERFACE))
        return {subnet: port for subnet, port in rows}

    def add_router_interface(self, ctxt, router_id, subnet_id=None, port_id=None):
        if bool(subnet_id) == bool(port_id):
            raise RouterError("Bad router request: Either subnet_id or port_id must be "
                              "specified, not both.")
        with self.db.session(write=True) as s:
            r = self._router(s, ctxt, router_id, lock=True)
            return self._add_interface(s, ctxt, r, subnet_id, port_id)

    def _add_interface(self, s, ctxt, r, subnet_id=None, port_id=None):
        attached = self._router_subnets(s, r.id)
        if port_id:
            port = self._port(s, port_id, lock=True)
            if not _visible(ctxt, port.project_id):
                raise RouterInterfaceNotFound(f"Port {port_id} could not be found.")
            if port.device_id or port.device_owner:
                raise ServicePortInUse(f"Port {port_id} is in use by {port.device_id or port.device_owner}.")
            subnets = list(s.scalars(sa.select(models.IPAllocation.subnet_id).where(
                models.IPAllocation.port_id == port.id).order_by(models.IPAllocation.subnet_id)))
            if not subnets:
                raise RouterError(f"Bad router request: Router port must have at least one "
                                  f"fixed IP: port {port_id} has none.")
            for sid in subnets:
                if sid in attached:
                    raise RouterError(f"Bad router request: Router already has a port on "
                                      f"subnet {sid}.")
            port.device_id, port.device_owner = r.id, INTERFACE
        else:
            sn = s.get(models.Subnet, subnet_id)
            net = s.get(models.Network, sn.network_id) if sn is not None else None
            if sn is None or not (_visible(ctxt, sn.project_id) or net.shared):
                raise RouterNotFound(f"Subnet {subnet_id} could not be found.")
            if not sn.gateway_ip:
                raise RouterError(f"Bad router request: Subnet {subnet_id} does not have a "
                                  f"gateway IP.")
            if subnet_id in attached:
                raise RouterError(f"Bad router request: Router already has a port on subnet "
                                  f"{subnet_id}.")
            port, _b, _ips, _g = self._new_port(s, {
                "network_id": sn.network_id, "device_owner": INTERFACE, "device_id": r.id,
                "fixed_ips": [{"subnet_id": sn.id, "ip_address": sn.gateway_ip}]},
                project_id=r.project_id)
            subnets = [sn.id]
        s.add(models.RouterPort(router_id=r.id, port_id=port.id, port_type=INTERFACE))
        s.flush()
        return self._interface_info(r, port, subnets)

    def remove_router_interface(self, ctxt, router_id, subnet_id=None, port_id=None):
        """The interface (on ``subnet_id``, or the port ``port_id``) goes, and its port."""
        if not (subnet_id or port_id):
            raise RouterError("Bad router request: Either subnet_id or port_id must be "
                              "specified.")
        with self.db.session(write=True) as s:
            r = self._router(s, ctxt, router_id, lock=True)
            attached = self._router_subnets(s, r.id)
            if port_id:
                if port_id not in attached.values():
                    raise RouterInterfaceNotFound(
                        f"Router {router_id} does not have an interface with id {port_id}")
                if subnet_id and attached.get(subnet_id) != port_id:
                    raise RouterError(f"Bad router request: Subnet {subnet_id} is not on "
                                      f"port {port_id}.")
            else:
                port_id = attached.get(subnet_id)
                if port_id is None:
                    raise RouterInterfaceNotFoundForSubnet(
                        f"Router {router_id} has no interface on subnet {subnet_id}")
            port = self._port(s, port_id, lock=True)
            subnets = sorted(sid for sid, pid in attached.items() if pid == port_id)
            info = self._interface_info(r, port, subnets)
            self._delete_port(s, port)
            return info


class RouterPolicyError(RouterError):
    code = 403
