"""SR-IOV ports on a host: which NIC devices ports may use, and the claim of one
for each ``direct``, ``macvtap`` or ``direct-physical`` port of a server.

Which devices ports may use, and the providers they are reported as, is
novella/virt/pci.py's (the driver reports them).

A port's device is claimed with the server's NUMA cells and flavor PCI
devices, in the same record (``instance_extra.pci_devices``, or a move's
``migration_context``), each device carrying the ``port_id`` it is for; so a
revert or rollback gives back exactly the source's device, and a restarted
host counts what is claimed from the database. When the port's resource
request was allocated from a PF's provider (``<host>:NIC Switch agent:<pf>``,
named in the port's binding profile ``allocation``), the VF comes from that
PF: the bandwidth and the VF are on the same NIC.

- ``direct``, ``macvtap``: a free VF whose PF is not itself given out;
- ``direct-physical``: a whole PF, none of whose VFs is given out.

The binding profile then names the device (``pci_slot``,
``physical_network``, ``pci_vendor_info``), as the reference's compute does.
"""
from novella.compute.exceptions import PciDeviceRequestFailed

def pf_of_ports(port_profiles, pf_providers):
    """``{port id: pf}`` for the ports whose profile's ``allocation`` names one of
    ``pf_providers`` (``{provider uuid: pf}``)."""
    out = {}
    for port_id, profile in (port_profiles or {}).items():
        for provider in ((profile or {}).get("allocation") or {}).values():
            if provider in pf_providers:
                out[port_id] = pf_providers[provider]
    return out


def pick(devices, used_addresses, ports, pf_of_port, numa_topology=None, port_profiles=None):
    """A device for each port (``{"port_id", "vnic_type", "physical_network"}``), or
    raise PciDeviceRequestFailed. ``devices``: novella.virt.pci.port_devices' answer;
    ``pf_of_port``: the PF a port's bandwidth came from, where it has one. Among the
    free devices, one on the server's NUMA cells (``numa_topology``, its claim) first,
    then the lowest address. Each device keeps its port's ``allocation`` (from
    ``port_profiles``): the providers its binding names again when this claim is
    the server's again (a revert), whatever another port's allocation looks like."""
    preferred = {c["host_cell"] for c in (numa_topology or {}).get("cells", [])}
    used = set(used_addresses)
    vfs_of = {}
    for d in devices:
        if d["dev_type"] == "type-VF":
            vfs_of.setdefault(d["parent_addr"], []).append(d["address"])
    chosen = []
    for port in ports:
        whole_pf = port["vnic_type"] == "direct-physical"
        pf = pf_of_port.get(port["port_id"])
        free = []
        for d in devices:
            if d["address"] in used or d["physical_network"] != port["physical_network"]:
                continue
            if whole_pf:
                if d["dev_type"] != "type-PF" or pf not in (None, d.get("devname")) \
                        or used & set(vfs_of.get(d["address"], [])):
                    continue
            elif d["dev_type"] != "type-VF" or d["parent_addr"] in used \
                    or pf not in (None, d.get("parent_ifname")):
                continue
            free.append(d)
        if not free:
            where = f" of PF {pf}" if pf else ""
            raise PciDeviceRequestFailed(
                f"no free {'PF' if whole_pf else 'VF'}{where} on physical network "
                f"{port['physical_network']} for port {port['port_id']} "
                f"({port['vnic_type']})")
        device = min(free, key=lambda d: (bool(preferred) and d.get("numa_node") not in preferred,
                                          d["address"]))
        used.add(device["address"])
        chosen.append(dict(device, port_id=port["port_id"], alias_name=None))
        allocation = ((port_profiles or {}).get(port["port_id"]) or {}).get("allocation")
        if allocation:
            chosen[-1]["allocation"] = dict(allocation)
    return chosen


def binding_profile(device):
    """What a port's binding profile says of its device (and the providers of the
    port's allocation on its host, when it has one)."""
    profile = {"pci_slot": device["address"], "physical_network": device["physical_network"],
               "pci_vendor_info": f"{device['vendor_id']}:{device['product_id']}"}
    if device.get("allocation"):
        profile["allocation"] = dict(device["allocation"])
    return profile


def with_devices(port_profiles, devices):
    """``port_profiles`` with each port's claimed device (``devices``: a claim's PCI
    devices) merged into its profile."""
    out = {port: dict(profile or {}) for port, profile in (port_profiles or {}).items()}
    for d in devices or []:
        if d.get("port_id"):
            out.setdefault(d["port_id"], {}).update(binding_profile(d))
    return out or port_profiles
