"""What a server needs from a host beyond Placement: NUMA cells and PCI devices.

Pure functions over plain data, used by the resource tracker under its lock.

A flavor asks for:
- NUMA: ``hw:numa_nodes`` = N (vCPUs and memory split evenly over N host
  cells) and ``hw:cpu_policy`` = ``dedicated`` (each vCPU pinned to its own
  host CPU; implies one NUMA node when hw:numa_nodes is absent);
- PCI: ``pci_passthrough:alias`` = ``"a1:2,a2:1"`` with aliases from
  ``[pci] alias``.

An instance's claimed NUMA topology is ``{"cpu_policy", "cells": [{"id",
"host_cell", "vcpus", "memory_mb", "cpu_pinning": [host cpus] | None}]}``; its
PCI devices a list of the host's device dicts plus ``alias_name``.
"""
import json

from novella.compute.exceptions import ComputeResourcesUnavailable, PciDeviceRequestFailed


def parse_aliases(alias_opts):
    """``[pci] alias`` JSON strings -> {name: [spec, ...]}."""
    aliases = {}
    for text in alias_opts or []:
        for a in (json.loads(text) if text.strip().startswith("[") else [json.loads(text)]):
            spec = {k: a[k] for k in ("vendor_id", "product_id") if a.get(k)}
            aliases.setdefault(a["name"], []).append(spec)
    return aliases


def pci_requests(flavor, aliases):
    """The flavor's PCI requests: [{"alias_name", "count", "spec": [...]}]."""
    value = ((flavor or {}).get("extra_specs") or {}).get("pci_passthrough:alias")
    if not value:
        return []
    requests = []
    for item in value.split(","):
        name, _, count = item.strip().partition(":")
        if name not in aliases:
            raise PciDeviceRequestFailed(f"PCI alias {name} is not defined")
        requests.append({"alias_name": name, "count": int(count or 1), "spec": aliases[name]})
    return requests


def numa_request(flavor):
    """None, or {"cpu_policy", "cells": [{"id", "vcpus", "memory_mb"}]}."""
    specs = (flavor or {}).get("extra_specs") or {}
    policy = specs.get("hw:cpu_policy", "shared")
    nodes = specs.get("hw:numa_nodes")
    if nodes is None and policy != "dedicated":
        return None
    n = int(nodes or 1)
    vcpus, memory = flavor["vcpus"], flavor["memory_mb"]
    if n < 1 or vcpus < n:
        raise ComputeResourcesUnavailable(f"cannot split {vcpus} vCPUs over {n} NUMA nodes")
    cells = [{"id": i, "vcpus": vcpus // n + (1 if i < vcpus % n else 0),
              "memory_mb": memory // n + (memory % n if i == n - 1 else 0)} for i in range(n)]
    return {"cpu_policy": policy, "cells": cells}


def empty_usage(host_topology):
    return {c["id"]: {"vcpus": 0, "memory_mb": 0, "pinned": set()}
            for c in (host_topology or {}).get("cells", [])}


def add_usage(usage, topology, sign=1):
    """Add (or with sign=-1 remove) an instance topology to per-cell usage."""
    for cell in (topology or {}).get("cells", []):
        u = usage.setdefault(cell["host_cell"], {"vcpus": 0, "memory_mb": 0, "pinned": set()})
        u["vcpus"] += sign * cell["vcpus"]
        u["memory_mb"] += sign * cell["memory_mb"]
        pins = set(cell.get("cpu_pinning") or [])
        u["pinned"] = (u["pinned"] | pins) if sign > 0 else (u["pinned"] - pins)


def fit_numa(host_topology, usage, request, cpu_allocation_ratio=1.0):
    """Place each requested cell on a distinct host cell, or raise.

    Shared vCPUs count against a cell's unpinned CPUs times the allocation
    ratio; dedicated ones take specific, unpinned CPUs. Memory is never overcommitted
    within a NUMA cell.
    """
    if request is None:
        return None
    hosts = (host_topology or {}).get("cells", [])
    if len(hosts) < len(request["cells"]):
        raise ComputeResourcesUnavailable(
            f"host has {len(hosts)} NUMA cells, {len(request['cells'])} requested")
    taken, cells = set(), []
    dedicated = request["cpu_policy"] == "dedicated"
    for want in request["cells"]:
        for host_cell in hosts:
            if host_cell["id"] in taken:
                continue
            u = usage.get(host_cell["id"], {"vcpus": 0, "memory_mb": 0, "pinned": set()})
            if host_cell["memory_mb"] - u["memory_mb"] < want["memory_mb"]:
                continue
            shared_used = u["vcpus"] - len(u["pinned"])
            if dedicated:
                free = [c for c in host_cell["cpus"] if c not in u["pinned"]]
                if len(free) < want["vcpus"]:
                    continue
                pinning = free[:want["vcpus"]]
            else:
                capacity = (len(host_cell["cpus"]) - len(u["pinned"])) * cpu_allocation_ratio
                if capacity - shared_used < want["vcpus"]:
                    continue
                pinning = None
            taken.add(host_cell["id"])
            cells.append({"id": want["id"], "host_cell": host_cell["id"], "vcpus": want["vcpus"],
                          "memory_mb": want["memory_mb"], "cpu_pinning": pinning})
            break
        else:
            raise ComputeResourcesUnavailable(
                f"no NUMA cell fits {want['vcpus']} vCPUs and {want['memory_mb']} MB")
    return {"cpu_policy": request["cpu_policy"], "cells": cells}


def _matches(device, spec):
    return all(device.get(k) == v for k, v in spec.items())


def pick_pci(devices, used_addresses, requests, numa_topology=None):
    """Choose free devices for every request, preferring the instance's NUMA cells."""
    preferred = {c["host_cell"] for c in (numa_topology or {}).get("cells", [])}
    chosen, used = [], set(used_addresses)
    for req in requests:
        free = [d for d in devices if d["address"] not in used
                and any(_matches(d, s) for s in req["spec"])]
        free.sort(key=lambda d: (d.get("numa_node") not in preferred, d["address"]))
        if len(free) < req["count"]:
            raise PciDeviceRequestFailed(
                f"PCI device request for alias {req['alias_name']} x{req['count']} failed")
        for d in free[:req["count"]]:
            used.add(d["address"])
            chosen.append(dict(d, alias_name=req["alias_name"]))
    return chosen


def pci_pools(devices, used_addresses):
    """The node's PCI devices grouped as the scheduler sees them (pci_stats)."""
    pools = {}
    for d in devices:
        key = (d["vendor_id"], d["product_id"], d.get("numa_node"), d.get("dev_type"))
        pool = pools.setdefault(key, {"vendor_id": d["vendor_id"], "product_id": d["product_id"],
                                      "numa_node": d.get("numa_node"), "dev_type": d.get("dev_type"),
                                      "count": 0, "free": 0})
        pool["count"] += 1
        pool["free"] += d["address"] not in used_addresses
    return sorted(pools.values(), key=lambda p: (p["vendor_id"], p["product_id"], str(p["numa_node"])))
