"""The host's network agent's resource providers.

A host's Open vSwitch agent reports, as the reference's does, one provider for
itself (``<host>:Open vSwitch agent``: packet rate) and under it one per physical
network it has bandwidth on (``<host>:Open vSwitch agent:<physnet>``). The
embedded network service has no agent process, so the compute service's
resource tracker reports them under its node, from the ``[ovs]`` options, for
any driver: a port asking for minimum bandwidth or packet rate is scheduled the
same way onto a simulated host or a real one. Hardware a driver knows of
(SR-IOV NICs) is the driver's to report (``ComputeDriver.get_network_providers``).
"""
import os_traits

from novella.network.qos import BANDWIDTH_CLASSES, PACKET_RATE_CLASSES, TUNNEL_TRAIT

AGENT = "Open vSwitch agent"
# The bandwidth entry of tunnelled (overlay) networks, as the reference's agents name
# it (``rp_tunnelled``) or as this option has always called it.
TUNNEL_NAMES = ("tunnel", "rp_tunnelled")
VNIC_TRAIT = "CUSTOM_VNIC_TYPE_NORMAL"


def providers(nodename, conf):
    """``[{"name", "parent", "inventories", "traits"}]`` of the agent of the host whose
    node is ``nodename``, in tree order (as ``get_network_providers``); none when
    ``[ovs]`` gives it neither bandwidth nor packet rate."""
    bandwidths = conf.ovs.resource_provider_bandwidths
    packet_rate = conf.ovs.resource_provider_packet_processing_without_direction
    if not (bandwidths or packet_rate):
        return []
    agent = f"{nodename}:{AGENT}"
    out = [{"name": agent, "traits": [VNIC_TRAIT], "inventories": (
        {PACKET_RATE_CLASSES["any"]: packet_rate} if packet_rate else {})}]
    for spec in bandwidths:
        physnet, egress, ingress = spec.split(":")
        inventories = {BANDWIDTH_CLASSES[d]: int(kbps)
                       for d, kbps in (("egress", egress), ("ingress", ingress))
                       if int(kbps) > 0}
        net_trait = (TUNNEL_TRAIT if physnet in TUNNEL_NAMES
                     else os_traits.normalize_name("PHYSNET_" + physnet))
        out.append({"name": f"{agent}:{physnet}", "parent": agent,
                    "inventories": inventories, "traits": sorted([VNIC_TRAIT, net_trait])})
    return out
