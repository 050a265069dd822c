"""The network service client: networks, subnets, ports and port bindings.

Ports are dicts with Neutron's field names (``binding:host_id``,
``binding:profile``, ``binding:vif_type``, ``binding:vnic_type``,
``resource_request``, ...). Bindings follow the port-bindings-extended model:
a port has one binding row per host; exactly one is ``ACTIVE`` (an unbound
port keeps an active row for host ``''``) and the port's ``binding:*`` fields
show that row. A move creates an ``INACTIVE`` binding on the destination,
activates it when the server runs there, and deletes the other one.

The instance-level calls (``allocate_for_instance``, ``bind_ports_to_host``,
``migrate_instance_finish``, ...) are what compute and conductor use; each
runs in one transaction, so a failure half-way leaves nothing behind.
"""
import datetime
import functools
import ipaddress
import random
import socket
import uuid

import sqlalchemy as sa

from novella.db import migrate
from novella.db.engine import Database
from novella.db.timestamps import isotime
from novella.network import models
from novella.network.qos import (BANDWIDTH_CLASSES, PACKET_RATE_CLASSES,  # noqa: F401
                                 QosMixin, QosPolicyNotFound)
from novella.network.floating_ips import FloatingIPMixin
from novella.network.security_groups import SecurityGroupMixin
from novella.network.trunks import TrunkConflict, TrunkMixin
from novella.network.auto_allocate import AutoAllocateMixin
from novella.network.routers import ROUTER_OWNERS, RouterMixin, ServicePortInUse
from novella.network.subnetpools import SubnetPoolMixin

ACTIVE, INACTIVE = "ACTIVE", "INACTIVE"
# The vNIC types ports may have: Open vSwitch's, and the SR-IOV agent's (a VF, a VF
# through macvtap, a whole PF), whose devices compute claims (novella/compute/pci.py).
VNIC_TYPES = ("normal", "direct", "macvtap", "direct-physical")
SRIOV_VNIC_TYPES = ("direct", "macvtap", "direct-physical")
# A port's attributes kept as given and shown back (no behaviour here), with the
# check of a value Neutron accepts.
PORT_KEPT_ATTRIBUTES = {
    "description": lambda v: isinstance(v, str) and len(v) <= 255,
    "dns_name": lambda v: isinstance(v, str) and len(v) <= 255,
    "propagate_uplink_status": lambda v: isinstance(v, bool),
    "allowed_address_pairs": lambda v: isinstance(v, list) and all(
        isinstance(p, dict) and "ip_address" in p and set(p) <= {"ip_address", "mac_address"}
        and _is_network(p["ip_address"]) for p in v),
    "extra_dhcp_opts": lambda v: isinstance(v, list) and all(
        isinstance(o, dict) and isinstance(o.get("opt_name"), str)
        and set(o) <= {"opt_name", "opt_value", "ip_version"} for o in v),
}
UPDATABLE = {"name", "device_id", "device_owner", "admin_state_up", "qos_policy_id",
             "binding:host_id", "binding:profile", "binding:vnic_type", "resource_request",
             "security_groups"} | set(PORT_KEPT_ATTRIBUTES)


def _is_network(value):
    try:
        ipaddress.ip_network(value, strict=False)
        return True
    except (TypeError, ValueError):
        return False


def _kept_port_attributes(body):
    """The PORT_KEPT_ATTRIBUTES of a port body; InvalidInput for a value Neutron refuses."""
    kept = {k: body[k] for k in PORT_KEPT_ATTRIBUTES if k in body}
    for key, value in kept.items():
        if not PORT_KEPT_ATTRIBUTES[key](value):
            raise InvalidInput(f"Invalid input for {key}: {value!r}.")
    return kept


class NetworkError(Exception):
    code = 400


class InvalidInput(NetworkError):
    pass


# What a subnet keeps beyond its cidr, network, pool and ip version (Neutron's create
# attributes); SUBNET_UPDATABLE is what a PUT may change.
SUBNET_ATTRIBUTES = {"name", "description", "gateway_ip", "allocation_pools", "enable_dhcp",
                     "dns_nameservers", "host_routes", "ipv6_ra_mode", "ipv6_address_mode"}
SUBNET_UPDATABLE = SUBNET_ATTRIBUTES - {"ipv6_ra_mode", "ipv6_address_mode"}
IPV6_MODES = (None, "slaac", "dhcpv6-stateful", "dhcpv6-stateless")


def _address(value, what):
    try:
        return ipaddress.ip_address(value)
    except (TypeError, ValueError):
        raise InvalidInput(f"Invalid input for {what}: '{value}' is not a valid IP address.")


def _in_pools(address, pools):
    ip = ipaddress.ip_address(address)
    return any(ipaddress.ip_address(p["start"]) <= ip <= ipaddress.ip_address(p["end"])
               for p in pools)


def _check_subnet_attributes(net, attrs):
    """400 (InvalidInput) for a subnet attribute of ``attrs`` Neutron would refuse
    on the subnet of range ``net``."""
    gateway = attrs.get("gateway_ip")
    if gateway is not None and _address(gateway, "gateway_ip") not in net:
        raise InvalidInput(f"Invalid input for gateway_ip: {gateway} is not in {net}.")
    pools = attrs.get("allocation_pools")
    if pools is not None:
        if not isinstance(pools, list) or not all(
                isinstance(p, dict) and set(p) == {"start", "end"} for p in pools):
            raise InvalidInput("Invalid input for allocation_pools: a list of "
                               "{'start': address, 'end': address}.")
        for p in pools:
            start, end = _address(p["start"], "allocation_pools"), _address(p["end"],
                                                                            "allocation_pools")
            if start not in net or end not in net or start > end:
                raise InvalidInput(f"Invalid input for allocation_pools: {p['start']}-"
                                   f"{p['end']} is not a range of {net}.")
    servers = attrs.get("dns_nameservers")
    if servers is not None:
        if not isinstance(servers, list):
            raise InvalidInput("Invalid input for dns_nameservers: a list of addresses.")
        for server in servers:
            _address(server, "dns_nameservers")
        if len(set(servers)) != len(servers):
            raise InvalidInput("Invalid input for dns_nameservers: duplicate address.")
    routes = attrs.get("host_routes")
    if routes is not None:
        if not isinstance(routes, list) or not all(
                isinstance(r, dict) and set(r) == {"destination", "nexthop"} for r in routes):
            raise InvalidInput("Invalid input for host_routes: a list of "
                               "{'destination': cidr, 'nexthop': address}.")
        for r in routes:
            try:
                ipaddress.ip_network(r["destination"])
            except (TypeError, ValueError):
                raise InvalidInput(f"Invalid input for host_routes: '{r['destination']}' "
                                   "is not a valid CIDR.")
            _address(r["nexthop"], "host_routes")
    for key in ("ipv6_ra_mode", "ipv6_address_mode"):
        if attrs.get(key) not in IPV6_MODES or (attrs.get(key) and net.version != 6):
            raise InvalidInput(f"Invalid input for {key}: '{attrs[key]}' (one of slaac, "
                               "dhcpv6-stateful, dhcpv6-stateless, on an IPv6 subnet).")
    for key in ("name", "description"):
        if attrs.get(key) is not None and (not isinstance(attrs[key], str)
                                           or len(attrs[key]) > 255):
            raise InvalidInput(f"Invalid input for {key}: a string of at most 255 characters.")


class NotFound(NetworkError):
    code = 404


class NetworkNotFound(NotFound):
    pass


class SubnetNotFound(NotFound):
    pass


class PortNotFound(NotFound):
    pass


class PortBindingNotFound(NotFound):
    pass


class Conflict(NetworkError):
    code = 409


class NetworkInUse(Conflict):
    pass


class SubnetInUse(Conflict):
    pass


class NetworkAmbiguous(Conflict):
    pass


class DefaultExternalNetworkExists(Conflict):
    pass


class PortInUse(Conflict):
    pass


class IpAddressAlreadyAllocated(Conflict):
    pass


class IpAddressGenerationFailure(Conflict):
    """No address left in the subnet."""


class PortBindingAlreadyExists(Conflict):
    pass


class PortBindingAlreadyActive(Conflict):
    pass


class PortBindingFailed(Conflict):
    pass


def _retry_on_duplicate(fn):
    """Run again when a concurrent writer took the same IP or MAC first."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        for attempt in range(5):
            try:
                return fn(*args, **kwargs)
            except sa.exc.IntegrityError:
                if attempt == 4:
                    raise
    return wrapper


def _ip_text(version, value):
    """An address as the service writes it; IPv4 without ipaddress's object per address."""
    if version == 4:
        return socket.inet_ntoa(value.to_bytes(4, "big"))
    return str(ipaddress.IPv6Address(value))


def _ip_int(version, text):
    """``_ip_text`` reversed."""
    if version == 4:
        return int.from_bytes(socket.inet_aton(text), "big")
    return int(ipaddress.IPv6Address(text))


# Addresses looked up per query when searching a pool for a free one.
FREE_IP_WINDOW = 64

_TAKEN = sa.select(models.IPAllocation.ip_address).where(
    models.IPAllocation.subnet_id == sa.bindparam("b_subnet"),
    models.IPAllocation.ip_address.in_(sa.bindparam("b_addresses", expanding=True)))


def _taken(s, subnet_id, addresses):
    """Which of ``addresses`` (text) the subnet has given out."""
    return set(s.scalars(_TAKEN, {"b_subnet": subnet_id, "b_addresses": list(addresses)}))


_NETWORK_AND_SUBNETS = (sa.select(models.Network, models.Subnet)
                        .outerjoin(models.Subnet, models.Subnet.network_id == models.Network.id)
                        .where(models.Network.id == sa.bindparam("b_id"))
                        .order_by(models.Subnet.created_at, models.Subnet.id))


def _is_admin(ctxt):
    return ctxt is None or ctxt.is_admin


class NetworkAPI(QosMixin, SecurityGroupMixin, FloatingIPMixin, TrunkMixin, RouterMixin,
                 SubnetPoolMixin, AutoAllocateMixin):
    def __init__(self, db):
        self.db = db if isinstance(db, Database) else Database(db)
        migrate.require("network", self.db.engine)  # made by `novella manage api_db sync`
        # Fault injection: binding a port to one of these hosts fails.
        self.unbindable_hosts = set()
        # {network id: {(subnet id, pool start): the lowest address free when last looked}}
        self._free_from = {}

    # --- networks and subnets ---------------------------------------------------------
    @staticmethod
    def _network_dict(s, n, subnets=None):
        """``subnets``: the network's subnet ids when the caller has them."""
        if subnets is None:
            subnets = s.scalars(sa.select(models.Subnet.id).where(models.Subnet.network_id == n.id)
                                .order_by(models.Subnet.created_at, models.Subnet.id)).all()
        return {"id": n.id, "name": n.name, "project_id": n.project_id, "tenant_id": n.project_id,
                "shared": n.shared, "admin_state_up": n.admin_state_up, "status": n.status,
                "mtu": n.mtu, "provider:network_type": n.network_type,
                "provider:physical_network": n.physical_network,
                "qos_policy_id": n.qos_policy_id, "subnets": list(subnets),
                "router:external": n.external, "is_default": n.is_default,
                "description": n.description or "", "created_at": isotime(n.created_at), "updated_at": isotime(n.updated_at)}

    @staticmethod
    def _subnet_dict(sn):
        return {"id": sn.id, "network_id": sn.network_id, "name": sn.name, "cidr": sn.cidr,
                "ip_version": sn.ip_version, "gateway_ip": sn.gateway_ip,
                "enable_dhcp": sn.enable_dhcp, "allocation_pools": list(sn.allocation_pools),
                "subnetpool_id": sn.subnetpool_id, "description": sn.description or "",
                "dns_nameservers": list(sn.dns_nameservers or []),
                "host_routes": list(sn.host_routes or []),
                "ipv6_ra_mode": sn.ipv6_ra_mode, "ipv6_address_mode": sn.ipv6_address_mode,
                "project_id": sn.project_id, "tenant_id": sn.project_id,
                "created_at": isotime(sn.created_at),
                "updated_at": isotime(sn.updated_at or sn.created_at)}

    def create_network(self, ctxt, name, cidr=None, shared=False, project_id=None, mtu=1500,
                       physical_network=None, network_type=None, qos_policy_id=None,
                       id=None, external=False, is_default=False,  # noqa: A002
                       admin_state_up=True, description=""):
        """A network; with ``cidr`` also its subnet (named ``<name>-subnet``).
        ``is_default``: the default external network (``external`` too)."""
        n = models.Network(id=id or str(uuid.uuid4()), name=name, shared=shared, mtu=mtu,
                           external=external, is_default=bool(is_default),
                           admin_state_up=admin_state_up, description=description or "",
                           project_id=project_id or getattr(ctxt, "project_id", None),
                           physical_network=physical_network, qos_policy_id=qos_policy_id,
                           network_type=network_type or ("flat" if physical_network else "vxlan"))
        with self.db.session(write=True) as s:
            if qos_policy_id:
                self._check_policy_usable(s, ctxt, qos_policy_id)
            else:  # the project's default policy, if it has one
                n.qos_policy_id = self.default_qos_policy_id(s, n.project_id)
            if n.is_default:
                self._check_default_external(s, n)
            s.add(n)
            s.flush()
            if cidr:
                self._add_subnet(s, n, cidr, name=f"{name}-subnet")
            return self._network_dict(s, n)

    @staticmethod
    def _check_default_external(s, n):
        """``n`` may be the default external network: external, and no other one is."""
        if not n.external:
            raise InvalidInput("Invalid input for is_default: only an external network "
                               "(router:external) can be the default one.")
        other = s.scalars(sa.select(models.Network.id).where(
            models.Network.external.is_(True), models.Network.is_default.is_(True),
            models.Network.id != n.id)).first()
        if other is not None:
            raise DefaultExternalNetworkExists(
                f"A default external network already exists: {other}.")

    def update_network(self, ctxt, network_id, changes):
        """``name``, ``description``, ``admin_state_up``, ``mtu``, ``shared``,
        ``is_default`` (of an external network)."""
        unknown = set(changes) - {"name", "description", "admin_state_up", "is_default", "mtu",
                                  "shared"}
        if "mtu" in changes and (not isinstance(changes["mtu"], int)
                                 or isinstance(changes["mtu"], bool)
                                 or not 68 <= changes["mtu"] <= 9000):
            raise InvalidInput(f"Invalid input for mtu: '{changes['mtu']}' is not an integer "
                               "from 68 to 9000.")
        if unknown:
            raise InvalidInput(f"Cannot update read-only attribute {sorted(unknown)[0]}")
        with self.db.session(write=True) as s:
            n = s.get(models.Network, network_id, with_for_update=True)
            if n is None or not (_is_admin(ctxt) or n.project_id == ctxt.project_id):
                raise NetworkNotFound(f"network {network_id} could not be found")
            if "name" in changes:
                n.name = changes["name"] or ""
            if "description" in changes:
                n.description = changes["description"] or ""
            if "admin_state_up" in changes:
                n.admin_state_up = bool(changes["admin_state_up"])
            if "mtu" in changes:
                n.mtu = changes["mtu"]
            if "shared" in changes:
                n.shared = bool(changes["shared"])
            if "is_default" in changes:
                n.is_default = bool(changes["is_default"])
                if n.is_default:
                    self._check_default_external(s, n)
            n.updated_at = datetime.datetime.utcnow()
            s.flush()
            return self._network_dict(s, n)

    def ensure_default_network(self, ctxt, name="private", cidr="10.0.0.0/24"):
        """The shared network servers get when they ask for none in particular."""
        for net in self.list_networks(None, name=name):
            return net
        return self.create_network(ctxt, name, cidr=cidr, shared=True)

    def _network(self, s, network_id):
        n = s.get(models.Network, network_id)
        if n is None:
            raise NetworkNotFound(f"network {network_id} could not be found")
        return n

    def _network_of(self, s, network_id):
        """``_network``, held for the session: its identity map keeps unreferenced rows
        only weakly, and a port's network is read several times while building its views.
        Its subnets come in the same statement (``_subnets_of``)."""
        held = s.info.setdefault("networks", {})
        if network_id not in held:
            rows = s.execute(_NETWORK_AND_SUBNETS, {"b_id": network_id}).all()
            if not rows:
                raise NetworkNotFound(f"network {network_id} could not be found")
            held[network_id] = rows[0][0]
            s.info.setdefault("subnets", {})[network_id] = [sn for _n, sn in rows
                                                            if sn is not None]
        return held[network_id]

    def _subnets_of(self, s, network_id):
        """The network's subnets in creation order, read once per session as ``_network_of``."""
        held = s.info.setdefault("subnets", {})
        if network_id not in held:
            held[network_id] = s.scalars(
                sa.select(models.Subnet).where(models.Subnet.network_id == network_id)
                .order_by(models.Subnet.created_at, models.Subnet.id)).all()
        return held[network_id]

    def get_network(self, ctxt, network_id):
        with self.db.read_session() as s:
            n = self._network_of(s, network_id)
            if not (_is_admin(ctxt) or n.shared or n.external
                    or n.project_id == ctxt.project_id):
                raise NetworkNotFound(f"network {network_id} could not be found")
            return self._network_dict(s, n, [sn.id for sn in self._subnets_of(s, n.id)])

    def list_networks(self, ctxt, **filters):
        """Networks visible to the context (its project's and shared ones)."""
        with self.db.session() as s:
            q = sa.select(models.Network)
            if not _is_admin(ctxt):
                q = q.where(sa.or_(models.Network.project_id == ctxt.project_id,
                                   models.Network.shared.is_(True),
                                   models.Network.external.is_(True)))
            for key, value in filters.items():
                key = {"tenant_id": "project_id", "router:external": "external"}.get(key, key)
                col = getattr(models.Network, key)
                q = q.where(col.in_(value) if isinstance(value, (list, tuple, set)) else col == value)
            rows = s.scalars(q.order_by(models.Network.created_at, models.Network.id)).all()
            return [self._network_dict(s, n) for n in rows]

    def delete_network(self, ctxt, network_id):
        with self.db.session(write=True) as s:
            self._remove_network(s, self._network(s, network_id))

    def _remove_network(self, s, n):
        """The network and its subnets (its auto-allocated topology row goes by its key)."""
        if s.scalar(sa.select(sa.func.count()).select_from(models.Port)
                    .where(models.Port.network_id == n.id)):
            raise NetworkInUse(f"network {n.id} has ports")
        s.execute(sa.delete(models.AutoAllocatedTopology)
                  .where(models.AutoAllocatedTopology.network_id == n.id))
        s.execute(sa.delete(models.Subnet).where(models.Subnet.network_id == n.id))
        s.delete(n)
        s.flush()

    def _add_subnet(self, s, network, cidr, name=None, gateway_ip=None, allocation_pools=None,
                    enable_dhcp=True, subnetpool_id=None, **attrs):
        """``attrs``: the other SUBNET_ATTRIBUTES."""
        net = ipaddress.ip_network(cidr, strict=False)
        _check_subnet_attributes(net, dict(attrs, gateway_ip=gateway_ip,
                                           allocation_pools=allocation_pools))
        hosts = net.hosts() if net.num_addresses > 2 else iter(net)
        first = next(hosts)
        gateway = gateway_ip or str(first)
        if allocation_pools is None:
            start = first + 1 if str(first) == gateway else first
            last = net.broadcast_address - 1 if net.version == 4 else net[-1]
            allocation_pools = [{"start": str(start), "end": str(last)}]
        sn = models.Subnet(id=str(uuid.uuid4()), network_id=network.id, name=name, cidr=str(net),
                           ip_version=net.version, gateway_ip=gateway, enable_dhcp=enable_dhcp,
                           allocation_pools=allocation_pools, project_id=network.project_id,
                           subnetpool_id=subnetpool_id, **attrs)
        s.add(sn)
        s.flush()
        return sn

    def create_subnet(self, ctxt, network_id, cidr, name=None, gateway_ip=None,
                      allocation_pools=None, enable_dhcp=True, subnetpool_id=None,
                      prefixlen=None, use_default_subnetpool=False, ip_version=4, **attrs):
        """A subnet of ``cidr``, or of the next free block of a subnet pool
        (``subnetpool_id``, or the default pool of ``ip_version``); ``attrs``: the
        other SUBNET_ATTRIBUTES."""
        with self.db.session(write=True) as s:
            network = self._network(s, network_id)
            pool = None
            if subnetpool_id:
                pool = self._pool(s, ctxt, subnetpool_id)
            elif use_default_subnetpool:
                pool = self._default_pool(s, ip_version)
                if pool is None:
                    raise InvalidInput(f"No default subnet pool of IPv{ip_version} exists.")
            if pool is not None:
                cidr = self._cut_from_pool(s, pool, prefixlen) if not cidr \
                    else self._check_in_pool(s, pool, cidr)
            elif not cidr:
                raise InvalidInput("A subnet needs a cidr or a subnet pool.")
            sn = self._add_subnet(s, network, cidr, name, gateway_ip, allocation_pools,
                                  enable_dhcp, subnetpool_id=pool.id if pool else None, **attrs)
            return self._subnet_dict(sn)

    def update_subnet(self, ctxt, subnet_id, changes):
        """Change SUBNET_UPDATABLE attributes; the gateway and the pools must stay in the
        subnet's range and the pools keep every address already allocated."""
        unknown = set(changes) - SUBNET_UPDATABLE
        if unknown:
            raise InvalidInput(f"Cannot update read-only attribute {sorted(unknown)[0]}")
        with self.db.session(write=True) as s:
            sn = s.get(models.Subnet, subnet_id, with_for_update=True)
            if sn is None:
                raise SubnetNotFound(f"subnet {subnet_id} could not be found")
            _check_subnet_attributes(ipaddress.ip_network(sn.cidr), changes)
            if changes.get("allocation_pools") is not None:
                used = s.scalars(sa.select(models.IPAllocation.ip_address)
                                 .where(models.IPAllocation.subnet_id == sn.id)).all()
                outside = [ip for ip in used if not _in_pools(ip, changes["allocation_pools"])
                           and ip != (changes.get("gateway_ip") or sn.gateway_ip)]
                if outside:
                    raise InvalidInput(f"Invalid input for allocation_pools: {outside[0]} is "
                                       "allocated and outside the new pools.")
            for key, value in changes.items():
                if key in ("name", "description"):
                    value = value or ""
                elif key in ("dns_nameservers", "host_routes"):
                    value = list(value or [])
                elif key == "enable_dhcp":
                    value = bool(value)
                elif key == "allocation_pools" and value is None:
                    continue
                setattr(sn, key, value)
            sn.updated_at = datetime.datetime.utcnow()
            s.flush()
            network_id, result = sn.network_id, self._subnet_dict(sn)
        self._free_from.pop(network_id, None)  # the pools may have changed
        return result

    @staticmethod
    def _check_in_pool(s, pool, cidr):
        net = ipaddress.ip_network(cidr, strict=False)
        if not any(net.subnet_of(ipaddress.ip_network(p)) for p in pool.prefixes
                   if ipaddress.ip_network(p).version == net.version):
            raise InvalidInput(f"Invalid input for cidr: {cidr} is not in subnet pool "
                               f"{pool.id}.")
        for used in s.scalars(sa.select(models.Subnet.cidr)
                              .where(models.Subnet.subnetpool_id == pool.id)):
            if ipaddress.ip_network(used).overlaps(net):
                raise InvalidInput(f"Invalid input for cidr: {cidr} overlaps {used}, "
                                   f"allocated from subnet pool {pool.id}.")
        return str(net)

    def get_subnet(self, ctxt, subnet_id):
        with self.db.session() as s:
            sn = s.get(models.Subnet, subnet_id)
            if sn is None:
                raise SubnetNotFound(f"subnet {subnet_id} could not be found")
            return self._subnet_dict(sn)

    def delete_subnet(self, ctxt, subnet_id):
        """Delete a subnet no port has an address from; SubnetInUse otherwise."""
        with self.db.session(write=True) as s:
            sn = s.get(models.Subnet, subnet_id)
            if sn is None:
                raise SubnetNotFound(f"subnet {subnet_id} could not be found")
            if s.scalar(sa.select(sa.func.count()).select_from(models.IPAllocation)
                        .where(models.IPAllocation.subnet_id == sn.id)):
                raise SubnetInUse(f"Unable to complete operation on subnet {subnet_id}: "
                                  "One or more ports have an IP allocation from this subnet.")
            network_id = sn.network_id
            s.delete(sn)
        free = self._free_from.get(network_id, {})
        for key in [k for k in free if k[0] == subnet_id]:
            free.pop(key, None)

    def list_subnets(self, ctxt, network_id=None):
        with self.db.session() as s:
            q = sa.select(models.Subnet)
            if network_id:
                q = q.where(models.Subnet.network_id == network_id)
            return [self._subnet_dict(sn) for sn in
                    s.scalars(q.order_by(models.Subnet.created_at, models.Subnet.id))]

    # --- ports ---------------------------------------------------------------------------
    def _port(self, s, port_id, lock=False):
        # lock: the port row is held until commit, so two writers changing
        # one port's bindings run one after the other on every backend.
        p = s.get(models.Port, port_id, with_for_update=True if lock else None)
        if p is None:
            raise PortNotFound(f"port {port_id} could not be found")
        return p

    @staticmethod
    def _bindings(s, port_id):
        return s.scalars(sa.select(models.PortBinding).where(models.PortBinding.port_id == port_id)
                         .order_by(models.PortBinding.host)).all()

    def _active(self, s, port_id):
        return next(b for b in self._bindings(s, port_id) if b.status == ACTIVE)

    def _resource_request(self, s, p):
        if p.resource_request is not None:
            return p.resource_request
        return self._qos_resource_request(s, p)

    def _port_dict(self, s, p, known=None):
        """``known``: (active binding, IP allocations, security group ids) when the
        caller just made them."""
        if known is not None:
            active, ips = known[0], sorted(known[1], key=lambda a: a.subnet_id)
            groups = sorted(known[2])
        else:
            active = self._active(s, p.id)
            ips = s.scalars(sa.select(models.IPAllocation).where(models.IPAllocation.port_id == p.id)
                            .order_by(models.IPAllocation.subnet_id)).all()
            groups = self._port_group_ids(s, p.id)
        return {"id": p.id, "name": p.name, "network_id": p.network_id,
                "project_id": p.project_id, "tenant_id": p.project_id,
                "mac_address": p.mac_address, "admin_state_up": p.admin_state_up,
                "status": p.status, "device_id": p.device_id, "device_owner": p.device_owner,
                "fixed_ips": [{"subnet_id": a.subnet_id, "ip_address": a.ip_address} for a in ips],
                "binding:host_id": active.host, "binding:profile": dict(active.profile or {}),
                "binding:vif_type": active.vif_type,
                "binding:vif_details": dict(active.vif_details or {}),
                "binding:vnic_type": p.vnic_type, "qos_policy_id": p.qos_policy_id,
                "qos_network_policy_id": self._network_of(s, p.network_id).qos_policy_id,
                "resource_request": self._resource_request(s, p),
                "security_groups": groups, "port_security_enabled": True, **(p.kept or {}),
                "created_for_instance": p.created_for_instance,
                "created_at": isotime(p.created_at), "updated_at": isotime(p.updated_at)}

    def _allocate_ip(self, s, network_id, request):
        # Locking the network's subnets makes concurrent allocations queue up;
        # each then sees the others' addresses once they commit. SQLite's write
        # transaction already holds the whole database.
        if s.bind.dialect.name != "sqlite":
            s.execute(sa.select(models.Subnet.id).where(models.Subnet.network_id == network_id)
                      .order_by(models.Subnet.id).with_for_update())
        subnets = self._subnets_of(s, network_id)
        if request.get("subnet_id"):
            subnets = [sn for sn in subnets if sn.id == request["subnet_id"]]
            if not subnets:
                raise SubnetNotFound(f"subnet {request['subnet_id']} is not on network {network_id}")
        wanted = request.get("ip_address")
        if wanted:  # as the service writes it, so that one address has one spelling
            wanted = str(ipaddress.ip_address(wanted))
        for sn in subnets:
            if wanted:
                if ipaddress.ip_address(wanted) not in ipaddress.ip_network(sn.cidr):
                    continue
                if _taken(s, sn.id, [wanted]):
                    raise IpAddressAlreadyAllocated(
                        f"IP address {wanted} already allocated in subnet {sn.id}")
                return sn, wanted
            for pool in sn.allocation_pools:
                value = self._lowest_free(s, sn, int(ipaddress.ip_address(pool["start"])),
                                          int(ipaddress.ip_address(pool["end"])))
                if value is not None:
                    return sn, _ip_text(sn.ip_version, value)
            if request.get("subnet_id"):
                break
        if wanted:
            raise NetworkError(f"IP address {wanted} is not in a subnet of network {network_id}")
        raise IpAddressGenerationFailure(f"no more IP addresses on network {network_id}")

    def _lowest_free(self, s, sn, start, end):
        """The lowest free address of the pool ``start``..``end`` (as integers), or None.

        Addresses are looked up a window at a time, starting from where this
        service last found the lowest free one (every address below it was
        taken then): a subnet's allocations are not all read for each port.
        Deleting a port here starts the search from the pool's start again; an
        address freed by another process is found then, or when nothing above
        the hint is free.
        """
        hints = self._free_from.setdefault(sn.network_id, {})
        key = (sn.id, start)
        hint = max(start, hints.pop(key, start))
        # From the hint to the end, then (for what another process freed) the rest.
        for first, last in ((hint, end), (start, hint - 1)):
            value = first
            while value <= last:
                window = [_ip_text(sn.ip_version, v)
                          for v in range(value, min(value + FREE_IP_WINDOW, last + 1))]
                taken = _taken(s, sn.id, window) | {sn.gateway_ip}
                for text in window:
                    if text not in taken:
                        free = _ip_int(sn.ip_version, text)
                        hints[key] = free  # still free if this transaction rolls back
                        return free
                value += len(window)
        return None

    def _create_port(self, s, body, project_id=None):
        return self._new_port(s, body, project_id)[0]

    def _new_port(self, s, body, project_id=None, groups_checked=False):
        """A port, its IP allocations, its active binding and its security groups:
        (port, binding, [allocations], [group ids]).

        ``groups_checked``: the body's ``security_groups`` are ids the caller found.
        """
        network = self._network_of(s, body.get("network_id"))
        if body.get("qos_policy_id"):
            self._check_policy_usable(s, None, body["qos_policy_id"])
        _check_vnic_type(body.get("binding:vnic_type"))
        p = models.Port(id=body.get("id") or str(uuid.uuid4()), network_id=network.id,
                        name=body.get("name"),
                        project_id=body.get("project_id") or body.get("tenant_id") or project_id,
                        mac_address=body.get("mac_address") or _random_mac(),
                        admin_state_up=body.get("admin_state_up", True),
                        device_id=body.get("device_id") or "",
                        device_owner=body.get("device_owner") or "",
                        vnic_type=body.get("binding:vnic_type") or "normal",
                        qos_policy_id=body.get("qos_policy_id"),
                        resource_request=body.get("resource_request"),
                        created_for_instance=bool(body.get("created_for_instance")),
                        kept=_kept_port_attributes(body))
        host = body.get("binding:host_id") or ""
        vif_type, details = self._vif(host, p.vnic_type)
        p.status = ACTIVE if host and p.device_owner.startswith("compute:") else "DOWN"
        requests = body.get("fixed_ips")
        if requests is None:
            requests = [{}] if self._subnets_of(s, network.id) else []
        s.add(p)  # first: the rows below refer to it, and the session inserts in this order
        ips = []
        for req in requests:  # each query flushes the addresses taken before it
            subnet, address = self._allocate_ip(s, network.id, req)
            ips.append(models.IPAllocation(subnet_id=subnet.id, ip_address=address, port_id=p.id,
                                           network_id=network.id))
            s.add(ips[-1])
        # Bound straight to the host asked for, if any (no unbound binding to replace).
        binding = models.PortBinding(port_id=p.id, host=host, status=ACTIVE, vif_type=vif_type,
                                     vif_details=details, vnic_type=p.vnic_type,
                                     profile=dict(body.get("binding:profile") or {}))
        s.add(binding)
        s.flush()
        groups = []
        if not p.device_owner.startswith("network:"):  # the service's own ports have none
            groups = self._set_port_groups(s, None, p, body.get("security_groups"), new=True,
                                           checked=groups_checked)
        return p, binding, ips, groups

    @_retry_on_duplicate
    def create_port(self, ctxt, body):
        """A port from a Neutron-style body (``network_id`` required)."""
        with self.db.session(write=True) as s:
            if body.get("qos_policy_id"):
                self._check_policy_usable(s, ctxt, body["qos_policy_id"])
            p = self._create_port(s, body, getattr(ctxt, "project_id", None))
            return self._port_dict(s, p)

    def get_port(self, ctxt, port_id):
        with self.db.session() as s:
            p = self._port(s, port_id)
            if not (_is_admin(ctxt) or p.project_id == ctxt.project_id):
                raise PortNotFound(f"port {port_id} could not be found")
            return self._port_dict(s, p)

    def list_ports(self, ctxt, filters=None, **kw):
        """Ports matching Neutron-style filters (a list value matches any of its items)."""
        filters = dict(filters or {}, **kw)
        host = filters.pop("binding:host_id", None)
        with self.db.session() as s:
            q = sa.select(models.Port)
            if not _is_admin(ctxt):
                q = q.where(models.Port.project_id == ctxt.project_id)
            if host is not None:
                q = q.join(models.PortBinding, sa.and_(models.PortBinding.port_id == models.Port.id,
                                                       models.PortBinding.status == ACTIVE)) \
                     .where(models.PortBinding.host.in_(_as_list(host)))
            for key, value in filters.items():
                col = getattr(models.Port, "project_id" if key == "tenant_id" else key, None)
                if col is None:
                    raise NetworkError(f"cannot filter ports on {key!r}")
                q = q.where(col.in_(_as_list(value)))
            rows = s.scalars(q.order_by(models.Port.created_at, models.Port.id)).all()
            return [self._port_dict(s, p) for p in rows]

    def update_port(self, ctxt, port_id, body):
        """Change a port; ``binding:host_id`` / ``binding:profile`` change its active binding."""
        unknown = set(body) - UPDATABLE
        if unknown:
            raise NetworkError(f"cannot update {sorted(unknown)}")
        kept = _kept_port_attributes(body)
        with self.db.session(write=True) as s:
            p = self._port(s, port_id, lock=True)
            if kept:
                p.kept = dict(p.kept or {}, **kept)
            if "qos_policy_id" in body:
                if body["qos_policy_id"]:
                    self._check_policy_usable(s, ctxt, body["qos_policy_id"])
                self._change_port_policy(s, p, body["qos_policy_id"])
            for key in ("name", "admin_state_up", "qos_policy_id", "resource_request"):
                if key in body:
                    setattr(p, key, body[key])
            for key in ("device_id", "device_owner"):
                if key in body:
                    setattr(p, key, body[key] or "")
            if "security_groups" in body:
                self._set_port_groups(s, ctxt, p, list(body["security_groups"] or []))
            if "binding:vnic_type" in body:
                _check_vnic_type(body["binding:vnic_type"])
                if body["binding:vnic_type"] != p.vnic_type and self._active(s, p.id).host:
                    raise PortInUse(f"Port {p.id} is bound to {self._active(s, p.id).host}: "
                                    f"its binding:vnic_type cannot change.")
                p.vnic_type = body["binding:vnic_type"]
            if {"binding:host_id", "binding:profile", "binding:vnic_type"} & set(body):
                active = self._active(s, p.id)
                self._rebind_active(s, p, body.get("binding:host_id", active.host) or "",
                                    body.get("binding:profile", active.profile) or {})
            self._set_status(s, p)
            p.updated_at = datetime.datetime.utcnow()
            return self._port_dict(s, p)

    def delete_port(self, ctxt, port_id):
        """A port; a router's (interface, gateway) only through the router API."""
        with self.db.session(write=True) as s:
            p = self._port(s, port_id, lock=True)
            if p.device_owner in ROUTER_OWNERS:
                raise ServicePortInUse(f"Port {p.id} cannot be deleted directly via the port "
                                       f"API: has device owner {p.device_owner}.")
            self._delete_port(s, p)

    def _delete_port(self, s, p):
        if s.scalars(sa.select(models.Trunk.id).where(models.Trunk.port_id == p.id)).first() \
                or s.get(models.SubPort, p.id) is not None:
            raise TrunkConflict(f"Port {p.id} is currently in use by a trunk.")
        self._free_from.pop(p.network_id, None)  # its addresses are free again
        s.execute(sa.delete(models.IPAllocation).where(models.IPAllocation.port_id == p.id))
        s.execute(sa.delete(models.PortBinding).where(models.PortBinding.port_id == p.id))
        s.execute(sa.delete(models.SecurityGroupPortBinding)
                  .where(models.SecurityGroupPortBinding.port_id == p.id))
        s.execute(sa.update(models.FloatingIP).where(models.FloatingIP.port_id == p.id)
                  .values(port_id=None, fixed_ip_address=None))
        s.delete(p)

    # --- bindings ------------------------------------------------------------------------
    def _vif(self, host, vnic_type):
        """What the simulated mechanism driver answers when binding to ``host``."""
        if not host:
            return "unbound", {}
        if host in self.unbindable_hosts:
            raise PortBindingFailed(f"binding failed for host {host}")
        if vnic_type in ("direct", "macvtap"):
            return "hw_veb", {"vlan": "0", "connectivity": "l2"}
        if vnic_type == "direct-physical":
            return "hostdev_physical", {"vlan": "0", "connectivity": "l2"}
        return "ovs", {"port_filter": True, "bridge_name": "br-int", "datapath_type": "system"}

    def _rebind_active(self, s, p, host, profile):
        active = self._active(s, p.id)
        if host != active.host:
            if s.get(models.PortBinding, (p.id, host)) is not None:
                raise PortBindingAlreadyExists(f"port {p.id} already has a binding for host {host}")
            vif_type, details = self._vif(host, p.vnic_type)
            s.delete(active)
            s.flush()
            s.add(models.PortBinding(port_id=p.id, host=host, status=ACTIVE, vif_type=vif_type,
                                     vif_details=details, vnic_type=p.vnic_type,
                                     profile=dict(profile)))
        else:
            active.vif_type, active.vif_details = self._vif(host, p.vnic_type)
            active.vnic_type, active.profile = p.vnic_type, dict(profile)
        s.flush()
        self._set_status(s, p)

    def _set_status(self, s, p):
        bound = self._active(s, p.id).host
        p.status = ACTIVE if bound and p.device_owner.startswith("compute:") else "DOWN"
        self._sync_subports(s, p)  # a trunk's subports follow its parent

    @staticmethod
    def _binding_dict(b):
        return {"host": b.host, "status": b.status, "vif_type": b.vif_type,
                "vif_details": dict(b.vif_details or {}), "vnic_type": b.vnic_type,
                "profile": dict(b.profile or {})}

    def _create_binding(self, s, p, host, vnic_type=None, profile=None):
        if not host:
            raise NetworkError("a binding needs a host")
        if s.get(models.PortBinding, (p.id, host)) is not None:
            raise PortBindingAlreadyExists(f"port {p.id} already has a binding for host {host}")
        active = self._active(s, p.id)
        if not active.host:
            # An unbound port is simply bound: its one binding stays active.
            self._rebind_active(s, p, host, profile or {})
            return self._active(s, p.id)
        _check_vnic_type(vnic_type)
        vnic = vnic_type or p.vnic_type
        vif_type, details = self._vif(host, vnic)
        b = models.PortBinding(port_id=p.id, host=host, status=INACTIVE, vif_type=vif_type,
                               vif_details=details, vnic_type=vnic, profile=dict(profile or {}))
        s.add(b)
        s.flush()
        return b

    def create_port_binding(self, ctxt, port_id, host, vnic_type=None, profile=None):
        """An INACTIVE binding for ``host`` (ACTIVE if the port was unbound)."""
        with self.db.session(write=True) as s:
            return self._binding_dict(self._create_binding(s, self._port(s, port_id, lock=True), host,
                                                           vnic_type, profile))

    def list_port_bindings(self, ctxt, port_id):
        """The port's bindings to hosts (the unbound placeholder is not listed)."""
        with self.db.session() as s:
            self._port(s, port_id)
            return [self._binding_dict(b) for b in self._bindings(s, port_id) if b.host]

    def get_port_binding(self, ctxt, port_id, host):
        with self.db.session() as s:
            b = s.get(models.PortBinding, (port_id, host))
            if b is None or not host:
                raise PortBindingNotFound(f"port {port_id} has no binding for host {host}")
            return self._binding_dict(b)

    def _activate(self, s, p, host):
        b = s.get(models.PortBinding, (p.id, host))
        if b is None or not host:
            raise PortBindingNotFound(f"port {p.id} has no binding for host {host}")
        if b.status == ACTIVE:
            raise PortBindingAlreadyActive(f"binding of port {p.id} to {host} is already active")
        for other in self._bindings(s, p.id):
            if other.status == ACTIVE:
                if other.host:
                    other.status = INACTIVE
                else:
                    s.delete(other)  # the unbound placeholder
        s.flush()
        b.status = ACTIVE
        s.flush()
        self._set_status(s, p)
        return b

    def activate_port_binding(self, ctxt, port_id, host):
        """Make ``host``'s binding the active one; the previous one becomes INACTIVE."""
        with self.db.session(write=True) as s:
            return self._binding_dict(self._activate(s, self._port(s, port_id, lock=True), host))

    def _delete_binding(self, s, p, host):
        b = s.get(models.PortBinding, (p.id, host))
        if b is None or not host:
            raise PortBindingNotFound(f"port {p.id} has no binding for host {host}")
        was_active = b.status == ACTIVE
        s.delete(b)
        s.flush()
        if was_active:
            # Keep exactly one active row: the port becomes unbound.
            s.add(models.PortBinding(port_id=p.id, host="", status=ACTIVE, vif_type="unbound",
                                     vnic_type=p.vnic_type, profile={}))
            s.flush()
            self._set_status(s, p)

    def delete_port_binding(self, ctxt, port_id, host):
        with self.db.session(write=True) as s:
            self._delete_binding(s, self._port(s, port_id, lock=True), host)

    # --- servers ------------------------------------------------------------------------
    def _instance_ports(self, s, instance_uuid, lock=False):
        q = sa.select(models.Port).where(models.Port.device_id == instance_uuid) \
            .order_by(models.Port.created_at, models.Port.id)
        return s.scalars(q.with_for_update() if lock else q).all()

    def _vif_dict(self, s, p, known=None):
        """``known`` as for ``_port_dict``: a port made just now, with no floating IP."""
        port = self._port_dict(s, p, known)
        network = self._network_of(s, p.network_id)
        subnets = []
        floating = self._floating_of(s, [p.id]) if known is None else {}
        for sn in self._subnets_of(s, network.id):
            ips = [{"address": ip["ip_address"], "type": "fixed", "version": sn.ip_version,
                    "floating_ips": [{"address": floating[(p.id, ip["ip_address"])],
                                      "type": "floating", "version": 4}]
                    if (p.id, ip["ip_address"]) in floating else []}
                   for ip in port["fixed_ips"] if ip["subnet_id"] == sn.id]
            if ips:
                subnets.append({"cidr": sn.cidr, "version": sn.ip_version, "ips": ips,
                                "gateway": {"address": sn.gateway_ip}, "dns": [], "routes": []})
        return {"id": p.id, "address": p.mac_address, "type": port["binding:vif_type"],
                "details": port["binding:vif_details"], "devname": ("tap" + p.id)[:14],
                "ovs_interfaceid": p.id, "vnic_type": p.vnic_type,
                "profile": port["binding:profile"], "active": p.status == ACTIVE,
                "preserve_on_delete": not p.created_for_instance,
                "network": {"id": network.id, "label": network.name, "bridge": "br-int",
                            "subnets": subnets,
                            "meta": {"tenant_id": network.project_id, "mtu": network.mtu,
                                     "physical_network": network.physical_network}}}

    @staticmethod
    def _available(s, project_id):
        # An external network is for floating IPs: never chosen for a server's port.
        return s.scalars(sa.select(models.Network).where(
            sa.or_(models.Network.project_id == project_id, models.Network.shared.is_(True)),
            models.Network.external.is_(False))).all()

    def available_networks(self, ctxt, project_id):
        """The networks a server of the project asking for none in particular (or for
        ``auto``) may get: the project's own and the shared ones, external ones aside."""
        with self.db.read_session() as s:
            nets = self._available(s, project_id)
            subnets = {n.id: [] for n in nets}  # of all of them in one statement
            if nets:
                for sid, nid in s.execute(sa.select(models.Subnet.id, models.Subnet.network_id)
                                          .where(models.Subnet.network_id.in_(list(subnets)))
                                          .order_by(models.Subnet.created_at, models.Subnet.id)):
                    subnets[nid].append(sid)
            return [self._network_dict(s, n, subnets[n.id]) for n in nets]

    def _requested(self, s, ctxt, project_id, requested_networks):
        if requested_networks == "none":
            return []
        if not requested_networks or requested_networks == "auto":
            nets = self._available(s, project_id)
            if len(nets) > 1:
                raise NetworkAmbiguous("more than one network is available; choose one")
            if not nets and requested_networks == "auto":
                # None: the project's topology is made in this transaction, with the port.
                return [{"network_id": self._ensure_topology(s, ctxt, project_id)}]
            return [{"network_id": n.id} for n in nets]
        out = []
        for r in requested_networks:
            r = {"network_id": r} if isinstance(r, str) else r
            out.append({"network_id": r.get("network_id") or r.get("uuid"),
                        "port_id": r.get("port_id") or r.get("port"),
                        "address": r.get("address") or r.get("fixed_ip"), "tag": r.get("tag")})
        return out

    @_retry_on_duplicate
    def allocate_for_instance(self, ctxt, instance_uuid, project_id, requested_networks=None,
                              host=None, availability_zone="nova", port_profiles=None,
                              security_groups=None):
        """Ports for a server, bound to ``host`` when given; returns its network_info.

        ``requested_networks``: None/[] (the one network available to the project, if
        any), "auto" (the same, or the project's auto-allocated network, made if the
        project has none: ``get_auto_allocated_topology``), "none", or a list of ``{"network_id"|"uuid", "port_id"|"port",
        "address"|"fixed_ip", "tag"}``. ``port_profiles``: ``{port_id: profile}``
        merged into the bindings (e.g. the resource provider of an allocation).
        ``security_groups``: names or ids of the project's groups for the ports made
        here (None: the project's default group); ports given keep their own.
        """
        owner = f"compute:{availability_zone or 'nova'}"
        with self.db.session(write=True) as s:
            groups = self._resolve_groups(s, ctxt, project_id, security_groups)
            ports, made = [], {}  # made: {port id: (binding, ips)} of ports created here
            for req in self._requested(s, ctxt, project_id, requested_networks):
                if req.get("port_id"):
                    p = self._port(s, req["port_id"], lock=True)
                    if p.device_id and p.device_id != instance_uuid:
                        raise PortInUse(f"port {p.id} is in use by {p.device_id}")
                    p.device_id, p.device_owner = instance_uuid, owner
                else:
                    fixed = [{"ip_address": req["address"]}] if req.get("address") else None
                    p, binding, ips, port_groups = self._new_port(s, {
                        "network_id": req["network_id"], "fixed_ips": fixed,
                        "created_for_instance": True, "device_id": instance_uuid,
                        "device_owner": owner, "binding:host_id": host or "",
                        "security_groups": groups}, project_id, groups_checked=True)
                    made[p.id] = (binding, ips, port_groups)
                ports.append(p)
            for p in ports:
                if p.id in made:
                    if (port_profiles or {}).get(p.id):
                        made[p.id][0].profile = dict(port_profiles[p.id])
                    continue
                active = self._active(s, p.id)
                profile = dict(active.profile or {}, **(port_profiles or {}).get(p.id, {}))
                self._rebind_active(s, p, host or active.host, profile)
            return [self._vif_dict(s, p, made.get(p.id)) for p in ports]

    def get_instance_nw_info(self, ctxt, instance_uuid):
        with self.db.session() as s:
            return [self._vif_dict(s, p) for p in self._instance_ports(s, instance_uuid)]

    def deallocate_for_instance(self, ctxt, instance_uuid, preserve):
        """The server's ports in ``preserve`` (the user's, as the compute side knows
        them: novella/network/ownership.py) are unbound and released; every other port
        whose device is the server is deleted."""
        with self.db.session(write=True) as s:
            for p in self._instance_ports(s, instance_uuid, lock=True):
                if p.id not in preserve:
                    self._delete_port(s, p)
                    continue
                self._unbind(s, p)
                p.device_id, p.device_owner = "", ""

    def deallocate_port_for_instance(self, ctxt, instance_uuid, port_id, preserve):
        """One port of the server let go (an interface detach): unbound and released
        if ``preserve`` (the user's), else deleted. A port gone, or no longer the
        server's, is left as it is."""
        with self.db.session(write=True) as s:
            p = s.get(models.Port, port_id, with_for_update=True)
            if p is None or p.device_id != instance_uuid:
                return
            if not preserve:
                self._delete_port(s, p)
                return
            self._unbind(s, p)
            p.device_id, p.device_owner = "", ""

    def unbind_ports(self, ctxt, instance_uuid):
        """The server's ports stay its own but are bound to no host (a shelved server's)."""
        with self.db.session(write=True) as s:
            for p in self._instance_ports(s, instance_uuid, lock=True):
                self._unbind(s, p)
            return [self._vif_dict(s, p) for p in self._instance_ports(s, instance_uuid)]

    def _unbind(self, s, p):
        """Every binding of the port goes; one unbound ACTIVE row stays."""
        for b in self._bindings(s, p.id):
            s.delete(b)
        s.flush()
        s.add(models.PortBinding(port_id=p.id, host="", status=ACTIVE, vif_type="unbound",
                                 vnic_type=p.vnic_type, profile={}))
        p.status = "DOWN"
        self._sync_subports(s, p)

    def bind_ports_to_host(self, ctxt, instance_uuid, host, vnic_types=None, port_profiles=None):
        """INACTIVE bindings on ``host`` for every port of a server; all or none.

        Returns ``{port_id: binding}``. Used before a move; activate them with
        ``activate_port_bindings`` or drop them with ``delete_port_bindings``.
        """
        with self.db.session(write=True) as s:
            return {p.id: self._binding_dict(self._create_binding(
                        s, p, host, (vnic_types or {}).get(p.id),
                        (port_profiles or {}).get(p.id)))
                    for p in self._instance_ports(s, instance_uuid, lock=True)}

    def activate_port_bindings(self, ctxt, instance_uuid, host):
        """Activate ``host``'s binding of every port of a server (those already active are kept)."""
        with self.db.session(write=True) as s:
            for p in self._instance_ports(s, instance_uuid, lock=True):
                if self._active(s, p.id).host != host:
                    self._activate(s, p, host)
            return [self._vif_dict(s, p) for p in self._instance_ports(s, instance_uuid)]

    def delete_port_bindings(self, ctxt, instance_uuid, host):
        """Drop the server's bindings on ``host`` (cleanup or rollback); missing ones are fine."""
        with self.db.session(write=True) as s:
            for p in self._instance_ports(s, instance_uuid, lock=True):
                if host and s.get(models.PortBinding, (p.id, host)) is not None:
                    self._delete_binding(s, p, host)

    def migrate_instance_finish(self, ctxt, instance_uuid, host, port_profiles=None):
        """The server now runs on ``host``: its ports' active bindings point there.

        An INACTIVE binding on ``host`` is activated; otherwise the active binding
        is moved to ``host``. ``port_profiles`` is merged into the profile (e.g. the
        destination's resource allocation). Returns the network_info.
        """
        with self.db.session(write=True) as s:
            ports = self._instance_ports(s, instance_uuid, lock=True)
            for p in ports:
                existing = s.get(models.PortBinding, (p.id, host))
                if existing is not None and existing.status == INACTIVE:
                    self._activate(s, p, host)
                active = self._active(s, p.id)
                profile = dict(active.profile or {}, **(port_profiles or {}).get(p.id, {}))
                profile.pop("migrating_to", None)  # the move is over
                self._rebind_active(s, p, host, profile)
            return [self._vif_dict(s, p) for p in ports]  # the same rows, as changed

    def setup_networks_on_host(self, ctxt, instance_uuid, host=None, teardown=False):
        """Mark the active bindings ``migrating_to`` a host, or clear the mark.

        With ``teardown`` the server's INACTIVE bindings on ``host`` go too.
        """
        with self.db.session(write=True) as s:
            for p in self._instance_ports(s, instance_uuid, lock=True):
                active = self._active(s, p.id)
                profile = dict(active.profile or {})
                if teardown:
                    profile.pop("migrating_to", None)
                    b = s.get(models.PortBinding, (p.id, host)) if host else None
                    if b is not None and b.status == INACTIVE:
                        s.delete(b)
                elif host and host != active.host:
                    profile["migrating_to"] = host
                active.profile = profile
            s.flush()

    def sriov_ports(self, ctxt, instance_uuid=None, port_ids=()):
        """``[{"port_id", "vnic_type", "physical_network"}]`` of a server's (or the
        given) ports that need a device of the host: their vNIC type is SR-IOV's."""
        with self.db.read_session() as s:
            ports = [self._port(s, pid) for pid in port_ids]
            if instance_uuid:
                ports += self._instance_ports(s, instance_uuid)
            return [{"port_id": p.id, "vnic_type": p.vnic_type,
                     "physical_network": self._network_of(s, p.network_id).physical_network}
                    for p in ports if p.vnic_type in SRIOV_VNIC_TYPES]

    def get_requested_resource_groups(self, ctxt, instance_uuid=None, port_ids=()):
        """The placement request groups of a server's (or the given) ports.

        Each group is in the request-spec ``requested_resources`` shape, its
        ``suffix`` the group id the port asks for, plus ``requester_id`` (the
        port) and ``same_subtree`` (the suffixes that must share a subtree).
        """
        with self.db.session() as s:
            ports = [self._port(s, pid) for pid in port_ids]
            if instance_uuid:
                ports += self._instance_ports(s, instance_uuid)
            groups = []
            for p in ports:
                rr = self._resource_request(s, p)
                for g in (rr or {}).get("request_groups", []):
                    groups.append({"suffix": g["id"], "requester_id": p.id,
                                   "resources": dict(g["resources"]),
                                   "required_traits": list(g["required"]),
                                   "forbidden_traits": [], "member_of": [], "in_tree": None,
                                   "same_subtree": list(rr.get("same_subtree", []))})
            return groups


def _check_vnic_type(vnic_type):
    if vnic_type is not None and vnic_type not in VNIC_TYPES:
        raise InvalidInput(f"Invalid input for binding:vnic_type. Reason: {vnic_type!r} is "
                           f"not in {list(VNIC_TYPES)}.")


def _random_mac():
    return "fa:16:3e:%02x:%02x:%02x" % tuple(random.randint(0, 255) for _ in range(3))


def _as_list(value):
    return list(value) if isinstance(value, (list, tuple, set)) else [value]
