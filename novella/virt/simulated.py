"""A simulated hypervisor whose guests have real disk files.

Each host keeps its guests under ``<instances_path>/<host>/<instance_uuid>/``:
``disk`` (root), ``disk.local`` (ephemeral), ``disk.swap`` and
``domain.json`` (what the hypervisor knows: flavor, power state, volumes).
A disk file is a one-line JSON header (kind and nominal size) followed by a
few KB of real content, so copies and snapshots move real bytes without
filling the machine. Keeping the guest list on disk means a restarted compute
service finds its guests, as with a real hypervisor.

Fault injection: ``inject_fault(host, "spawn", instance_uuid=None, exc=None,
times=1)`` makes the next call(s) of that method on that host raise; with
``host=None`` the fault hits whichever host calls the method first (e.g. the
scheduler's first choice for a move). The registry is module-level so tests
of the whole system can reach any host.

A host connects only volumes exported to it: a ``block_device_info`` entry
whose ``connection_info`` names another ``target_host`` is refused, as a real
hypervisor cannot reach a target that was not exported to it.
"""
import collections
import hashlib
import json
import os
import shutil
import threading
import time

import os_traits

from novella.compute import exceptions
from novella.compute.states import power_state, task_states
from novella.virt import driver as driver_mod

HEADER_MAGIC = "NOVELLA-DISK"
DISK_FILES = {"root": "disk", "ephemeral": "disk.local", "swap": "disk.swap"}
IMAGE_CACHE_SIZE = 8  # images kept per host
DEFAULT_TRAITS = (
    "COMPUTE_NODE", "COMPUTE_NET_ATTACH_INTERFACE", "COMPUTE_NET_ATTACH_INTERFACE_WITH_TAG",
    "COMPUTE_VOLUME_ATTACH_WITH_TAG", "COMPUTE_VOLUME_EXTEND", "COMPUTE_VOLUME_MULTI_ATTACH",
    "COMPUTE_DEVICE_TAGGING", "COMPUTE_IMAGE_TYPE_RAW", "COMPUTE_IMAGE_TYPE_QCOW2",
    "COMPUTE_TRUSTED_CERTS", "HW_CPU_X86_SSE42", "HW_CPU_X86_AVX2",
)


class SimulatedFault(Exception):
    """Raised by an injected fault when the test gave no exception."""


class InstanceNotFound(Exception):
    code = 404


class ResizeError(Exception):
    pass


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

# The bandwidth entry of tunnelled (overlay) networks, as the reference's agents name it
# (``rp_tunnelled``) or as this option has always called it; its provider has this trait.
TUNNEL_NAMES = ("tunnel", "rp_tunnelled")
TUNNEL_TRAIT = "CUSTOM_NETWORK_TUNNEL_PROVIDER"


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
        self.bandwidths = list(opt("resource_provider_bandwidths",
                                   sim.resource_provider_bandwidths))
        self.packet_rate = opt("resource_provider_packet_processing_without_direction",
                               sim.resource_provider_packet_processing_without_direction)
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

    def _set_power(self, instance_uuid, state):
        with self._lock:
            domain = self._load(instance_uuid)
            domain["power_state"] = state
            self._save(domain)

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
        return devices

    def get_available_resource(self, nodename=None):
        used = {"vcpus": 0, "memory_mb": 0, "local_gb": 0}
        for uuid in self.list_instances():
            try:
                flavor = self._load(uuid)["flavor"]
            except InstanceNotFound:
                continue
            used["vcpus"] += flavor.get("vcpus", 0)
            used["memory_mb"] += flavor.get("memory_mb", 0)
            used["local_gb"] += flavor.get("root_gb", 0) + flavor.get("ephemeral_gb", 0)
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

    def get_traits(self, nodename=None):
        return sorted(set(DEFAULT_TRAITS) | set(self.extra_traits))

    def get_network_providers(self, nodename=None):
        """The simulated Open vSwitch agent: one provider for the agent (packet
        rate) and, under it, one per physical network (bandwidth)."""
        if not (self.bandwidths or self.packet_rate):
            return []
        agent = f"{nodename or self.nodename}:Open vSwitch agent"
        providers = [{"name": agent, "traits": ["CUSTOM_VNIC_TYPE_NORMAL"], "inventories": (
            {"NET_PACKET_RATE_KILOPACKET_PER_SEC": self.packet_rate} if self.packet_rate else {})}]
        for spec in self.bandwidths:
            physnet, egress, ingress = spec.split(":")
            inventories = {rc: int(kbps) for rc, kbps in (("NET_BW_EGR_KILOBIT_PER_SEC", egress),
                                                          ("NET_BW_IGR_KILOBIT_PER_SEC", ingress))
                           if int(kbps) > 0}
            traits = ["CUSTOM_VNIC_TYPE_NORMAL"]
            if physnet in TUNNEL_NAMES:  # for networks without a physical network
                traits.append(TUNNEL_TRAIT)
            else:
                traits.append(os_traits.normalize_name("PHYSNET_" + physnet))
            providers.append({"name": f"{agent}:{physnet}", "parent": agent,
                              "inventories": inventories, "traits": sorted(traits)})
        return providers

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
              block_device_info=None, power_on=True):
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
                        "network_info": network_info or []})

    def destroy(self, ctxt, instance, network_info=None, block_device_info=None,
                destroy_disks=True):
        uuid = instance["uuid"]
        self._fault("destroy", uuid)
        with self._lock:
            inst_dir = self.instance_dir(uuid)
            if not os.path.isdir(inst_dir):
                return
            if destroy_disks:
                shutil.rmtree(inst_dir, ignore_errors=True)
            elif os.path.exists(self._domain_file(uuid)):
                os.remove(self._domain_file(uuid))

    def power_off(self, instance, timeout=0, retry_interval=0):
        self._fault("power_off", instance["uuid"])
        self._set_power(instance["uuid"], power_state.SHUTDOWN)

    def power_on(self, ctxt, instance, network_info=None, block_device_info=None):
        self._fault("power_on", instance["uuid"])
        self._set_power(instance["uuid"], power_state.RUNNING)

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
        self._copy_memory(uuid, steering)
        with self._lock:
            domain = self._load(uuid)
            target = self.instance_dir(uuid, host=dest)
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(self.instance_dir(uuid), target)
            with open(os.path.join(target, "domain.json"), "w") as f:
                json.dump(dict(domain, power_state=power_state.RUNNING), f)

    def _copy_memory(self, uuid, steering):
        """Wait out the copy's length unless asked to abort (raises) or to finish."""
        deadline = time.monotonic() + max(0.0, self._sim.live_migration_copy_seconds)
        while True:
            asked = steering.asked if steering is not None else None
            if asked == driver_mod.LiveMigrationSteering.ABORT:
                raise exceptions.LiveMigrationAborted(
                    f"Live migration of instance {uuid} from {self.host} was aborted.")
            left = deadline - time.monotonic()
            if asked == driver_mod.LiveMigrationSteering.FORCE_COMPLETE or left <= 0:
                return
            if steering is None:
                time.sleep(left)
            else:
                steering.wait(left)

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
        if instance.get("task_state") == task_states.RESIZE_MIGRATING:
            self._resize_copy_pause()  # the root disk of a cross-cell move
        path = os.path.join(self.instance_dir(uuid), DISK_FILES["root"])
        _head, content = read_disk(path)
        self._store_image(ctxt, image_id, content)
        return {"image_id": image_id, "size": len(content),
                "checksum": hashlib.md5(content, usedforsecurity=False).hexdigest()}
