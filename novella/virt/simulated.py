"""A simulated hypervisor whose guests have real disk files.

Each host keeps its guests under ``<instances_path>/<host>/<instance_uuid>/``:
``disk`` (root), ``disk.local`` (ephemeral), ``disk.swap`` and
``domain.json`` (what the hypervisor knows: flavor, power state, volumes;
``injected_files``, the files written into the guest's file system).
A disk file is a one-line JSON header (kind and nominal size) followed by a
few KB of real content, so copies and snapshots move real bytes without
filling the machine. Keeping the guest list on disk means a restarted compute
service finds its guests, as with a real hypervisor.

Fault injection: ``inject_fault(host, "spawn", instance_uuid=None, exc=None,
times=1)`` makes the next call(s) of that method on that host raise; with
``host=None`` the fault hits whichever host calls the method first (e.g. the
scheduler's first choice for a move). The registry is module-level so tests
of the whole system can reach any host.

Every guest operation is a fault point, named as its method: ``spawn``,
``destroy``, ``power_off``, ``power_on``, ``reboot``, ``pause``, ``unpause``,
``suspend``, ``resume``, ``rescue``, ``unrescue``, ``rebuild``, ``snapshot``,
``set_admin_password``, ``inject_nmi``, ``get_console_output``,
``get_serial_console``, the volume,
interface (``attach_interface``, ``detach_interface``) and move methods. A
guest also keeps ``console.log``, its serial console: a line
for each boot, reboot, power change, rescue and crash dump. A running guest's
serial port is a TCP socket serving that log (``get_serial_console``); a
simulated guest has no VNC display.

A host connects only volumes exported to it: a ``block_device_info`` entry
whose ``connection_info`` names another ``target_host`` is refused, as a real
hypervisor cannot reach a target that was not exported to it.
"""
import base64
import collections
import hashlib
import json
import os
import shutil
import threading
import time

import os_traits

from novella.virt import driver as driver_mod
from novella.virt import pci as pci_mod
from novella.virt import simulated_console
from novella.virt.power import power_state

HEADER_MAGIC = "NOVELLA-DISK"
DISK_FILES = {"root": "disk", "ephemeral": "disk.local", "swap": "disk.swap"}
RESCUE_DISK = "disk.rescue"   # the rescue image's disk, the guest's boot disk while rescued
CONSOLE_LOG = "console.log"   # the guest's serial console
BOOT_LOG = ("SeaBIOS (version simulated)", "Booting from Hard Disk...",
            "Linux version 6.1.0 (simulated guest)", "Reached target Multi-User System.",
            "login:")
IMAGE_CACHE_SIZE = 8  # images kept per host
# The task state a snapshot's instance shows when it is the root disk of a move
# between cells (ComputeDriver.snapshot): copied as slowly as a resize's disks.
RESIZE_MIGRATING = "resize_migrating"
DEFAULT_TRAITS = (
    "COMPUTE_NODE", "COMPUTE_NET_ATTACH_INTERFACE", "COMPUTE_NET_ATTACH_INTERFACE_WITH_TAG",
    "COMPUTE_VOLUME_ATTACH_WITH_TAG", "COMPUTE_VOLUME_EXTEND", "COMPUTE_VOLUME_MULTI_ATTACH",
    "COMPUTE_DEVICE_TAGGING", "COMPUTE_IMAGE_TYPE_RAW", "COMPUTE_IMAGE_TYPE_QCOW2",
    "COMPUTE_TRUSTED_CERTS", "COMPUTE_RESCUE_BFV", "HW_CPU_X86_SSE42", "HW_CPU_X86_AVX2",
)


class SimulatedFault(Exception):
    """Raised by an injected fault when the test gave no exception."""


class InstanceNotFound(Exception):
    code = 404


class ResizeError(Exception):
    pass


class GuestStateError(Exception):
    """The guest is not in the power state the operation needs."""


class VolumeNotExported(Exception):
    """A volume's connection_info was made for another host."""


# -- fault registry ------------------------------------------------------------

_faults = {}          # host -> [fault dict]
_drivers = {}         # host -> the live driver (for tests of the whole system)
_registry_lock = threading.Lock()


def inject_fault(host, method, instance_uuid=None, exc=None, times=1):
    """Make ``method`` raise on ``host`` (for one instance or any; ``host=None``: any host).

    ``exc``: an exception instance or class (default SimulatedFault);
    ``times``: how many calls fail (None: every call until cleared).
    """
    with _registry_lock:
        _faults.setdefault(host, []).append(
            {"method": method, "instance_uuid": instance_uuid, "exc": exc, "times": times})


def clear_faults(host=None):
    with _registry_lock:
        if host is None:
            _faults.clear()
        else:
            _faults.pop(host, None)


def pending_faults(host):
    """The faults not yet taken on ``host`` (``None``: those for any host)."""
    with _registry_lock:
        return [dict(f) for f in _faults.get(host, [])]


def driver_for(host):
    """The SimulatedDriver serving ``host`` in this process, if any."""
    return _drivers.get(host)


def _take_fault(host, method, instance_uuid):
    with _registry_lock:
        for key in (host, None):  # this host's faults first, then the any-host ones
            fault = next((f for f in _faults.get(key, []) if f["method"] == method
                          and f["instance_uuid"] in (None, instance_uuid)), None)
            if fault is not None:
                break
        else:
            return None
        if fault["times"] is not None:
            fault["times"] -= 1
            if fault["times"] <= 0:
                _faults[key].remove(fault)
        exc = fault["exc"]
        if exc is None:
            return SimulatedFault(f"injected fault in {method} on {host}")
        return exc() if isinstance(exc, type) else exc


# -- disk files ------------------------------------------------------------------

def write_disk(path, kind, size_gb, content, **header):
    head = dict(header, magic=HEADER_MAGIC, kind=kind, size_gb=size_gb)
    with open(path, "wb") as f:
        f.write(json.dumps(head, sort_keys=True).encode() + b"\n")
        f.write(content)


def read_disk(path):
    """(header dict, content bytes) of a simulated disk file."""
    with open(path, "rb") as f:
        head, _, content = f.read().partition(b"\n")
    return json.loads(head), content


def resize_disk(path, size_gb):
    head, content = read_disk(path)
    head["size_gb"] = size_gb
    kind = head.pop("kind")
    head.pop("magic", None)
    head.pop("size_gb")
    write_disk(path, kind, size_gb, content, **head)


# -- the driver ------------------------------------------------------------------

class SimulatedDriver(driver_mod.ComputeDriver):
    """One simulated host; sizes default to the ``[simulated]`` options.

    Keyword arguments override the configuration for this host only:
    ``vcpus, memory_mb, local_gb, numa_cells, pci_devices, traits,
    instances_path, nodename``. ``image_api`` (optional) is where root disks
    come from and snapshots go; without it images live in
    ``<instances_path>/_images/<image_id>``.
    """

    def __init__(self, host, conf=None, image_api=None, **overrides):
        super().__init__(host)
        if conf is None:
            from novella.conf import CONF as conf
        sim = conf.simulated

        def opt(name, default):
            return overrides[name] if overrides.get(name) is not None else default

        self.nodename = opt("nodename", host)
        self.vcpus = opt("vcpus", sim.vcpus)
        self.memory_mb = opt("memory_mb", sim.memory_mb)
        self.local_gb = opt("local_gb", sim.local_gb)
        self.numa_cells = max(1, opt("numa_cells", sim.numa_cells))
        self.pci_spec = list(opt("pci_devices", sim.pci_devices))
        self.extra_traits = list(opt("traits", sim.traits))
        # SR-IOV NICs, and (as the SR-IOV agent's physical device mappings) the
        # physical networks [pci] device_spec puts them on.
        self.sriov_nics = list(opt("sriov_nics", sim.sriov_nics))
        self.device_specs = pci_mod.parse_device_specs(conf.pci.device_spec)
        self.content_bytes = max(0, sim.disk_content_kb) * 1024
        self.hypervisor_type = sim.hypervisor_type
        self._sim = sim  # options read when used (the live migration's copy time)
        self.resize_copy_seconds = sim.resize_disk_copy_seconds
        self.root = os.path.abspath(opt("instances_path", conf.instances_path))
        self.path = os.path.join(self.root, host)
        self.image_api = image_api
        self._lock = threading.RLock()
        # The host's image cache, as a hypervisor keeps base images: an
        # image's data never changes once uploaded. {image id: bytes}, newest last.
        self._images = collections.OrderedDict()
        self._conf = conf
        self._serial_ports = {}  # instance uuid -> its SerialPort, opened when first asked for
        _drivers[host] = self

    # -- plumbing -----------------------------------------------------------

    def inject_fault(self, method, instance_uuid=None, exc=None, times=1):
        inject_fault(self.host, method, instance_uuid, exc, times)

    def _fault(self, method, instance_uuid=None):
        exc = _take_fault(self.host, method, instance_uuid)
        if exc is not None:
            raise exc

    def _resize_copy_pause(self):
        """``[simulated] resize_disk_copy_seconds``: a resize's disk copy takes time."""
        if self.resize_copy_seconds > 0:
            time.sleep(self.resize_copy_seconds)

    def _check_exported_here(self, block_device_info):
        """Refuse volumes whose connection was made for another host."""
        for bdm in (block_device_info or {}).get("block_device_mapping") or []:
            target = ((bdm.get("connection_info") or {}).get("data") or {}).get("target_host")
            if target and target != self.host:
                raise VolumeNotExported(f"volume {bdm.get('volume_id')} is exported to "
                                        f"{target}, not to {self.host}")

    def instance_dir(self, instance_uuid, host=None):
        return os.path.join(self.root, host or self.host, instance_uuid)

    def _domain_file(self, instance_uuid):
        return os.path.join(self.instance_dir(instance_uuid), "domain.json")

    def _load(self, instance_uuid):
        try:
            with open(self._domain_file(instance_uuid)) as f:
                return json.load(f)
        except FileNotFoundError:
            raise InstanceNotFound(f"Instance {instance_uuid} could not be found.") from None

    def _save(self, domain):
        path = self._domain_file(domain["uuid"])
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(domain, f)
        os.replace(tmp, path)

    def _set_power(self, instance_uuid, state, *console_lines, expect=None):
        """The guest's power state becomes ``state`` (refused unless it is one of
        ``expect``), with a line in its console log."""
        with self._lock:
            domain = self._load(instance_uuid)
            if expect is not None and domain["power_state"] not in expect:
                raise GuestStateError(
                    f"guest {instance_uuid} is {power_state.NAMES[domain['power_state']]}")
            domain["power_state"] = state
            self._save(domain)
            self._console(instance_uuid, *console_lines)

    def _console(self, instance_uuid, *lines):
        """Append lines to the guest's serial console log (``console.log``)."""
        path = os.path.join(self.instance_dir(instance_uuid), CONSOLE_LOG)
        if lines and os.path.isdir(os.path.dirname(path)):
            with open(path, "a") as f:
                f.writelines(f"[{time.monotonic():12.6f}] {line}\n" for line in lines)

    def _image_bytes(self, ctxt, image_id):
        if not image_id:
            return None
        if image_id in self._images:
            self._images.move_to_end(image_id)
            return self._images[image_id]
        if self.image_api is not None and hasattr(self.image_api, "download"):
            try:
                data = self.image_api.download(ctxt, image_id)
            except Exception:  # noqa: BLE001 - an image without data boots from random bytes
                return None
            self._images[image_id] = data
            if len(self._images) > IMAGE_CACHE_SIZE:
                self._images.popitem(last=False)
            return data
        path = os.path.join(self.root, "_images", image_id)
        if os.path.exists(path):
            with open(path, "rb") as f:
                return f.read()
        return None

    def cache_image(self, ctxt, image_id):
        self._fault("cache_image")
        if image_id in self._images:
            self._images.move_to_end(image_id)
            return False
        if self.image_api is None:  # the images are the host's own files: always there
            return False
        if self._image_bytes(ctxt, image_id) is None:
            raise LookupError(f"image {image_id} has no data to cache")
        return True

    def cached_images(self):
        """The ids of the images in the host's cache, oldest first."""
        return list(self._images)

    def _store_image(self, ctxt, image_id, data):
        if self.image_api is not None and hasattr(self.image_api, "upload"):
            self.image_api.upload(ctxt, image_id, data)
            return
        os.makedirs(os.path.join(self.root, "_images"), exist_ok=True)
        with open(os.path.join(self.root, "_images", image_id), "wb") as f:
            f.write(data)

    def _write_disks(self, ctxt, instance, image_meta, kinds=("root", "ephemeral", "swap")):
        flavor = instance["flavor"]
        inst_dir = self.instance_dir(instance["uuid"])
        sizes = {"root": flavor.get("root_gb", 0), "ephemeral": flavor.get("ephemeral_gb", 0),
                 "swap": flavor.get("swap", 0)}
        for kind in kinds:
            path = os.path.join(inst_dir, DISK_FILES[kind])
            if os.path.exists(path) or not sizes[kind]:
                continue
            content = None
            image_id = (image_meta or {}).get("id") or instance.get("image_ref")
            if kind == "root":
                content = self._image_bytes(ctxt, image_id)
            if content is None:
                content = os.urandom(self.content_bytes) if kind != "swap" else b""
            # swap is sized in MB, like the flavor field
            write_disk(path, kind, sizes[kind], content, instance=instance["uuid"],
                       image=image_id if kind == "root" else None,
                       unit="MB" if kind == "swap" else "GB")

    # -- host ----------------------------------------------------------------

    def init_host(self, host):
        os.makedirs(self.path, exist_ok=True)

    def get_available_nodes(self, refresh=False):
        return [self.nodename]

    def numa_topology(self):
        n = self.numa_cells
        cells = []
        for i in range(n):
            cpus = [c for c in range(self.vcpus) if c % n == i]
            cells.append({"id": i, "cpus": cpus, "memory_mb": self.memory_mb // n})
        return {"cells": cells}

    def pci_devices(self):
        devices = []
        for spec in self.pci_spec:
            parts = spec.split(":")
            vendor, product, count = parts[0], parts[1], int(parts[2]) if len(parts) > 2 else 1
            for _ in range(count):
                i = len(devices)
                devices.append({"address": f"0000:{0x81 + i // 8:02x}:00.{i % 8}",
                                "vendor_id": vendor, "product_id": product,
                                "dev_type": "type-PCI", "numa_node": i % self.numa_cells})
        return devices + self.sriov_devices()

    def _nics(self):
        """[(pf name, VF count, {bandwidth class: kbps})] of ``[simulated] sriov_nics``."""
        nics = []
        for spec in self.sriov_nics:
            pf, vfs, *kbps = spec.split(":")
            bandwidth = {rc: int(v) for rc, v in zip(("NET_BW_EGR_KILOBIT_PER_SEC",
                                                      "NET_BW_IGR_KILOBIT_PER_SEC"), kbps)
                         if int(v) > 0}
            nics.append((pf, int(vfs), bandwidth))
        return nics

    def sriov_devices(self):
        """Each SR-IOV NIC's PF (an Intel X710's ids) and its VFs, on buses 0x3b on."""
        devices = []
        for k, (pf, vfs, _bandwidth) in enumerate(self._nics()):
            bus, numa = 0x3b + k, k % self.numa_cells
            pf_addr = f"0000:{bus:02x}:00.0"
            devices.append({"address": pf_addr, "vendor_id": "8086", "product_id": "1572",
                            "dev_type": "type-PF", "devname": pf, "numa_node": numa})
            for j in range(vfs):
                devices.append({"address": f"0000:{bus:02x}:{0x02 + j // 8:02x}.{j % 8}",
                                "vendor_id": "8086", "product_id": "154c",
                                "dev_type": "type-VF", "parent_addr": pf_addr,
                                "parent_ifname": pf, "numa_node": numa})
        return devices

    def get_available_resource(self, nodename=None):
        used = driver_mod.usage_of(self._flavors())
        return {
            "vcpus": self.vcpus, "memory_mb": self.memory_mb, "local_gb": self.local_gb,
            "vcpus_used": used["vcpus"], "memory_mb_used": used["memory_mb"],
            "local_gb_used": used["local_gb"],
            "hypervisor_type": self.hypervisor_type, "hypervisor_version": 1000,
            "hypervisor_hostname": self.nodename,
            "cpu_info": json.dumps({"arch": "x86_64", "model": "simulated", "vendor": "Novella",
                                    "topology": {"sockets": self.numa_cells, "cores":
                                                 max(1, self.vcpus // self.numa_cells), "threads": 1},
                                    "features": ["sse4.2", "avx2"]}),
            "numa_topology": self.numa_topology(),
            "pci_passthrough_devices": self.pci_devices(),
        }

    def _flavors(self):
        """The flavors of the guests on this host."""
        for uuid in self.list_instances():
            try:
                yield self._load(uuid)["flavor"]
            except InstanceNotFound:
                continue

    def get_traits(self, nodename=None):
        return sorted(set(DEFAULT_TRAITS) | set(self.extra_traits))

    def get_network_providers(self, nodename=None):
        """The simulated SR-IOV agent: its provider (the vNIC types' traits) and, under
        it, one per PF that [pci] device_spec puts on a physical network and that has
        bandwidth (``<host>:NIC Switch agent:<pf>``, the physnet's and the vNIC types'
        traits)."""
        physnet_of = {d["devname"]: d["physical_network"] for d in pci_mod.port_devices(
            self.sriov_devices(), self.device_specs) if d["dev_type"] == "type-PF"}
        node = nodename or self.nodename
        agent = f"{node}:{pci_mod.AGENT}"
        vnic_traits = [os_traits.normalize_name("VNIC_TYPE_" + v)
                       for v in pci_mod.SRIOV_VNIC_TYPES]
        children = []
        for pf, _vfs, bandwidth in self._nics():
            if pf not in physnet_of or not bandwidth:
                continue
            traits = [os_traits.normalize_name("PHYSNET_" + physnet_of[pf])] + vnic_traits
            children.append({"name": pci_mod.provider_name(node, pf), "parent": agent,
                             "inventories": bandwidth, "traits": sorted(traits)})
        if not children:
            return []
        return [{"name": agent, "traits": sorted(vnic_traits), "inventories": {}}] + children

    def list_instances(self):
        if not os.path.isdir(self.path):
            return []
        # A "<uuid>_resize" directory is the copy kept for a revert, not a guest.
        return sorted(d for d in os.listdir(self.path) if not d.endswith("_resize")
                      and os.path.exists(os.path.join(self.path, d, "domain.json")))

    def list_disks(self):
        if not os.path.isdir(self.path):
            return []
        return sorted(d for d in os.listdir(self.path) if not d.endswith("_resize"))

    def instance_exists(self, instance):
        return os.path.exists(self._domain_file(instance["uuid"]))

    # -- guest lifecycle -------------------------------------------------------

    def spawn(self, ctxt, instance, image_meta, network_info=None,
              block_device_info=None, power_on=True, injected_files=None):
        uuid = instance["uuid"]
        with self._lock:
            os.makedirs(self.instance_dir(uuid), exist_ok=True)
            bdms = (block_device_info or {}).get("block_device_mapping") or []
            boot_from_volume = any(b.get("boot_index") in (0, "0") for b in bdms)
            kinds = ("ephemeral", "swap") if boot_from_volume else ("root", "ephemeral", "swap")
            self._check_exported_here(block_device_info)
            self._write_disks(ctxt, instance, image_meta, kinds)
            # A fault here leaves the disks behind, as a hypervisor that
            # cannot start the guest does: the caller must clean up.
            self._fault("spawn", uuid)
            self._save({"uuid": uuid, "name": instance.get("name"),
                        "flavor": instance["flavor"],
                        "power_state": power_state.RUNNING if power_on else power_state.SHUTDOWN,
                        "volumes": {b["volume_id"]: b.get("mount_device") for b in bdms},
                        "network_info": network_info or [],
                        "injected_files": _files(injected_files)})
            if power_on:
                self._console(uuid, *BOOT_LOG)

    def destroy(self, ctxt, instance, network_info=None, block_device_info=None,
                destroy_disks=True):
        uuid = instance["uuid"]
        self._fault("destroy", uuid)
        with self._lock:
            port = self._serial_ports.pop(uuid, None)
            if port is not None:
                port.close()
            inst_dir = self.instance_dir(uuid)
            if not os.path.isdir(inst_dir):
                return
            if destroy_disks:
                shutil.rmtree(inst_dir, ignore_errors=True)
            elif os.path.exists(self._domain_file(uuid)):
                os.remove(self._domain_file(uuid))

    def power_off(self, instance, timeout=0, retry_interval=0):
        self._fault("power_off", instance["uuid"])
        self._set_power(instance["uuid"], power_state.SHUTDOWN, "reached target power-off")

    def power_on(self, ctxt, instance, network_info=None, block_device_info=None):
        self._fault("power_on", instance["uuid"])
        self._set_power(instance["uuid"], power_state.RUNNING, *BOOT_LOG)

    def reboot(self, ctxt, instance, network_info=None, reboot_type="SOFT",
               block_device_info=None):
        self._fault("reboot", instance["uuid"])
        with self._lock:
            domain = self._load(instance["uuid"])
            if reboot_type == "SOFT" and domain["power_state"] != power_state.RUNNING:
                raise SimulatedFault("cannot soft reboot a guest that is not running")
            domain["power_state"] = power_state.RUNNING
            domain["reboots"] = domain.get("reboots", 0) + 1
            self._save(domain)
            self._console(instance["uuid"], f"{reboot_type.lower()} reboot", *BOOT_LOG)

    def get_info(self, instance):
        try:
            return {"state": self._load(instance["uuid"])["power_state"]}
        except InstanceNotFound:
            return {"state": power_state.NOSTATE}

    def attach_volume(self, ctxt, connection_info, instance, mountpoint):
        self._fault("attach_volume", instance["uuid"])
        with self._lock:
            domain = self._load(instance["uuid"])
            volume_id = (connection_info or {}).get("volume_id") or mountpoint
            domain.setdefault("volumes", {})[volume_id] = mountpoint
            self._save(domain)

    def detach_volume(self, ctxt, connection_info, instance, mountpoint):
        self._fault("detach_volume", instance["uuid"])
        with self._lock:
            domain = self._load(instance["uuid"])
            volumes = domain.setdefault("volumes", {})
            volume_id = (connection_info or {}).get("volume_id")
            for vid, mp in list(volumes.items()):
                if vid == volume_id or mp == mountpoint:
                    volumes.pop(vid)
            self._save(domain)

    def attach_interface(self, ctxt, instance, image_meta, vif):
        """The port joins the guest's NICs (``network_info`` in domain.json); plugging
        one the guest has already replaces it."""
        self._fault("attach_interface", instance["uuid"])
        with self._lock:
            domain = self._load(instance["uuid"])
            nics = [n for n in domain.get("network_info") or [] if n.get("id") != vif["id"]]
            domain["network_info"] = nics + [vif]
            self._save(domain)

    def detach_interface(self, ctxt, instance, vif):
        self._fault("detach_interface", instance["uuid"])
        with self._lock:
            domain = self._load(instance["uuid"])
            domain["network_info"] = [n for n in domain.get("network_info") or []
                                      if n.get("id") != vif["id"]]
            self._save(domain)

    def swap_volume(self, ctxt, old_connection_info, new_connection_info, instance,
                    mountpoint, resize_to):
        """The guest's data at ``mountpoint`` copied to the new volume, which takes the
        old one's place; ``volume_copies`` in domain.json says which volume's data
        each copy holds. Running it again once it is done changes nothing."""
        self._fault("swap_volume", instance["uuid"])
        old_id = (old_connection_info or {}).get("volume_id")
        new_id = (new_connection_info or {}).get("volume_id")
        with self._lock:
            domain = self._load(instance["uuid"])
            volumes = domain.setdefault("volumes", {})
            if new_id in volumes and old_id not in volumes:
                return
            volumes.pop(old_id, None)
            volumes[new_id] = mountpoint
            copies = domain.setdefault("volume_copies", {})
            copies[new_id] = {"from": copies.get(old_id, {}).get("from", old_id),
                              "size_gb": resize_to or None}
            self._save(domain)

    def volume_snapshot_create(self, ctxt, instance, volume_id, create_info):
        """The snapshot recorded in domain.json (``volume_snapshots``): the volume's
        new overlay file, as a hypervisor that snapshots for the volume service."""
        self._fault("volume_snapshot_create", instance["uuid"])
        with self._lock:
            domain = self._load(instance["uuid"])
            if volume_id not in domain.get("volumes", {}):
                raise InstanceNotFound(f"volume {volume_id} is not attached to "
                                       f"{instance['uuid']}")
            snaps = domain.setdefault("volume_snapshots", {})
            snaps[create_info["snapshot_id"]] = {
                "volume_id": volume_id, "type": create_info.get("type"),
                "new_file": create_info.get("new_file"), "id": create_info.get("id")}
            self._save(domain)

    def volume_snapshot_delete(self, ctxt, instance, volume_id, snapshot_id, delete_info):
        self._fault("volume_snapshot_delete", instance["uuid"])
        with self._lock:
            domain = self._load(instance["uuid"])
            snaps = domain.setdefault("volume_snapshots", {})
            for key, snap in list(snaps.items()):
                if snap["volume_id"] == volume_id and snapshot_id in (key, snap.get("id")):
                    snaps.pop(key)
            self._save(domain)

    def quiesce(self, ctxt, instance, image_meta):
        """The running guest frozen: ``quiesced`` in domain.json, counted in ``quiesces``."""
        self._fault("quiesce", instance["uuid"])
        with self._lock:
            domain = self._load(instance["uuid"])
            if domain["power_state"] != power_state.RUNNING:
                raise GuestStateError(f"guest {instance['uuid']} is not running")
            domain["quiesced"] = True
            domain["quiesces"] = domain.get("quiesces", 0) + 1
            self._save(domain)

    def unquiesce(self, ctxt, instance, image_meta):
        self._fault("unquiesce", instance["uuid"])
        with self._lock:
            domain = self._load(instance["uuid"])
            domain["quiesced"] = False
            self._save(domain)

    # -- moves ---------------------------------------------------------------

    def prep_resize(self, ctxt, instance, flavor, migration):
        self._fault("prep_resize", instance["uuid"])

    def migrate_disk_and_power_off(self, ctxt, instance, dest_host, flavor,
                                   network_info=None, block_device_info=None):
        uuid = instance["uuid"]
        self._fault("migrate_disk_and_power_off", uuid)
        with self._lock:
            domain = self._load(uuid)
            if flavor.get("root_gb", 0) < domain["flavor"].get("root_gb", 0):
                raise ResizeError("Unable to resize disk down.")
            domain["power_state"] = power_state.SHUTDOWN
            self._save(domain)
            # Keep our copy aside for a revert; the destination gets a real copy.
            src = self.instance_dir(uuid)
            kept = src + "_resize"
            shutil.rmtree(kept, ignore_errors=True)
            os.rename(src, kept)
            dest = self.instance_dir(uuid, host=dest_host)
            os.makedirs(dest, exist_ok=True)
            self._resize_copy_pause()
            disk_info = []
            for kind in ("root", "ephemeral"):  # swap is re-created, never copied
                name = DISK_FILES[kind]
                if os.path.exists(os.path.join(kept, name)):
                    shutil.copyfile(os.path.join(kept, name), os.path.join(dest, name))
                    disk_info.append({"kind": kind, "path": name})
            return disk_info

    def finish_migration(self, ctxt, migration, instance, disk_info, network_info,
                         image_meta, resize_instance, block_device_info=None,
                         power_on=True):
        uuid = instance["uuid"]
        self._fault("finish_migration", uuid)
        self._check_exported_here(block_device_info)
        with self._lock:
            inst_dir = self.instance_dir(uuid)
            os.makedirs(inst_dir, exist_ok=True)
            flavor = instance["flavor"]
            if resize_instance:
                for kind, field in (("root", "root_gb"), ("ephemeral", "ephemeral_gb")):
                    path = os.path.join(inst_dir, DISK_FILES[kind])
                    if os.path.exists(path) and flavor.get(field):
                        resize_disk(path, flavor[field])
            self._write_disks(ctxt, instance, image_meta, ("ephemeral", "swap"))
            bdms = (block_device_info or {}).get("block_device_mapping") or []
            self._save({"uuid": uuid, "name": instance.get("name"), "flavor": flavor,
                        "power_state": power_state.RUNNING if power_on else power_state.SHUTDOWN,
                        "volumes": {b["volume_id"]: b.get("mount_device") for b in bdms},
                        "network_info": network_info or []})

    def confirm_migration(self, ctxt, migration, instance, network_info=None):
        self._fault("confirm_migration", instance["uuid"])
        shutil.rmtree(self.instance_dir(instance["uuid"]) + "_resize", ignore_errors=True)

    def finish_revert_migration(self, ctxt, instance, network_info=None, migration=None,
                                block_device_info=None, power_on=True):
        uuid = instance["uuid"]
        self._fault("finish_revert_migration", uuid)
        self._check_exported_here(block_device_info)
        with self._lock:
            inst_dir = self.instance_dir(uuid)
            kept = inst_dir + "_resize"
            if os.path.isdir(kept):
                shutil.rmtree(inst_dir, ignore_errors=True)
                os.rename(kept, inst_dir)
            domain = self._load(uuid)
            domain["power_state"] = power_state.RUNNING if power_on else power_state.SHUTDOWN
            # The guest is defined again from what it is given, as a real
            # hypervisor does, not from the kept copy: a volume detached while
            # the server was resized must not come back.
            if block_device_info is not None:
                domain["volumes"] = {b["volume_id"]: b.get("mount_device") for b in
                                     block_device_info.get("block_device_mapping") or []}
            if network_info is not None:
                domain["network_info"] = network_info
            self._save(domain)

    # -- live migration -------------------------------------------------------

    def pre_live_migration(self, ctxt, instance, block_device_info, network_info):
        self._fault("pre_live_migration", instance["uuid"])
        self._check_exported_here(block_device_info)

    def live_migration(self, ctxt, instance, dest, steering=None):
        """The guest's directory copied to ``dest`` and running there (ours is
        left as it was until the cleanup, so a failed move needs nothing here).

        The memory copy first takes ``[simulated] live_migration_copy_seconds``;
        ``steering`` may abort it (nothing reaches ``dest``) or end it at once.
        """
        uuid = instance["uuid"]
        self._fault("live_migration", uuid)
        self._copy_memory(uuid, steering, (instance.get("flavor") or {}).get("memory_mb") or 0)
        with self._lock:
            domain = self._load(uuid)
            target = self.instance_dir(uuid, host=dest)
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(self.instance_dir(uuid), target)
            paused = domain["power_state"] == power_state.PAUSED  # it arrives paused
            with open(os.path.join(target, "domain.json"), "w") as f:
                json.dump(dict(domain, power_state=power_state.PAUSED if paused
                               else power_state.RUNNING), f)

    def _copy_memory(self, uuid, steering, memory_mb):
        """Wait out the copy's length unless asked to abort (raises) or to finish;
        the guest's memory reported as copied evenly over it, once a second."""
        length = max(0.0, self._sim.live_migration_copy_seconds)
        deadline = time.monotonic() + length
        total = memory_mb << 20
        while True:
            asked = steering.asked if steering is not None else None
            if asked == driver_mod.LiveMigrationSteering.ABORT:
                raise driver_mod.LiveMigrationAborted(
                    f"Live migration of instance {uuid} from {self.host} was aborted.")
            left = deadline - time.monotonic()
            if asked == driver_mod.LiveMigrationSteering.FORCE_COMPLETE or left <= 0:
                return
            if steering is None:
                time.sleep(left)
                continue
            done = int(total * (1 - left / length))
            steering.report({"memory_total": total, "memory_processed": done,
                             "memory_remaining": total - done, "disk_total": 0,
                             "disk_processed": 0, "disk_remaining": 0})
            steering.wait(min(left, 1.0))

    def post_live_migration_at_destination(self, ctxt, instance, network_info):
        uuid = instance["uuid"]
        self._fault("post_live_migration_at_destination", uuid)
        with self._lock:
            domain = self._load(uuid)
            domain["network_info"] = network_info or []
            self._save(domain)

    def cleanup_live_migration_source(self, ctxt, instance):
        self._fault("cleanup_live_migration_source", instance["uuid"])
        shutil.rmtree(self.instance_dir(instance["uuid"]), ignore_errors=True)

    def rollback_live_migration_at_destination(self, ctxt, instance):
        shutil.rmtree(self.instance_dir(instance["uuid"]), ignore_errors=True)

    def snapshot(self, ctxt, instance, image_id, update_task_state=None):
        uuid = instance["uuid"]
        self._fault("snapshot", uuid)
        if instance.get("task_state") == RESIZE_MIGRATING:
            self._resize_copy_pause()  # the root disk of a cross-cell move
        elif self._sim.snapshot_seconds > 0:
            time.sleep(self._sim.snapshot_seconds)  # [simulated] snapshot_seconds
        path = os.path.join(self.instance_dir(uuid), DISK_FILES["root"])
        _head, content = read_disk(path)
        self._store_image(ctxt, image_id, content)
        return {"image_id": image_id, "size": len(content),
                "checksum": hashlib.md5(content, usedforsecurity=False).hexdigest()}

    # -- guest actions --------------------------------------------------------

    def pause(self, instance):
        self._fault("pause", instance["uuid"])
        self._set_power(instance["uuid"], power_state.PAUSED,
                        expect=(power_state.RUNNING, power_state.PAUSED))

    def unpause(self, instance):
        self._fault("unpause", instance["uuid"])
        self._set_power(instance["uuid"], power_state.RUNNING,
                        expect=(power_state.PAUSED, power_state.RUNNING))

    def suspend(self, ctxt, instance):
        """The guest's memory saved to disk; it no longer runs."""
        self._fault("suspend", instance["uuid"])
        self._set_power(instance["uuid"], power_state.SUSPENDED, "PM: suspending system",
                        expect=(power_state.RUNNING, power_state.PAUSED,
                                power_state.SUSPENDED))

    def resume(self, ctxt, instance, network_info=None, block_device_info=None):
        self._fault("resume", instance["uuid"])
        self._set_power(instance["uuid"], power_state.RUNNING, "PM: resume from suspend",
                        expect=(power_state.SUSPENDED, power_state.RUNNING))

    def rescue(self, ctxt, instance, network_info, image_meta, rescue_password,
               block_device_info=None):
        """Boot the guest from a disk made of the rescue image.

        The guest's devices while rescued are in domain.json's ``rescue``
        (``devices`` in the order the guest sees them, ``boot`` the one it boots
        from). With ``hw_rescue_bus`` or ``hw_rescue_device`` among the image's
        properties, a stable device rescue: the guest's own disks and volumes
        keep their places and the rescue disk is added last, on that bus as that
        device (``disk`` on ``virtio``, a ``cdrom`` on ``ide``, by default).
        Otherwise the rescue disk takes the root disk's place and the root disk
        comes second; a volume-backed guest has no root disk to move.
        """
        uuid = instance["uuid"]
        self._fault("rescue", uuid)
        props = (image_meta or {}).get("properties") or {}
        with self._lock:
            domain = self._load(uuid)
            inst_dir = self.instance_dir(uuid)
            own = [name for name in (DISK_FILES["root"], DISK_FILES["ephemeral"],
                                     DISK_FILES["swap"])
                   if os.path.exists(os.path.join(inst_dir, name))]
            own += sorted(domain.get("volumes") or {},
                          key=lambda vid: str(domain["volumes"][vid] or ""))
            stable = bool(props.get("hw_rescue_bus") or props.get("hw_rescue_device"))
            if stable:
                device = props.get("hw_rescue_device") or "disk"
                bus = props.get("hw_rescue_bus") or ("ide" if device == "cdrom" else "virtio")
                devices = own + [RESCUE_DISK]
            elif DISK_FILES["root"] in own:
                device, bus = "disk", "virtio"
                devices = [RESCUE_DISK, DISK_FILES["root"]]
            else:
                raise GuestStateError(f"guest {uuid} boots from a volume: only a stable "
                                      "device rescue can add a rescue disk to it")
            content = self._image_bytes(ctxt, (image_meta or {}).get("id")) or b""
            write_disk(os.path.join(inst_dir, RESCUE_DISK), "rescue",
                       domain["flavor"].get("root_gb", 0), content, instance=uuid,
                       image=(image_meta or {}).get("id"))
            domain.update(power_state=power_state.RUNNING, rescued=True,
                          rescue={"stable": stable, "device": device, "bus": bus,
                                  "devices": devices, "boot": RESCUE_DISK},
                          admin_password=_password_digest(rescue_password))
            self._save(domain)
            self._console(uuid, f"booting from the rescue {device} on {bus}", *BOOT_LOG)

    def unrescue(self, ctxt, instance):
        uuid = instance["uuid"]
        self._fault("unrescue", uuid)
        with self._lock:
            domain = self._load(uuid)
            path = os.path.join(self.instance_dir(uuid), RESCUE_DISK)
            if os.path.exists(path):
                os.remove(path)
            domain.update(power_state=power_state.RUNNING, rescued=False)
            domain.pop("rescue", None)
            self._save(domain)
            self._console(uuid, "booting from its own disk", *BOOT_LOG)

    def set_admin_password(self, instance, new_pass):
        """The guest agent sets the password (only its digest is kept)."""
        uuid = instance["uuid"]
        self._fault("set_admin_password", uuid)
        with self._lock:
            domain = self._load(uuid)
            if domain["power_state"] != power_state.RUNNING:
                raise GuestStateError(f"guest {uuid} is not running: no agent answers")
            domain["admin_password"] = _password_digest(new_pass)
            self._save(domain)

    def inject_network_info(self, instance, network_info):
        """The guest keeps the network configuration it was given, and counts the times."""
        uuid = instance["uuid"]
        self._fault("inject_network_info", uuid)
        with self._lock:
            domain = self._load(uuid)
            domain["injected_network_info"] = network_info
            domain["network_info_injections"] = domain.get("network_info_injections", 0) + 1
            self._save(domain)

    def inject_nmi(self, instance):
        """A non-maskable interrupt: the guest's kernel dumps and reports it."""
        uuid = instance["uuid"]
        self._fault("inject_nmi", uuid)
        with self._lock:
            domain = self._load(uuid)
            if domain["power_state"] != power_state.RUNNING:
                raise GuestStateError(f"guest {uuid} is not running")
            domain["crash_dumps"] = domain.get("crash_dumps", 0) + 1
            self._save(domain)
            self._console(uuid, "Kernel panic - not syncing: NMI: Not continuing")

    def get_console_output(self, ctxt, instance):
        self._fault("get_console_output", instance["uuid"])
        self._load(instance["uuid"])  # a guest that is not here has no console
        path = os.path.join(self.instance_dir(instance["uuid"]), CONSOLE_LOG)
        if not os.path.exists(path):
            return ""
        with open(path, errors="replace") as f:
            return f.read()

    def get_vnc_console(self, ctxt, instance):
        """A simulated guest has no display."""
        self._load(instance["uuid"])
        raise driver_mod.ConsoleTypeUnavailable("vnc")

    def get_serial_console(self, ctxt, instance, index=0):
        """The guest's one serial port: a TCP socket on ``[serial_console]
        proxyclient_address`` serving its console log (novella/virt/simulated_console.py),
        opened when first asked for; a guest that is not running has none."""
        uuid = instance["uuid"]
        self._fault("get_serial_console", uuid)
        with self._lock:
            if index != 0 or self._load(uuid)["power_state"] != power_state.RUNNING:
                raise driver_mod.ConsoleTypeUnavailable("serial")
            port = self._serial_ports.get(uuid)
            if port is None or port.closed:
                port = self._serial_ports[uuid] = simulated_console.SerialPort(
                    os.path.join(self.instance_dir(uuid), CONSOLE_LOG),
                    self._conf.serial_console.proxyclient_address)
        return driver_mod.console_address(port.address, port.port)

    def rebuild(self, ctxt, instance, image_meta, network_info=None, block_device_info=None,
                preserve_ephemeral=False, power_on=True, injected_files=None):
        """The guest's root disk made anew from ``image_meta`` (its ephemeral disk too
        unless ``preserve_ephemeral``); its volumes and ports stay."""
        uuid = instance["uuid"]
        self._fault("rebuild", uuid)
        self._check_exported_here(block_device_info)
        with self._lock:
            domain = self._load(uuid)
            inst_dir = self.instance_dir(uuid)
            kinds = ["root", "swap"] + ([] if preserve_ephemeral else ["ephemeral"])
            bdms = (block_device_info or {}).get("block_device_mapping") or []
            if any(b.get("boot_index") in (0, "0") for b in bdms):
                kinds.remove("root")  # a volume-backed root stays as it is
            for kind in kinds:
                path = os.path.join(inst_dir, DISK_FILES[kind])
                if os.path.exists(path):
                    os.remove(path)
            self._write_disks(ctxt, instance, image_meta, kinds)
            domain.update(flavor=instance["flavor"], power_state=(
                power_state.RUNNING if power_on else power_state.SHUTDOWN),
                image=(image_meta or {}).get("id"), injected_files=_files(injected_files))
            if network_info is not None:
                domain["network_info"] = network_info
            self._save(domain)
            if power_on:
                self._console(uuid, f"rebuilt from image {(image_meta or {}).get('id')}",
                              *BOOT_LOG)


def _files(injected_files):
    """The files written into the guest, ``{path: base64 contents}`` (domain.json)."""
    return {path: base64.b64encode(data).decode() for path, data in injected_files or ()}


def _password_digest(password):
    return hashlib.sha256(password.encode()).hexdigest() if password else None
