"""The QEMU compute driver: each server a QEMU process of its host (novella.virt.qemu).

Chosen with ``[DEFAULT] compute_driver = qemu.QEMUDriver`` or the reference's
``libvirt.LibvirtDriver``; ``[libvirt] virt_type`` (``kvm`` or ``qemu``) picks
KVM or TCG. Each compute host is a ``Host`` of its own under
``[DEFAULT] instances_path/<host>``, so the hosts of one process are separate
hypervisors. A guest's directory, ``<host dir>/<instance uuid>/``, holds:

    domain.json    what the guest is made of (flavor, image, volumes, rescue),
                   written before the hypervisor acts, so a restarted compute
                   service finds its guests and starts them as they were
    disk           the root disk, a qcow2 overlay over the image in the host's
                   cache (``_base``), grown to the flavor's root disk
    disk.local, disk.swap   the flavor's ephemeral and swap disks
    disk.config    the config drive (``config_drive``): meta_data.json, user_data
    disk.rescue    the rescue image's overlay while rescued
    state          the guest's saved memory while suspended
    console.log, qemu.log, qemu.pid

Volumes are the volume service's files (``connection_info`` ``path``), plugged
while the guest runs over QMP. Guests have no network interface: ports are
bound and accounted as with the simulated driver, and the guest reads its
metadata from the config drive.
"""
import base64
import json
import os
import re
import shutil
import subprocess
import logging
import tempfile
import threading
import time

from novella.virt.power import power_state
from novella.virt import driver as driver_mod
from novella.virt.driver import LiveMigrationAborted, LiveMigrationSteering
from novella.virt import guest_image
from novella.virt.qemu.process import (QEMU, Disk, Guest, GuestSpec, Host, QemuError,
                                      drives, qemu_img)
from novella.virt.qemu.qmp import QMPError

DOMAIN = "domain.json"
DISK_FILES = {"root": "disk", "ephemeral": "disk.local", "swap": "disk.swap",
              "config": "disk.config", "rescue": "disk.rescue"}
STATE_FILE = "state"  # a suspended guest's memory
SNAPSHOT_DIR = ".snapshot-"  # a snapshot's flattened copy of the root disk, while made
KEPT_SUFFIX = "_resize"  # the source's copy of a guest on a cold move, kept for a revert
# What a kernel/ramdisk image boots with; a snapshot of its guest carries them over.
BOOT_PROPERTIES = ("kernel_id", "ramdisk_id", "os_command_line")
ACCEL = {"kvm": "kvm", "qemu": "tcg"}  # [libvirt] virt_type -> QEMU's accelerator
CLEAN_SHUTDOWN_SECONDS = 60  # a soft reboot's wait for the guest to power off
MIGRATION_POLL_SECONDS = 0.02  # a live migration's status read: its switchover waits on it
PROGRESS_SECONDS = 1.0  # how often a live migration's figures are recorded
UNLIMITED_BANDWIDTH = 1 << 40  # bytes/s: more than any link between two hosts
# QEMU's run states as the reference's power states (anything else: NOSTATE).
POWER = {"running": power_state.RUNNING, "paused": power_state.PAUSED,
         "prelaunch": power_state.PAUSED, "inmigrate": power_state.PAUSED,
         "postmigrate": power_state.PAUSED, "finish-migrate": power_state.PAUSED,
         "suspended": power_state.SUSPENDED, "shutdown": power_state.SHUTDOWN,
         "shutoff": power_state.SHUTDOWN, "internal-error": power_state.CRASHED,
         "guest-panicked": power_state.CRASHED, "io-error": power_state.PAUSED}
LOG = logging.getLogger(__name__)
TRAITS = ("COMPUTE_NODE", "COMPUTE_IMAGE_TYPE_QCOW2", "COMPUTE_IMAGE_TYPE_RAW",
          "COMPUTE_IMAGE_TYPE_AKI", "COMPUTE_IMAGE_TYPE_ARI", "COMPUTE_VOLUME_EXTEND")


class QEMUDriver(driver_mod.ComputeDriver):
    """One compute host whose guests are QEMU processes.

    Keyword arguments override what is read from the machine for this host only:
    ``vcpus, memory_mb, local_gb, instances_path, nodename``. ``image_api`` is where
    images come from and snapshots go (the compute manager sets it).
    """

    # A guest's directory is named by its uuid: a move to the same host has nowhere to go.
    capabilities = dict(driver_mod.ComputeDriver.capabilities,
                        supports_migrate_to_same_host=False,
                        supports_attach_interface=False, supports_multiattach=False)

    def __init__(self, host, conf=None, image_api=None, **overrides):
        super().__init__(host)
        if conf is None:
            from novella.conf import CONF as conf
        self.conf = conf
        self.nodename = overrides.get("nodename") or host
        self.overrides = overrides
        root = overrides.get("instances_path") or conf.instances_path
        self.hypervisor = Host(os.path.join(root, host), accel=ACCEL[conf.libvirt.virt_type])
        self.image_api = image_api
        self._lock = threading.RLock()

    # -- the guest's record ---------------------------------------------------------------

    def guest(self, instance):
        """The QEMU guest of ``instance`` (a dict with its ``uuid``) on this host: its
        files and sockets (``probe_socket``: the command server in the guest)."""
        return self.hypervisor.guest(instance["uuid"])

    def _host_of(self, name):
        """The hypervisor of compute host ``name`` of this machine (a sibling directory):
        where a move's copy goes."""
        return Host(os.path.join(os.path.dirname(self.hypervisor.instances_path), name),
                    accel=self.hypervisor.accel)

    def _path(self, uuid, name):
        return os.path.join(self.hypervisor.instances_path, uuid, name)

    def _load(self, uuid):
        try:
            with open(self._path(uuid, DOMAIN)) as f:
                return json.load(f)
        except FileNotFoundError:
            raise InstanceNotFound(f"Instance {uuid} could not be found.") from None

    def _save(self, domain):
        path = self._path(domain["uuid"], DOMAIN)
        with open(path + ".tmp", "w") as f:
            json.dump(domain, f)
        os.replace(path + ".tmp", path)

    def _spec(self, domain):
        """The GuestSpec of a recorded guest: root (or the rescue disk, the root second),
        ephemeral, swap, config drive, then its volumes in the order they were plugged."""
        uuid, flavor = domain["uuid"], domain["flavor"]
        boot = domain.get("rescue") or domain["image"]
        volumes = [Disk(v["path"], v["format"], device=v["device"])
                   for v in domain.get("volumes", []) if v.get("root")]
        volumes += [Disk(v["path"], v["format"], device=v["device"])
                    for v in domain.get("volumes", []) if not v.get("root")]
        disks = []
        if domain.get("rescue"):
            disks.append(Disk(self._path(uuid, DISK_FILES["rescue"])))
        if any(v.get("root") for v in domain.get("volumes", [])):
            disks.append(volumes.pop(0))  # booted from a volume: it is the root disk
        for kind in ("root", "ephemeral", "swap", "config"):
            path = self._path(uuid, DISK_FILES[kind])
            if os.path.exists(path):
                disks.append(Disk(path, "raw" if kind == "config" else "qcow2",
                                  readonly=kind == "config"))
        disks += volumes
        return GuestSpec(uuid, flavor.get("memory_mb") or 256, flavor.get("vcpus") or 1,
                         tuple(disks), boot.get("kernel"), boot.get("ramdisk"),
                         boot.get("command_line"))

    def _start(self, domain):
        return self.hypervisor.start(self._spec(domain))

    # -- images -------------------------------------------------------------------------

    def _cached(self, ctxt, image_id):
        return self.hypervisor.cache_image(
            image_id, lambda path: self.image_api.download(ctxt, image_id, dest_path=path))

    def _boot_files(self, ctxt, image_id, root=True):
        """-> (image record, what boots it: ``{"id", "base", "format", "kernel",
        "ramdisk", "command_line"}``); the image (unless not ``root``: booted from a
        volume) and its kernel and ramdisk (``kernel_id``/``ramdisk_id``) in this
        host's cache. No image (a volume made of none): nothing but the disk boots."""
        boot = {"id": image_id, "base": None, "format": None, "kernel": None,
                "ramdisk": None, "command_line": None}
        if not image_id:
            return None, boot
        image = self.image_api.get(ctxt, image_id)
        props = image.get("properties") or {}
        if root:
            boot.update(base=self._cached(ctxt, image_id),
                        format="raw" if image.get("disk_format") == "raw" else "qcow2")
        if props.get("kernel_id"):
            boot["kernel"] = self._cached(ctxt, props["kernel_id"])
            if props.get("ramdisk_id"):
                boot["ramdisk"] = self._cached(ctxt, props["ramdisk_id"])
            boot["command_line"] = props.get("os_command_line") or guest_image.COMMAND_LINE
            boot["properties"] = {k: props[k] for k in BOOT_PROPERTIES if props.get(k)}
        return image, boot

    def _make_disks(self, instance, boot, kinds):
        uuid, flavor = instance["uuid"], instance["flavor"]
        if "root" in kinds:
            self.hypervisor.create_overlay(uuid, DISK_FILES["root"], boot["base"],
                                           (flavor.get("root_gb") or 0) << 30 or None,
                                           backing_format=boot["format"])
        for kind, size in (("ephemeral", (flavor.get("ephemeral_gb") or 0) << 30),
                           ("swap", (flavor.get("swap") or 0) << 20)):
            if kind in kinds and size:
                qemu_img("create", "-q", "-f", "qcow2", self._path(uuid, DISK_FILES[kind]),
                     str(size))

    def _config_drive(self, instance, injected_files):
        """The config drive of a server that asked for one (``config_drive``), or of
        every server with ``[DEFAULT] force_config_drive``."""
        uuid = instance["uuid"]
        path = self._path(uuid, DISK_FILES["config"])
        if os.path.exists(path):
            os.remove(path)
        if not (instance.get("config_drive") or self.conf.force_config_drive):
            return
        meta = {"uuid": uuid, "name": instance.get("display_name"),
                "hostname": instance.get("hostname") or instance.get("display_name"),
                "availability_zone": instance.get("availability_zone"),
                "project_id": instance.get("project_id"),
                "launch_index": instance.get("launch_index") or 0,
                "public_keys": ({instance.get("key_name") or "key": instance["key_data"]}
                                if instance.get("key_data") else {}),
                "files": []}
        contents = {}
        for i, (file_path, data) in enumerate(injected_files or ()):
            content_path = f"/content/{i:04d}"
            meta["files"].append({"path": file_path, "content_path": content_path})
            contents[content_path] = data.encode() if isinstance(data, str) else data
        user_data = instance.get("user_data")
        guest_image.build_config_drive(
            path, meta, _b64decode(user_data) if user_data else None, contents)

    # -- host -----------------------------------------------------------------------------

    def get_available_nodes(self, refresh=False):
        return [self.nodename]

    def get_available_resource(self, nodename=None):
        used = driver_mod.usage_of(self._load(u)["flavor"] for u in self.list_instances())
        vcpus = self.overrides.get("vcpus") or os.cpu_count()
        memory_mb = self.overrides.get("memory_mb") or _memory_mb()
        local_gb = (self.overrides.get("local_gb")
                    or shutil.disk_usage(self.hypervisor.instances_path).total >> 30)
        return {
            "vcpus": vcpus, "memory_mb": memory_mb, "local_gb": local_gb,
            "vcpus_used": used["vcpus"], "memory_mb_used": used["memory_mb"],
            "local_gb_used": used["local_gb"],
            "hypervisor_type": "QEMU", "hypervisor_version": _qemu_version(),
            "hypervisor_hostname": self.nodename,
            "cpu_info": json.dumps({"arch": "x86_64", "model": "qemu64", "vendor": "QEMU",
                                    "topology": {"sockets": 1, "cores": vcpus, "threads": 1},
                                    "features": []}),
            "numa_topology": {"cells": [{"id": 0, "cpus": list(range(vcpus)),
                                         "memory_mb": memory_mb}]},
            "pci_passthrough_devices": [],
        }

    def get_traits(self, nodename=None):
        return sorted(TRAITS)

    def list_instances(self):
        root = self.hypervisor.instances_path
        return sorted(d for d in os.listdir(root) if not d.endswith(KEPT_SUFFIX)
                      and os.path.exists(os.path.join(root, d, DOMAIN)))

    def list_disks(self):
        root = self.hypervisor.instances_path
        return sorted(d for d in os.listdir(root) if not d.endswith(KEPT_SUFFIX)
                      and d != "_base" and not d.startswith("."))

    def instance_exists(self, instance):
        return os.path.exists(self._path(instance["uuid"], DOMAIN))

    # -- guest lifecycle ----------------------------------------------------------------

    def spawn(self, ctxt, instance, image_meta, network_info=None,
              block_device_info=None, power_on=True, injected_files=None):
        uuid = instance["uuid"]
        with self._lock:
            self.hypervisor.guest_dir(uuid)
            domain = self._new_domain(ctxt, instance, image_meta, block_device_info)
            self._config_drive(instance, injected_files)
            self._save(domain)
            if power_on:
                self._start(domain)

    def _new_domain(self, ctxt, instance, image_meta, block_device_info, **marks):
        """The record of a guest new on this host and its local disks (empty overlays
        over this host's cache of the image, ephemeral, swap). Booted from a volume: the
        volume is the root disk; the image it was made of (when it was made of one)
        gives only the kernel and ramdisk."""
        root_volume = next((b for b in (block_device_info or {}).get("block_device_mapping")
                            or [] if b.get("boot_index") in (0, "0")), None)
        image_id = ((image_meta or {}).get("id") or instance.get("image_ref")
                    or (root_volume or {}).get("image_id"))
        _image, boot = self._boot_files(ctxt, image_id, root=root_volume is None)
        domain = {"uuid": instance["uuid"], "name": instance.get("name"),
                  "flavor": instance["flavor"], "image": boot,
                  "volumes": _volumes(block_device_info), **marks}
        self._save(domain)  # before the disks: a restarted service knows what they are
        self._make_disks(instance, boot, ("ephemeral", "swap") if root_volume
                         else ("root", "ephemeral", "swap"))
        return domain

    def destroy(self, ctxt, instance, network_info=None, block_device_info=None,
                destroy_disks=True):
        guest = self.guest(instance)
        guest.destroy()
        if destroy_disks:
            guest.remove_files()
        else:
            for name in (DOMAIN, STATE_FILE):
                if os.path.exists(self._path(instance["uuid"], name)):
                    os.remove(self._path(instance["uuid"], name))

    def power_off(self, instance, timeout=0, retry_interval=0):
        """The ACPI power button (pressed again every ``retry_interval`` seconds, 5 by
        default), then the plug after ``timeout`` seconds (at once with 0)."""
        guest = self.guest(instance)
        if timeout:
            guest.power_off(timeout, retry_interval or 5)
        else:
            guest.destroy()
        self._drop_saved_state(instance["uuid"])

    def power_on(self, ctxt, instance, network_info=None, block_device_info=None):
        with self._lock:
            domain = self._load(instance["uuid"])
            if self.guest(instance).pid() is None:
                self._resume_or_start(domain)

    def reboot(self, ctxt, instance, network_info=None, reboot_type="SOFT",
               block_device_info=None):
        """SOFT: the guest powers itself off (ACPI button), then boots again; HARD:
        the process is stopped at once and started again."""
        guest = self.guest(instance)
        if reboot_type == "SOFT":
            if guest.status() != "running":
                raise GuestStateError(f"cannot soft reboot guest {instance['uuid']}: "
                                      f"it is {guest.status()}")
            guest.power_off(CLEAN_SHUTDOWN_SECONDS)
        else:
            guest.destroy()
            self._drop_saved_state(instance["uuid"])
        with self._lock:
            self._start(self._load(instance["uuid"]))

    def get_info(self, instance):
        uuid = instance["uuid"]
        if not os.path.exists(self._path(uuid, DOMAIN)):
            return {"state": power_state.NOSTATE}
        status = self.guest(instance).status()
        if status == "shutoff" and os.path.exists(self._path(uuid, STATE_FILE)):
            status = "suspended"
        return {"state": POWER.get(status, power_state.NOSTATE)}

    def get_console_output(self, ctxt, instance):
        self._load(instance["uuid"])  # a guest that is not here has no console
        return self.guest(instance).console_output()

    # -- volumes --------------------------------------------------------------------------

    def attach_volume(self, ctxt, connection_info, instance, mountpoint):
        with self._lock:
            domain = self._load(instance["uuid"])
            volume = _volume(connection_info, mountpoint)
            if any(v["id"] == volume["id"] for v in domain["volumes"]):
                return
            guest = self.guest(instance)
            if guest.pid() is not None:
                guest.attach_disk(Disk(volume["path"], volume["format"],
                                       device=volume["device"]))
            domain["volumes"].append(volume)
            self._save(domain)

    def detach_volume(self, ctxt, connection_info, instance, mountpoint):
        with self._lock:
            domain = self._load(instance["uuid"])
            volume_id = (connection_info or {}).get("data", {}).get("volume_id") or \
                (connection_info or {}).get("volume_id")
            gone = [v for v in domain["volumes"]
                    if v["id"] == volume_id or (mountpoint and v["mountpoint"] == mountpoint)]
            guest = self.guest(instance)
            for volume in gone:
                if guest.pid() is not None:
                    guest.detach_disk(volume["device"])
            domain["volumes"] = [v for v in domain["volumes"] if v not in gone]
            self._save(domain)

    # -- guest actions ----------------------------------------------------------------------

    def pause(self, instance):
        self.guest(instance).pause()

    def unpause(self, instance):
        self.guest(instance).resume()

    def suspend(self, ctxt, instance):
        """The guest's memory and devices saved to ``state`` in its directory (QEMU's
        migration to a file); the process ends."""
        guest = self.guest(instance)
        if guest.pid() is not None:
            guest.save_state(self._path(instance["uuid"], STATE_FILE))

    def resume(self, ctxt, instance, network_info=None, block_device_info=None):
        with self._lock:
            domain = self._load(instance["uuid"])
            if self.guest(instance).pid() is None:
                self._resume_or_start(domain)

    def _resume_or_start(self, domain):
        """Start the guest from its saved state when it has one, else boot it."""
        state = self._path(domain["uuid"], STATE_FILE)
        if not os.path.exists(state):
            return self._start(domain)
        guest = self.hypervisor.start(self._spec(domain), incoming=Guest.restore_uri(state))
        guest.wait_status("paused")  # saved stopped, it stays so once loaded
        guest.resume()
        os.remove(state)
        return guest

    def _drop_saved_state(self, uuid):
        path = self._path(uuid, STATE_FILE)
        if os.path.exists(path):
            os.remove(path)

    def rescue(self, ctxt, instance, network_info, image_meta, rescue_password,
               block_device_info=None):
        """The guest boots the rescue image (its kernel and ramdisk when it names them)
        from an overlay of it, its own root disk second."""
        uuid = instance["uuid"]
        with self._lock:
            domain = self._load(uuid)
            _image, boot = self._boot_files(ctxt, (image_meta or {}).get("id")
                                            or domain["image"]["id"])
            self.guest(instance).destroy()
            rescue_disk = self._path(uuid, DISK_FILES["rescue"])
            if os.path.exists(rescue_disk):
                os.remove(rescue_disk)
            self.hypervisor.create_overlay(uuid, DISK_FILES["rescue"], boot["base"],
                                           backing_format=boot["format"])
            domain["rescue"] = boot
            self._save(domain)
            self._start(domain)

    def unrescue(self, ctxt, instance):
        uuid = instance["uuid"]
        with self._lock:
            domain = self._load(uuid)
            self.guest(instance).destroy()
            domain.pop("rescue", None)
            self._save(domain)
            if os.path.exists(self._path(uuid, DISK_FILES["rescue"])):
                os.remove(self._path(uuid, DISK_FILES["rescue"]))
            self._start(domain)

    def rebuild(self, ctxt, instance, image_meta, network_info=None, block_device_info=None,
                preserve_ephemeral=False, power_on=True, injected_files=None):
        """A new root overlay over ``image_meta`` (and new ephemeral and swap disks
        unless ``preserve_ephemeral``); the volumes stay. Booted from a volume: the
        volume service wrote the image onto the root volume (reimage), which stays the
        root disk; the image gives the kernel and ramdisk."""
        uuid = instance["uuid"]
        with self._lock:
            domain = self._load(uuid)
            self.guest(instance).destroy()
            self._drop_saved_state(uuid)
            from_volume = any(v.get("root") for v in domain["volumes"])
            kinds = ([] if from_volume else ["root"]) + ["swap"] + (
                [] if preserve_ephemeral else ["ephemeral"])
            for kind in kinds:
                if os.path.exists(self._path(uuid, DISK_FILES[kind])):
                    os.remove(self._path(uuid, DISK_FILES[kind]))
            # A volume-backed server rebuilt with its volume's own image names none.
            image_id = ((image_meta or {}).get("id") or instance.get("image_ref")
                        or (domain["image"]["id"] if from_volume else None))
            _image, boot = self._boot_files(ctxt, image_id, root=not from_volume)
            self._make_disks(instance, boot, kinds)
            self._config_drive(instance, injected_files)
            domain.update(flavor=instance["flavor"], image=boot)
            domain.pop("rescue", None)
            self._save(domain)
            if power_on:
                self._start(domain)

    def snapshot(self, ctxt, instance, image_id, update_task_state=None):
        """The root disk, flattened (``qemu-img convert`` of the overlay over its
        image), uploaded as image ``image_id`` (qcow2, with the kernel, ramdisk and
        command line the guest boots with, so a guest spawned from it boots as this
        one does: unshelve, cross-cell moves). A running guest is paused while its
        disk is read."""
        uuid = instance["uuid"]
        self.image_api.update(ctxt, image_id, disk_format="qcow2",
                              properties=self._load(uuid)["image"].get("properties") or {})
        guest = self.guest(instance)
        running = guest.status() == "running"
        with tempfile.TemporaryDirectory(dir=self.hypervisor.instances_path,
                                         prefix=SNAPSHOT_DIR) as tmp:
            out = os.path.join(tmp, "root.qcow2")
            if running:
                guest.pause()
            try:
                qemu_img("convert", "-U", "-f", "qcow2", "-O", "qcow2",
                     self._path(uuid, DISK_FILES["root"]), out)
            finally:
                if running:
                    guest.resume()
            size = os.path.getsize(out)
            self.image_api.upload(ctxt, image_id, out)
        return {"image_id": image_id, "size": size}

    # -- cold moves (resize, cold migration) within a cell -----------------------------------

    def _kept(self, uuid):
        """The source's copy of a guest on the move, kept until confirm or revert."""
        return os.path.join(self.hypervisor.instances_path, uuid + KEPT_SUFFIX)

    def migrate_disk_and_power_off(self, ctxt, instance, dest_host, flavor,
                                   network_info=None, block_device_info=None):
        """Power the guest off (ACPI), set its directory aside for a revert and copy its
        record and disks (root overlay, ephemeral, config drive) to ``dest_host``'s
        directory; -> disk_info (JSON): the files copied."""
        uuid = instance["uuid"]
        with self._lock:
            domain = self._load(uuid)
            from_volume = any(v.get("root") for v in domain["volumes"])  # no root disk
            if not from_volume and (flavor.get("root_gb") or 0) < (
                    domain["flavor"].get("root_gb") or 0):
                raise QemuError("Unable to resize disk down.")
            self.guest(instance).power_off(CLEAN_SHUTDOWN_SECONDS)
            self._drop_saved_state(uuid)
            kept = self._kept(uuid)
            shutil.rmtree(kept, ignore_errors=True)
            os.rename(self.guest(instance).dir, kept)
            dest = self._host_of(dest_host).guest_dir(uuid)
            copied = [DOMAIN] + [DISK_FILES[k] for k in ("root", "ephemeral", "config")
                                 if os.path.exists(os.path.join(kept, DISK_FILES[k]))]
            for name in copied:
                shutil.copyfile(os.path.join(kept, name), os.path.join(dest, name))
            return json.dumps({"files": copied})

    def finish_migration(self, ctxt, migration, instance, disk_info, network_info,
                         image_meta, resize_instance, block_device_info=None,
                         power_on=True):
        """Destination: the copied overlays stand on this host's cache of the image, the
        root disk grown to the new flavor (the guest grows its filesystem at boot), a
        new swap disk; started."""
        uuid = instance["uuid"]
        with self._lock:
            domain = self._load(uuid)
            root = self._path(uuid, DISK_FILES["root"])
            has_root = os.path.exists(root)  # none when booted from a volume
            _image, boot = self._boot_files(ctxt, domain["image"]["id"], root=has_root)
            size = (instance["flavor"].get("root_gb") or 0) << 30
            if has_root:
                qemu_img("rebase", "-u", "-f", "qcow2", "-F", boot["format"], "-b",
                         boot["base"], root)
            if has_root and resize_instance and size:
                qemu_img("resize", "-f", "qcow2", root, str(size))
            self._make_disks(instance, boot, ("swap",))
            domain.update(flavor=instance["flavor"], image=boot,
                          volumes=_volumes(block_device_info))
            self._save(domain)
            if power_on:
                self._start(domain)

    def confirm_migration(self, ctxt, migration, instance, network_info=None):
        shutil.rmtree(self._kept(instance["uuid"]), ignore_errors=True)

    def finish_revert_migration(self, ctxt, instance, network_info=None, migration=None,
                                block_device_info=None, power_on=True):
        """Source: the kept directory is the guest again, with the volumes it is given
        now; started."""
        uuid = instance["uuid"]
        with self._lock:
            kept = self._kept(uuid)
            if os.path.isdir(kept):
                self.guest(instance).destroy()
                shutil.rmtree(self.guest(instance).dir, ignore_errors=True)
                os.rename(kept, self.guest(instance).dir)
            domain = self._load(uuid)
            if block_device_info is not None:
                domain["volumes"] = _volumes(block_device_info)
            self._save(domain)
            if power_on and self.guest(instance).pid() is None:
                self._start(domain)

    # -- live migration -------------------------------------------------------------------

    def pre_live_migration(self, ctxt, instance, block_device_info, network_info):
        """Destination: the guest's directory with disks of its sizes (the root an
        overlay over this host's cache of its image, empty until the copy fills it),
        its config drive, its volumes (the same files as on the source), and QEMU
        started to receive it on a UNIX socket; with volumes, its local disks exported
        over NBD for the source's mirrors (``live_migration``).
        ``domain.json`` says ``incoming`` before anything is made: a restarted service
        knows it is a copy arriving (removed if its move ended without it)."""
        uuid = instance["uuid"]
        with self._lock:
            if os.path.exists(self._path(uuid, DOMAIN)):
                raise QemuError(f"guest {uuid} is already on {self.host}")
            self.hypervisor.guest_dir(uuid)
            domain = self._new_domain(ctxt, instance, None, block_device_info,
                                      incoming=True)
            # The config drive is read-only (QEMU copies no such disk) and holds what
            # only the source has (the injected files): copied as a cold move copies it.
            config = os.path.join(self._host_of(instance["host"]).guest(uuid).dir,
                                  DISK_FILES["config"])
            if os.path.exists(config):
                shutil.copyfile(config, self._path(uuid, DISK_FILES["config"]))
            # Held stopped once loaded (-S): it runs only when the move goes forward
            # (post_live_migration_at_destination), never beside the source's copy.
            spec = self._spec(domain)
            guest = self.hypervisor.start(spec, incoming="defer", paused=True)
            if domain["volumes"]:
                guest.export_disks(_nbd_socket(guest), self._local_drives(spec))
            guest.migrate_incoming(_migration_uri(guest))

    def _local_drives(self, spec):
        """The drives of ``spec`` that a live migration copies: the writable disks of
        the guest's directory (not its volumes, not the config drive, made again)."""
        own = self.hypervisor.guest(spec.name).dir + os.sep
        return [drive for drive, disk in drives(spec)
                if not disk.readonly and disk.path.startswith(own)]

    def live_migration(self, ctxt, instance, dest, steering=None):
        """Source: QEMU copies the running guest's memory and its local disks (the hosts
        do not share their instances directories; volumes are shared) to ``dest``'s
        waiting QEMU; the progress is
        reported to ``steering`` as it goes. The copy waits before the switchover
        (``pause-before-switchover``) for this call to hand the guest over, so a copy
        whose compute service died never completes on its own (``init_host`` cancels
        it); once complete the record says ``handed_over`` before this call answers.
        Abort: QEMU cancels, the guest runs on here. Force complete: the guest is
        paused here so that the copy converges (it is resumed on the destination)."""
        uuid = instance["uuid"]
        guest = self.guest(instance)
        with self._lock:
            domain = self._load(uuid)
            domain["outgoing"] = dest
            domain.pop("handed_over", None)
            self._save(domain)
        asked = paused = continued = None
        # Beside volumes (the same files on both hosts) QEMU's block migration, which
        # copies every writable disk, cannot be used: the local disks are mirrored into
        # the destination's NBD exports, then the memory alone is migrated.
        mirrored = bool(domain.get("volumes"))
        bandwidth = self.conf.libvirt.live_migration_bandwidth << 20 or UNLIMITED_BANDWIDTH
        there = self._host_of(dest).guest(uuid)
        try:
            if mirrored:
                local = self._local_drives(self._spec(domain))
                guest.mirror_disks(_nbd_socket(there), local)
                self._wait_mirrors(guest, uuid, len(local), steering)
            guest.migrate(_migration_uri(there), copy_disks=not mirrored,
                          max_bandwidth=bandwidth, pause_before_switchover=True)
            reported = 0.0
            while True:
                progress = guest.migration()
                if progress.status in ("completed", "failed", "cancelled"):
                    break
                if progress.status == "pre-switchover" and not continued:
                    continued = True
                    if mirrored:  # the guest stopped: the copies are made the same
                        guest.end_mirrors()
                    guest.continue_migration()
                if steering is not None:
                    if steering.asked == steering.ABORT and asked is None:
                        asked = steering.ABORT
                        guest.abort_migration()
                    elif steering.asked == steering.FORCE_COMPLETE and asked is None:
                        asked, paused = steering.FORCE_COMPLETE, guest.status() == "running"
                        if paused:
                            guest.pause()
                        guest.set_migration_bandwidth(UNLIMITED_BANDWIDTH)
                    if time.monotonic() - reported >= PROGRESS_SECONDS:
                        steering.report(progress)
                        reported = time.monotonic()
                time.sleep(MIGRATION_POLL_SECONDS)
            if steering is not None:
                steering.report(progress)
        except BaseException:
            if mirrored:
                self._abandon_mirrors(guest)
            self._end_outgoing(uuid)
            raise
        if mirrored:
            self._abandon_mirrors(guest)
        if progress.status == "completed":
            with self._lock:
                domain = self._load(uuid)
                domain["handed_over"] = True
                self._save(domain)
            return
        if paused:
            guest.resume()
        self._end_outgoing(uuid)
        if asked == LiveMigrationSteering.ABORT and progress.status == "cancelled":
            raise LiveMigrationAborted(
                f"Live migration of instance {uuid} from {self.host} was aborted.")
        raise QemuError(f"live migration of {uuid} to {dest} {progress.status}: "
                        f"{progress.error}")

    def _wait_mirrors(self, guest, uuid, count, steering):
        """Until the ``count`` mirrors have caught up (the guest's writes go to both
        copies from then on); an abort asked meanwhile ends the move here."""
        while True:
            jobs = guest.mirrors()
            if len(jobs) < count:
                raise QemuError(f"a disk mirror of {uuid} to the destination failed: "
                                + guest.log_tail())
            if all(ready for ready, _, _ in jobs.values()):
                return
            if steering is not None and steering.asked == steering.ABORT:
                raise LiveMigrationAborted(
                    f"Live migration of instance {uuid} from {self.host} was aborted.")
            time.sleep(MIGRATION_POLL_SECONDS)

    @staticmethod
    def _abandon_mirrors(guest):
        try:
            guest.end_mirrors(abandon=True)
        except (QemuError, QMPError):
            LOG.warning("%s: the disk mirrors of %s did not end", guest.host, guest.name)

    def _end_outgoing(self, uuid):
        """The guest stays here: its record no longer names a move."""
        with self._lock:
            domain = self._load(uuid)
            if domain.pop("outgoing", None) is not None:
                domain.pop("handed_over", None)
                self._save(domain)

    def rollback_live_migration_at_source(self, ctxt, instance):
        """The move was undone after QEMU had handed the guest over (the destination's
        service died before it ran its copy, held stopped there): the copy stopped
        here at the switchover runs on, the same boot, from where it stopped. The
        mark goes after: a service that dies between finds it running (init_host)."""
        uuid = instance["uuid"]
        guest = self.guest(instance)
        with self._lock:
            try:
                domain = self._load(uuid)
            except InstanceNotFound:
                return
            if not domain.get("handed_over"):
                return  # the copy failed or was cancelled: the guest never stopped
            if guest.status() == "postmigrate":
                LOG.info("%s: the live migration of %s was undone after the copy: it "
                         "runs on here", self.host, uuid)
                guest.resume()
        self._end_outgoing(uuid)

    def post_live_migration_at_destination(self, ctxt, instance, network_info):
        """The guest here is the server: its record names no move, and it runs (held
        stopped since it arrived; a paused server stays paused)."""
        uuid = instance["uuid"]
        guest = self.guest(instance)
        with self._lock:
            domain = self._load(uuid)
            domain.pop("incoming", None)
            self._save(domain)
        guest.wait_loaded()
        guest.stop_exports()
        if guest.status() == "paused" and instance.get("vm_state") != "paused":
            guest.resume()

    def cleanup_live_migration_source(self, ctxt, instance):
        self.destroy(ctxt, instance)

    def rollback_live_migration_at_destination(self, ctxt, instance):
        self.destroy(ctxt, instance)

    def init_host(self, host):
        """A live migration from here still copying when the compute service stopped is
        cancelled (no service watches it any more; its guest runs on here). One that
        QEMU completed before the service could answer (not ``handed_over``) was undone
        by the conductor, and the destination never ran the guest (held stopped until
        the move goes forward): the guest runs on here from where it stopped. A
        guest handed over stays stopped until the move's end removes it. A snapshot's
        copy it left is removed: the snapshot is taken again (or was never needed)."""
        root = self.hypervisor.instances_path
        for name in os.listdir(root):
            if name.startswith(SNAPSHOT_DIR):
                shutil.rmtree(os.path.join(root, name), ignore_errors=True)
        for uuid in self.list_instances():
            if self._load(uuid).get("outgoing") is None:
                continue
            guest = self.guest({"uuid": uuid})
            if self._load(uuid).get("handed_over"):
                if guest.status() == "running":  # resumed by the move's undo
                    self._end_outgoing(uuid)
                continue
            if guest.pid() is not None and guest.migration().status not in (
                    "completed", "failed", "cancelled", "none"):
                LOG.info("%s: cancelling the live migration of %s left by a stopped service",
                         self.host, uuid)
                guest.abort_migration()
                guest.wait_migration()
            if guest.status() == "postmigrate":
                LOG.info("%s: %s was copied but never handed over: it runs on here",
                         self.host, uuid)
                guest.resume()
            self._end_outgoing(uuid)

    def get_vnc_console(self, ctxt, instance):
        """The guest's VNC server: a UNIX socket on this host."""
        return self._console_socket(instance, "vnc", self.guest(instance).vnc_socket)

    def get_serial_console(self, ctxt, instance, index=0):
        """The guest's first serial port (its console): a UNIX socket on this host. The
        second is the probe's, not offered."""
        if index != 0:
            raise driver_mod.ConsoleTypeUnavailable("serial")
        return self._console_socket(instance, "serial", self.guest(instance).console_socket)

    def _console_socket(self, instance, kind, path):
        if self.guest(instance).pid() is None or not os.path.exists(path):
            raise driver_mod.ConsoleTypeUnavailable(kind)
        return driver_mod.console_address(self.host, unix_socket=path)


class InstanceNotFound(Exception):
    code = 404


class GuestStateError(Exception):
    """The guest is not in the state the operation needs."""


def _volume(connection_info, mountpoint, root=False):
    """A volume as the guest record keeps it: its file, the device it is plugged as,
    whether it is the root disk (the server booted from it)."""
    data = (connection_info or {}).get("data") or {}
    if not data.get("path"):
        raise QemuError(f"volume {data.get('volume_id')} has no file on this machine "
                        "([volume_service] volumes_dir)")
    return {"id": data["volume_id"], "path": data["path"], "format": data.get("format", "raw"),
            "mountpoint": mountpoint, "device": "vol-" + data["volume_id"][:8], "root": root}


def _volumes(block_device_info):
    """The volumes of ``block_device_info`` as the guest record keeps them."""
    return [_volume(b["connection_info"], b.get("mount_device"),
                    root=b.get("boot_index") in (0, "0"))
            for b in (block_device_info or {}).get("block_device_mapping") or []]


def _migration_uri(guest):
    """Where a live migration's destination ``guest`` listens: a UNIX socket of its run
    directory (the hosts of one machine)."""
    return f"unix:{os.path.join(guest.run_dir, 'migrate.sock')}"


def _nbd_socket(guest):
    """Where a live migration's destination ``guest`` exports its local disks."""
    return os.path.join(guest.run_dir, "nbd.sock")


def _b64decode(text):
    try:
        return base64.b64decode(text, validate=True)
    except ValueError:
        return text.encode()


def _memory_mb():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    return 0


_VERSION = []


def _qemu_version():
    """QEMU's version as the reference reports a hypervisor's (7.2.0 -> 7002000)."""
    if not _VERSION:
        out = subprocess.run([QEMU, "--version"], capture_output=True, text=True).stdout
        m = re.search(r"version (\d+)\.(\d+)\.(\d+)", out)
        _VERSION.append(int(m[1]) * 1000000 + int(m[2]) * 1000 + int(m[3]) if m else 0)
    return _VERSION[0]
