"""Which NIC devices of a host ports may use, and the providers they are reported as.

The driver reports every PCI device of the host (``pci_passthrough_devices``):
a NIC's physical function (``dev_type`` ``type-PF``, ``devname`` its netdev)
and its virtual functions (``type-VF``, ``parent_addr`` and ``parent_ifname``
naming the PF). ``[pci] device_spec`` says which of them ports may use and on
which physical network, as the reference's option does: a spec matches a PF
by ``devname`` or ``address`` (a glob; the PF's VFs match with it), by
``vendor_id``/``product_id``, or a VF by ``parent_ifname``; its
``physical_network`` tag is what ports are matched with. Each PF so tagged is
reported as a provider of its own (``<host>:NIC Switch agent:<pf>``), as the
reference's SR-IOV agent reports it. The claim of a device for a port is the
compute host's (novella/compute/pci.py).
"""
import fnmatch
import json
import uuid

SRIOV_VNIC_TYPES = ("direct", "macvtap", "direct-physical")
AGENT = "NIC Switch agent"


def parse_device_specs(texts):
    """``[pci] device_spec`` JSON strings (one spec or a list each) -> [spec]."""
    specs = []
    for text in texts or []:
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise ValueError(f"[pci] device_spec {text!r} is not JSON: {exc}") from None
        for spec in value if isinstance(value, list) else [value]:
            if not isinstance(spec, dict):
                raise ValueError(f"[pci] device_spec {text!r}: a spec is a JSON object")
            specs.append(spec)
    return specs


def _spec_matches(spec, device, pf):
    """Whether ``spec`` matches ``device`` (``pf``: the VF's parent, or None)."""
    for key, wanted in spec.items():
        if key == "devname":
            names = {device.get("devname")} | ({pf.get("devname")} if pf else set())
            if wanted not in names:
                return False
        elif key == "parent_ifname":
            if device.get("parent_ifname") != wanted:
                return False
        elif key == "address":
            addresses = [device["address"]] + ([pf["address"]] if pf else [])
            if not any(fnmatch.fnmatch(a, wanted) for a in addresses):
                return False
        elif key in ("vendor_id", "product_id"):
            if device.get(key) != wanted:
                return False
    return True


def port_devices(devices, specs):
    """The NIC devices (PFs and VFs) a spec puts on a physical network, each with its
    ``physical_network``."""
    by_address = {d["address"]: d for d in devices}
    out = []
    for d in devices:
        if d.get("dev_type") not in ("type-PF", "type-VF"):
            continue
        pf = by_address.get(d.get("parent_addr")) if d.get("parent_addr") else None
        spec = next((s for s in specs if s.get("physical_network")
                     and _spec_matches(s, d, pf)), None)
        if spec is not None:
            out.append(dict(d, physical_network=spec["physical_network"]))
    return out


def provider_name(nodename, pf):
    """The name of the provider the SR-IOV agent reports for ``pf``."""
    return f"{nodename}:{AGENT}:{pf}"


def provider_uuid(node_provider, name):
    """A network provider's uuid under the node's provider, as the resource tracker
    makes it (stable across restarts)."""
    return str(uuid.uuid5(uuid.UUID(node_provider), name))
