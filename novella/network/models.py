"""The embedded network service's own database (Neutron's core, binding and QoS tables)."""

import sqlalchemy as sa
from sqlalchemy import orm

from novella.db.timestamps import Timestamps



class Base(orm.DeclarativeBase):
    pass



class QosPolicy(Timestamps, Base):
    __tablename__ = "qos_policies"

    id: orm.Mapped[str] = orm.mapped_column(sa.String(36), primary_key=True)
    name: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    project_id: orm.Mapped[str | None] = orm.mapped_column(sa.String(255), index=True)
    description: orm.Mapped[str] = orm.mapped_column(sa.String(255), default="",
                                                     server_default="")
    shared: orm.Mapped[bool] = orm.mapped_column(default=False, server_default=sa.false())
    # At most one per project: the policy of the project's new networks that name none.
    is_default: orm.Mapped[bool] = orm.mapped_column(default=False, server_default=sa.false())
    revision_number: orm.Mapped[int] = orm.mapped_column(default=1, server_default="1")
    # Where rules were kept before their own table (network revision 0002); empty since.
    legacy_rules: orm.Mapped[list] = orm.mapped_column("rules", sa.JSON, default=list)


class QosRule(Timestamps, Base):
    """One rule of a policy: ``type`` says which of the value columns it uses.

    minimum_bandwidth (min_kbps; egress|ingress), minimum_packet_rate (min_kpps;
    egress|ingress|any), bandwidth_limit (max_kbps, max_burst_kbps; egress|ingress).
    A policy has at most one rule of each type and direction.
    """
    __tablename__ = "qos_rules"
    __table_args__ = (sa.UniqueConstraint("qos_policy_id", "type", "direction"),)

    id: orm.Mapped[str] = orm.mapped_column(sa.String(36), primary_key=True)
    qos_policy_id: orm.Mapped[str] = orm.mapped_column(
        sa.ForeignKey("qos_policies.id", ondelete="CASCADE"), index=True)
    type: orm.Mapped[str] = orm.mapped_column(sa.String(32))
    direction: orm.Mapped[str] = orm.mapped_column(sa.String(16), default="egress")
    min_kbps: orm.Mapped[int | None] = orm.mapped_column(sa.BigInteger)
    min_kpps: orm.Mapped[int | None] = orm.mapped_column(sa.BigInteger)
    max_kbps: orm.Mapped[int | None] = orm.mapped_column(sa.BigInteger)
    max_burst_kbps: orm.Mapped[int | None] = orm.mapped_column(sa.BigInteger)


class Network(Timestamps, Base):
    __tablename__ = "networks"

    id: orm.Mapped[str] = orm.mapped_column(sa.String(36), primary_key=True)
    name: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    project_id: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    shared: orm.Mapped[bool] = orm.mapped_column(default=False)
    admin_state_up: orm.Mapped[bool] = orm.mapped_column(default=True)
    status: orm.Mapped[str] = orm.mapped_column(sa.String(16), default="ACTIVE")
    mtu: orm.Mapped[int] = orm.mapped_column(default=1500)
    network_type: orm.Mapped[str] = orm.mapped_column(sa.String(32), default="vxlan")
    physical_network: orm.Mapped[str | None] = orm.mapped_column(sa.String(64))
    qos_policy_id: orm.Mapped[str | None] = orm.mapped_column(sa.ForeignKey("qos_policies.id"))
    # router:external: floating IPs come from it; every project sees it.
    external: orm.Mapped[bool] = orm.mapped_column(default=False, server_default=sa.false())
    # The default external network (at most one): auto-allocated routers' gateways are on it.
    is_default: orm.Mapped[bool] = orm.mapped_column(default=False, server_default=sa.false())
    description: orm.Mapped[str] = orm.mapped_column(sa.String(255), default="",
                                                     server_default="")


class Subnet(Timestamps, Base):
    __tablename__ = "subnets"

    id: orm.Mapped[str] = orm.mapped_column(sa.String(36), primary_key=True)
    network_id: orm.Mapped[str] = orm.mapped_column(sa.ForeignKey("networks.id"), index=True)
    name: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    project_id: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    cidr: orm.Mapped[str] = orm.mapped_column(sa.String(64))
    ip_version: orm.Mapped[int] = orm.mapped_column(default=4)
    gateway_ip: orm.Mapped[str | None] = orm.mapped_column(sa.String(64))
    enable_dhcp: orm.Mapped[bool] = orm.mapped_column(default=True)
    allocation_pools: orm.Mapped[list] = orm.mapped_column(sa.JSON, default=list)
    # The pool the subnet's prefix was allocated from, if any.
    subnetpool_id: orm.Mapped[str | None] = orm.mapped_column(
        sa.ForeignKey("subnetpools.id"), index=True)
    description: orm.Mapped[str] = orm.mapped_column(sa.String(255), default="",
                                                     server_default="")
    dns_nameservers: orm.Mapped[list] = orm.mapped_column(sa.JSON, default=list,
                                                          server_default="[]")
    # [{"destination": cidr, "nexthop": address}]
    host_routes: orm.Mapped[list] = orm.mapped_column(sa.JSON, default=list, server_default="[]")
    ipv6_ra_mode: orm.Mapped[str | None] = orm.mapped_column(sa.String(16))
    ipv6_address_mode: orm.Mapped[str | None] = orm.mapped_column(sa.String(16))


class Port(Timestamps, Base):
    __tablename__ = "ports"
    __table_args__ = (sa.UniqueConstraint("network_id", "mac_address"),)

    id: orm.Mapped[str] = orm.mapped_column(sa.String(36), primary_key=True)
    network_id: orm.Mapped[str] = orm.mapped_column(sa.ForeignKey("networks.id"), index=True)
    name: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    project_id: orm.Mapped[str | None] = orm.mapped_column(sa.String(255), index=True)
    mac_address: orm.Mapped[str] = orm.mapped_column(sa.String(32))
    admin_state_up: orm.Mapped[bool] = orm.mapped_column(default=True)
    status: orm.Mapped[str] = orm.mapped_column(sa.String(16), default="DOWN")
    device_id: orm.Mapped[str] = orm.mapped_column(sa.String(255), default="", index=True)
    device_owner: orm.Mapped[str] = orm.mapped_column(sa.String(255), default="")
    vnic_type: orm.Mapped[str] = orm.mapped_column(sa.String(64), default="normal")
    qos_policy_id: orm.Mapped[str | None] = orm.mapped_column(sa.ForeignKey("qos_policies.id"))
    # A resource request set directly (simulating a backend that computes it).
    resource_request: orm.Mapped[dict | None] = orm.mapped_column(sa.JSON)
    # Created by allocate_for_instance. What the network_info of this client says of
    # preserve_on_delete; which ports go with a server is the compute side's to decide
    # (novella/network/ownership.py), not read from here.
    created_for_instance: orm.Mapped[bool] = orm.mapped_column(default=False)
    # The port's attributes kept as given, with no behaviour of their own here
    # (PORT_KEPT_ATTRIBUTES: description, allowed_address_pairs, dns_name, ...).
    kept: orm.Mapped[dict] = orm.mapped_column(sa.JSON, default=dict, server_default="{}")


class IPAllocation(Base):
    __tablename__ = "ipallocations"

    # The primary key makes an address unique within its subnet.
    subnet_id: orm.Mapped[str] = orm.mapped_column(sa.ForeignKey("subnets.id"), primary_key=True)
    ip_address: orm.Mapped[str] = orm.mapped_column(sa.String(64), primary_key=True)
    port_id: orm.Mapped[str] = orm.mapped_column(sa.ForeignKey("ports.id", ondelete="CASCADE"),
                                                 index=True)
    network_id: orm.Mapped[str] = orm.mapped_column(sa.String(36))


class PortBinding(Base):
    """One row per (port, host); exactly one row of a port is ACTIVE.

    An unbound port keeps an ACTIVE row with host '' (vif_type 'unbound').
    """
    __tablename__ = "ml2_port_bindings"

    port_id: orm.Mapped[str] = orm.mapped_column(sa.ForeignKey("ports.id", ondelete="CASCADE"),
                                                 primary_key=True)
    host: orm.Mapped[str] = orm.mapped_column(sa.String(255), primary_key=True, default="")
    status: orm.Mapped[str] = orm.mapped_column(sa.String(16), default="ACTIVE")
    vif_type: orm.Mapped[str] = orm.mapped_column(sa.String(64), default="unbound")
    vif_details: orm.Mapped[dict] = orm.mapped_column(sa.JSON, default=dict)
    vnic_type: orm.Mapped[str] = orm.mapped_column(sa.String(64), default="normal")
    profile: orm.Mapped[dict] = orm.mapped_column(sa.JSON, default=dict)


class SecurityGroup(Timestamps, Base):
    """A project's security group; every project has one named ``default``."""
    __tablename__ = "securitygroups"

    id: orm.Mapped[str] = orm.mapped_column(sa.String(36), primary_key=True)
    name: orm.Mapped[str] = orm.mapped_column(sa.String(255), default="")
    description: orm.Mapped[str] = orm.mapped_column(sa.String(255), default="")
    project_id: orm.Mapped[str | None] = orm.mapped_column(sa.String(255), index=True)
    revision_number: orm.Mapped[int] = orm.mapped_column(default=1)


class SecurityGroupRule(Timestamps, Base):
    __tablename__ = "securitygrouprules"

    id: orm.Mapped[str] = orm.mapped_column(sa.String(36), primary_key=True)
    security_group_id: orm.Mapped[str] = orm.mapped_column(
        sa.ForeignKey("securitygroups.id", ondelete="CASCADE"), index=True)
    # A peer group; its rules go with it (Neutron deletes them too).
    remote_group_id: orm.Mapped[str | None] = orm.mapped_column(
        sa.ForeignKey("securitygroups.id", ondelete="CASCADE"))
    project_id: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    direction: orm.Mapped[str] = orm.mapped_column(sa.String(16))
    ethertype: orm.Mapped[str] = orm.mapped_column(sa.String(40))
    protocol: orm.Mapped[str | None] = orm.mapped_column(sa.String(40))
    port_range_min: orm.Mapped[int | None] = orm.mapped_column()
    port_range_max: orm.Mapped[int | None] = orm.mapped_column()
    remote_ip_prefix: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    description: orm.Mapped[str] = orm.mapped_column(sa.String(255), default="")


class SecurityGroupPortBinding(Base):
    __tablename__ = "securitygroupportbindings"

    port_id: orm.Mapped[str] = orm.mapped_column(sa.ForeignKey("ports.id", ondelete="CASCADE"),
                                                 primary_key=True)
    security_group_id: orm.Mapped[str] = orm.mapped_column(
        sa.ForeignKey("securitygroups.id"), primary_key=True, index=True)


class FloatingIP(Timestamps, Base):
    """An address of an external network held by a project, and the port (fixed
    address) it is associated with, if any."""
    __tablename__ = "floatingips"
    __table_args__ = (sa.UniqueConstraint("floating_network_id", "floating_ip_address"),)

    id: orm.Mapped[str] = orm.mapped_column(sa.String(36), primary_key=True)
    floating_network_id: orm.Mapped[str] = orm.mapped_column(sa.ForeignKey("networks.id"))
    floating_ip_address: orm.Mapped[str] = orm.mapped_column(sa.String(64))
    project_id: orm.Mapped[str | None] = orm.mapped_column(sa.String(255), index=True)
    port_id: orm.Mapped[str | None] = orm.mapped_column(
        sa.ForeignKey("ports.id", ondelete="SET NULL"), index=True)
    fixed_ip_address: orm.Mapped[str | None] = orm.mapped_column(sa.String(64))
    description: orm.Mapped[str] = orm.mapped_column(sa.String(255), default="")


class Trunk(Timestamps, Base):
    """A parent port carrying other ports (subports) as VLANs; the subports are bound
    wherever the parent is."""
    __tablename__ = "trunks"

    id: orm.Mapped[str] = orm.mapped_column(sa.String(36), primary_key=True)
    name: orm.Mapped[str] = orm.mapped_column(sa.String(255), default="")
    description: orm.Mapped[str] = orm.mapped_column(sa.String(255), default="")
    project_id: orm.Mapped[str | None] = orm.mapped_column(sa.String(255), index=True)
    port_id: orm.Mapped[str] = orm.mapped_column(sa.ForeignKey("ports.id"), unique=True)
    admin_state_up: orm.Mapped[bool] = orm.mapped_column(default=True)


class SubPort(Base):
    __tablename__ = "subports"
    __table_args__ = (sa.UniqueConstraint("trunk_id", "segmentation_type", "segmentation_id"),)

    port_id: orm.Mapped[str] = orm.mapped_column(sa.ForeignKey("ports.id"), primary_key=True)
    trunk_id: orm.Mapped[str] = orm.mapped_column(sa.ForeignKey("trunks.id", ondelete="CASCADE"),
                                                  index=True)
    segmentation_type: orm.Mapped[str] = orm.mapped_column(sa.String(32))
    segmentation_id: orm.Mapped[int] = orm.mapped_column()


class SubnetPool(Timestamps, Base):
    """Prefixes subnets are cut from (``default_prefixlen`` long unless asked otherwise).
    At most one pool per IP version is the default one (``is_default``)."""
    __tablename__ = "subnetpools"

    id: orm.Mapped[str] = orm.mapped_column(sa.String(36), primary_key=True)
    name: orm.Mapped[str] = orm.mapped_column(sa.String(255), default="")
    description: orm.Mapped[str] = orm.mapped_column(sa.String(255), default="")
    project_id: orm.Mapped[str | None] = orm.mapped_column(sa.String(255), index=True)
    ip_version: orm.Mapped[int] = orm.mapped_column(default=4)
    prefixes: orm.Mapped[list] = orm.mapped_column(sa.JSON, default=list)
    default_prefixlen: orm.Mapped[int] = orm.mapped_column()
    min_prefixlen: orm.Mapped[int] = orm.mapped_column()
    max_prefixlen: orm.Mapped[int] = orm.mapped_column()
    shared: orm.Mapped[bool] = orm.mapped_column(default=False)
    is_default: orm.Mapped[bool] = orm.mapped_column(default=False)


class Router(Timestamps, Base):
    """A project's router: a gateway port on an external network (``gw_port_id``) and
    interface ports on subnets (``routerports``). No traffic is routed: the service
    records and shows the topology."""
    __tablename__ = "routers"

    id: orm.Mapped[str] = orm.mapped_column(sa.String(36), primary_key=True)
    name: orm.Mapped[str] = orm.mapped_column(sa.String(255), default="")
    description: orm.Mapped[str] = orm.mapped_column(sa.String(255), default="")
    project_id: orm.Mapped[str | None] = orm.mapped_column(sa.String(255), index=True)
    admin_state_up: orm.Mapped[bool] = orm.mapped_column(default=True)
    gw_port_id: orm.Mapped[str | None] = orm.mapped_column(sa.ForeignKey("ports.id"))
    enable_snat: orm.Mapped[bool] = orm.mapped_column(default=True)


class RouterPort(Base):
    __tablename__ = "routerports"

    router_id: orm.Mapped[str] = orm.mapped_column(
        sa.ForeignKey("routers.id", ondelete="CASCADE"), primary_key=True)
    port_id: orm.Mapped[str] = orm.mapped_column(
        sa.ForeignKey("ports.id", ondelete="CASCADE"), primary_key=True, unique=True)
    # network:router_interface or network:router_gateway, as the port's device_owner.
    port_type: orm.Mapped[str] = orm.mapped_column(sa.String(255))


class AutoAllocatedTopology(Base):
    """A project's auto-allocated network and router (one topology per project)."""
    __tablename__ = "auto_allocated_topologies"

    project_id: orm.Mapped[str] = orm.mapped_column(sa.String(255), primary_key=True)
    network_id: orm.Mapped[str] = orm.mapped_column(
        sa.ForeignKey("networks.id", ondelete="CASCADE"), unique=True)
    router_id: orm.Mapped[str | None] = orm.mapped_column(
        sa.ForeignKey("routers.id", ondelete="SET NULL"))
