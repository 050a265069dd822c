"""The guest image: a small bootable Linux made from the host's Debian packages.

Three files, booted the way the reference boots AMI-style images (the root
disk image names its kernel and ramdisk in its ``kernel_id``/``ramdisk_id``
properties and its command line in ``os_command_line``):

- ``vmlinuz``: Debian's cloud kernel (``linux-image-cloud-amd64``);
- ``initrd``: a busybox initramfs holding the kernel modules a guest needs
  (virtio disks and network, iso9660/vfat for the config drive, the ACPI power
  button); it mounts the root disk read-write and switches to it;
- ``root.qcow2``: the guest's persistent root, an ext4 filesystem made with
  ``mke2fs -d`` from a directory (static busybox, ``resize2fs``, the init
  scripts), so a file written inside the guest lives on its disk.

At boot the root's init (busybox ``init``, ``/etc/init.d/rcS``) grows the
filesystem to the disk, reads the config drive (label ``config-2``:
``openstack/latest/meta_data.json`` and ``user_data``) or else the metadata
service at 169.254.169.254, sets the hostname, runs user data that starts with
``#!``, then prints ``novella-boot BOOT_ID`` and, once a second,
``novella-counter BOOT_ID N UPTIME`` on the first serial port. The second
serial port runs the command server that ``novella.virt.guest_probe`` talks to.
A press of the ACPI power button (QMP ``system_powerdown``) powers it off
cleanly. docs/real-guests.md says why the image is made this way.
"""
import dataclasses
import glob
import gzip
import io
import json
import os
import re
import shutil
import stat
import subprocess
import tempfile

BUSYBOX = "/bin/busybox"  # busybox-static: runs with no library
GUEST_IMAGE_NAME = "novella-guest"
ROOT_DEVICE = "/dev/vda"
# no_timer_check: under TCG on a busy machine the kernel's check of the timer
# interrupt through the IO-APIC can time out, and it then panics at boot.
COMMAND_LINE = f"console=ttyS0 root={ROOT_DEVICE} rw quiet no_timer_check"
ROOT_SIZE_MIB = 64

# Loaded in this order by the initramfs (with their dependencies first).
MODULES = ("virtio_pci", "virtio_blk", "virtio_net", "virtio_console", "ata_piix", "sr_mod",
           "isofs", "vfat", "nls_cp437", "nls_utf8", "nls_iso8859-1", "button", "evdev")
# Dynamically linked tools the root carries with their libraries.
ROOT_TOOLS = ("/sbin/resize2fs",)


class GuestImageError(Exception):
    pass


@dataclasses.dataclass(frozen=True)
class GuestImage:
    """The built files: a kernel, a ramdisk and a root disk, and the command line."""
    kernel: str
    ramdisk: str
    root: str
    command_line: str = COMMAND_LINE

    @classmethod
    def in_dir(cls, directory):
        return cls(os.path.join(directory, "vmlinuz"), os.path.join(directory, "initrd"),
                   os.path.join(directory, "root.qcow2"))

    def exists(self):
        return all(os.path.exists(p) for p in (self.kernel, self.ramdisk, self.root))


# --- the initramfs -----------------------------------------------------------------

INITRAMFS_INIT = r"""#!/bin/busybox sh
/bin/busybox --install -s /bin
mkdir -p /proc /sys /dev /newroot
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
while read -r m; do insmod "/lib/modules/$m" 2>/dev/null; done < /lib/modules/order
root=/dev/vda
for arg in $(cat /proc/cmdline); do
  case "$arg" in root=*) root="${arg#root=}" ;; esac
done
n=0
while [ ! -b "$root" ] && [ $n -lt 100 ]; do sleep 0.1; n=$((n + 1)); done
if ! mount -t ext4 -o rw "$root" /newroot; then
  echo "novella-initramfs: cannot mount $root"; exec sh
fi
umount /proc /sys
mount --move /dev /newroot/dev
exec switch_root /newroot /sbin/init
"""


def _module_order(kernel_version, names=MODULES):
    """Paths (relative to /lib/modules/VERSION) of ``names`` and what they need,
    dependencies first, from the kernel's modules.dep."""
    base = f"/lib/modules/{kernel_version}"
    deps = {}
    with open(os.path.join(base, "modules.dep")) as f:
        for line in f:
            path, _, needs = line.partition(":")
            deps[path] = needs.split()
    by_name = {re.sub(r"\.ko(\.\w+)?$", "", os.path.basename(p)).replace("-", "_"): p
               for p in deps}
    order = []

    def add(path):
        if path in order:
            return
        # modules.dep lists a module's needs with the deepest last.
        for need in reversed(deps[path]):
            add(need)
        order.append(path)

    for name in names:
        path = by_name.get(name.replace("-", "_"))
        if path is not None:  # not every kernel builds each as a module
            add(path)
    return order


class _Cpio:
    """A newc cpio archive (what the kernel unpacks as its initramfs)."""

    def __init__(self):
        self.out = io.BytesIO()
        self.ino = 0

    def _entry(self, name, mode, data=b""):
        self.ino += 1
        fields = (self.ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name) + 1, 0)
        header = b"070701" + b"".join(b"%08X" % v for v in fields)
        self.out.write(header + name.encode() + b"\0")
        self.out.write(b"\0" * (-(len(header) + len(name) + 1) % 4))
        self.out.write(data)
        self.out.write(b"\0" * (-len(data) % 4))

    def dir(self, name):
        self._entry(name, stat.S_IFDIR | 0o755)

    def file(self, name, data, mode=0o644):
        self._entry(name, stat.S_IFREG | mode, data)

    def close(self):
        self._entry("TRAILER!!!", 0)
        return self.out.getvalue()


def _write_initramfs(path, kernel_version):
    cpio = _Cpio()
    for d in ("bin", "dev", "proc", "sys", "newroot", "lib", "lib/modules"):
        cpio.dir(d)
    with open(BUSYBOX, "rb") as f:
        cpio.file("bin/busybox", f.read(), 0o755)
    cpio.file("init", INITRAMFS_INIT.encode(), 0o755)
    order = _module_order(kernel_version)
    for rel in order:
        with open(f"/lib/modules/{kernel_version}/{rel}", "rb") as f:
            cpio.file("lib/modules/" + os.path.basename(rel), f.read())
    cpio.file("lib/modules/order", "".join(os.path.basename(r) + "\n" for r in order).encode())
    with open(path, "wb") as f:
        f.write(gzip.compress(cpio.close(), compresslevel=6))


# --- the root filesystem -------------------------------------------------------------

INITTAB = """\
::sysinit:/etc/init.d/rcS
::respawn:/sbin/novella-counter
tty1::respawn:/sbin/novella-counter
ttyS1::respawn:/sbin/novella-probe
::respawn:/sbin/novella-powerbutton
::shutdown:/bin/sync
::shutdown:/bin/umount -a -r
"""

RCS = r"""#!/bin/sh
# The guest's boot: mounts, the disk grown, config drive or metadata, user data.
mount -t proc proc /proc
mount -t sysfs sysfs /sys
grep -q ' /dev ' /proc/mounts || mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /run /tmp /mnt/config
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /run
mount -o remount,rw /
resize2fs "$(awk '$2 == "/" && $1 != "rootfs" {print $1}' /proc/mounts)" >/dev/null 2>&1
ip link set lo up
mkdir -p /run/novella
source=none
dev=$(findfs LABEL=config-2 2>/dev/null)
if [ -n "$dev" ] && mount -o ro "$dev" /mnt/config 2>/dev/null; then
  source=config-drive
  cp /mnt/config/openstack/latest/meta_data.json /run/novella/ 2>/dev/null
  cp /mnt/config/openstack/latest/user_data /run/novella/ 2>/dev/null
  # The files injected into the server (personality): where meta_data.json says.
  grep -o '"path": "[^"]*", "content_path": "[^"]*"' /run/novella/meta_data.json 2>/dev/null |
  while IFS='"' read -r _ _ _ file _ _ _ content _; do
    mkdir -p "$(dirname "$file")" && cp "/mnt/config/openstack$content" "$file"
  done
  umount /mnt/config
elif ip link set eth0 up 2>/dev/null \
    && udhcpc -i eth0 -n -q -t 3 -T 1 -s /usr/share/udhcpc/default.script >/dev/null 2>&1; then
  md=http://169.254.169.254/openstack/latest
  if wget -q -T 3 -O /run/novella/meta_data.json $md/meta_data.json; then
    source=metadata
    wget -q -T 3 -O /run/novella/user_data $md/user_data || rm -f /run/novella/user_data
  else
    rm -f /run/novella/meta_data.json
  fi
fi
name=$(sed -n 's/.*"hostname": *"\([^"]*\)".*/\1/p' /run/novella/meta_data.json 2>/dev/null)
[ -n "$name" ] || name=$(cat /etc/hostname)
hostname "$name"
echo "novella-boot $(cat /proc/sys/kernel/random/boot_id) hostname=$name source=$source"
if [ "$(head -c 2 /run/novella/user_data 2>/dev/null)" = "#!" ]; then
  chmod +x /run/novella/user_data
  /run/novella/user_data > /run/novella/user_data.log 2>&1
  echo "novella-user-data exit=$?"
fi
"""

COUNTER = r"""#!/bin/sh
# Once a second: the boot id (a reboot changes it) and a count (a pause stops it).
boot=$(cat /proc/sys/kernel/random/boot_id)
n=0
while :; do
  echo "novella-counter $boot $n $(cut -d' ' -f1 /proc/uptime)"
  n=$((n + 1))
  sleep 1
done
"""

# The command server on the second serial port (novella.virt.guest_probe is its client):
# a line "ID BASE64-COMMAND" in, a line "ID EXIT-STATUS BASE64-OUTPUT" out.
PROBE = r"""#!/bin/sh
stty raw -echo 2>/dev/null
echo "novella-probe ready"
while read -r id cmd; do
  [ -n "$id" ] || continue
  out=$(echo "$cmd" | base64 -d | sh 2>&1)
  rc=$?
  printf '%s %s %s\n' "$id" "$rc" "$(printf '%s' "$out" | base64 | tr -d '\n')"
done
"""

POWER_BUTTON = r"""#!/bin/sh
# The ACPI power button (QMP system_powerdown) powers the guest off cleanly.
for ev in /sys/class/input/event*; do
  if grep -q "Power Button" "$ev/device/name" 2>/dev/null; then
    head -c 1 "/dev/input/${ev##*/}" >/dev/null && exec poweroff
  fi
done
exec sleep 2147483647
"""

UDHCPC_SCRIPT = r"""#!/bin/sh
case "$1" in
  bound|renew)
    ip addr flush dev "$interface"
    ip addr add "$ip/${mask:-24}" dev "$interface"
    for r in $router; do ip route add default via "$r" dev "$interface"; break; done
    : > /etc/resolv.conf
    for d in $dns; do echo "nameserver $d" >> /etc/resolv.conf; done ;;
  deconfig) ip addr flush dev "$interface" ;;
esac
"""


def _write(path, text, mode=0o644):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)


def _libraries(binary):
    """The shared libraries ``binary`` loads (ldd), the loader included."""
    out = subprocess.run(["ldd", binary], capture_output=True, text=True, check=True).stdout
    return sorted({m.group(1) for m in re.finditer(r"(/\S+\.so[.\d]*)", out)})


def _populate_root(root):
    for d in ("bin", "sbin", "etc/init.d", "dev", "proc", "sys", "run", "tmp", "mnt", "root",
              "usr/share/udhcpc", "lib", "lib64"):
        os.makedirs(os.path.join(root, d), exist_ok=True)
    os.chmod(os.path.join(root, "tmp"), 0o1777)
    shutil.copy2(BUSYBOX, os.path.join(root, "bin/busybox"))
    applets = subprocess.run([BUSYBOX, "--list"], capture_output=True, text=True,
                             check=True).stdout.split()
    for applet in applets:
        if applet != "busybox":
            os.symlink("busybox", os.path.join(root, "bin", applet))
    os.symlink("../bin/busybox", os.path.join(root, "sbin/init"))
    for tool in ROOT_TOOLS:
        shutil.copy2(tool, os.path.join(root, tool.lstrip("/")))
        for lib in _libraries(tool):
            dest = os.path.join(root, lib.lstrip("/"))
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            shutil.copy2(os.path.realpath(lib), dest)
    _write(os.path.join(root, "etc/inittab"), INITTAB)
    _write(os.path.join(root, "etc/init.d/rcS"), RCS, 0o755)
    _write(os.path.join(root, "sbin/novella-counter"), COUNTER, 0o755)
    _write(os.path.join(root, "sbin/novella-probe"), PROBE, 0o755)
    _write(os.path.join(root, "sbin/novella-powerbutton"), POWER_BUTTON, 0o755)
    _write(os.path.join(root, "usr/share/udhcpc/default.script"), UDHCPC_SCRIPT, 0o755)
    _write(os.path.join(root, "etc/hostname"), "novella-guest\n")
    _write(os.path.join(root, "etc/passwd"), "root:x:0:0:root:/root:/bin/sh\n")
    _write(os.path.join(root, "etc/group"), "root:x:0:\n")
    _write(os.path.join(root, "etc/fstab"), "")


def _run(*cmd):
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        raise GuestImageError(f"{' '.join(cmd)}: {proc.stderr.strip() or proc.stdout.strip()}")


# --- building ------------------------------------------------------------------------

def find_kernel():
    """-> (kernel path, version): the newest installed cloud kernel (or any kernel)."""
    kernels = (sorted(glob.glob("/boot/vmlinuz-*-cloud-amd64"))
               or sorted(glob.glob("/boot/vmlinuz-*")))
    if not kernels:
        raise GuestImageError("no kernel in /boot: install linux-image-cloud-amd64 (README.md)")
    path = kernels[-1]
    return path, os.path.basename(path)[len("vmlinuz-"):]


def missing_tools():
    """The host tools the builder needs that are not installed."""
    need = [BUSYBOX, "/sbin/mke2fs", shutil.which("qemu-img") or "qemu-img", *ROOT_TOOLS]
    return [t for t in need if not os.path.exists(t)]


def build(output_dir, root_size_mib=ROOT_SIZE_MIB):
    """Build the guest into ``output_dir`` (vmlinuz, initrd, root.qcow2); -> GuestImage."""
    missing = missing_tools()
    if missing:
        raise GuestImageError(f"missing {', '.join(missing)}: install the packages in README.md")
    kernel, version = find_kernel()
    os.makedirs(output_dir, exist_ok=True)
    image = GuestImage.in_dir(output_dir)
    shutil.copyfile(kernel, image.kernel)
    _write_initramfs(image.ramdisk, version)
    with tempfile.TemporaryDirectory(prefix="novella-guest-") as tmp:
        root, raw = os.path.join(tmp, "root"), os.path.join(tmp, "root.raw")
        _populate_root(root)
        _run("mke2fs", "-q", "-F", "-t", "ext4", "-L", "root", "-d", root, raw,
             f"{root_size_mib}M")
        _run("qemu-img", "convert", "-c", "-f", "raw", "-O", "qcow2", raw, image.root)
    return image


def upload(image_api, ctxt, image, name=GUEST_IMAGE_NAME, visibility="public"):
    """Upload a built guest to the image service: the kernel (aki) and ramdisk (ari)
    images, then the root disk (qcow2) naming them. -> the root disk's image record."""
    kernel = image_api.create(ctxt, name=f"{name}-kernel", disk_format="aki",
                              container_format="aki", visibility=visibility)
    image_api.upload(ctxt, kernel["id"], image.kernel)
    ramdisk = image_api.create(ctxt, name=f"{name}-ramdisk", disk_format="ari",
                               container_format="ari", visibility=visibility)
    image_api.upload(ctxt, ramdisk["id"], image.ramdisk)
    root = image_api.create(ctxt, name=name, disk_format="qcow2", container_format="bare",
                            visibility=visibility, min_disk=1, min_ram=128,
                            properties={"kernel_id": kernel["id"],
                                        "ramdisk_id": ramdisk["id"],
                                        "os_command_line": image.command_line,
                                        "hw_serial_port_count": "2"})
    image_api.upload(ctxt, root["id"], image.root)
    return image_api.get(ctxt, root["id"])


def ensure_guest_image(image_api, build_dir, name=GUEST_IMAGE_NAME):
    """-> (root disk image, created?): the active image named ``name``, built into
    ``build_dir`` (kept as a cache) and uploaded when there is none. What ``novella up``
    calls to offer the real guest as its default image."""
    from novella.context import get_admin_context
    ctxt = get_admin_context()
    for found in image_api.list(ctxt, filters={"name": name}):
        if found["status"] == "active":
            return found, False
    image = GuestImage.in_dir(build_dir)
    if not image.exists():
        image = build(build_dir)
    return upload(image_api, ctxt, image, name=name), True


def build_config_drive(path, meta_data, user_data=None, contents=None):
    """An iso9660 config drive (label ``config-2``) at ``path`` with the reference's
    layout: openstack/latest/meta_data.json, when given user_data, and the files
    injected into the server (``contents``: {content path: bytes}, e.g.
    ``/content/0000``, each named by a ``files`` entry of ``meta_data``)."""
    with tempfile.TemporaryDirectory(prefix="novella-configdrive-") as tmp:
        latest = os.path.join(tmp, "openstack", "latest")
        os.makedirs(latest)
        for content_path, data in (contents or {}).items():
            target = os.path.join(tmp, "openstack", content_path.lstrip("/"))
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "wb") as f:
                f.write(data)
        with open(os.path.join(latest, "meta_data.json"), "w") as f:
            json.dump(meta_data, f)
        if user_data is not None:
            with open(os.path.join(latest, "user_data"), "wb") as f:
                f.write(user_data.encode() if isinstance(user_data, str) else user_data)
        _run("xorriso", "-as", "mkisofs", "-quiet", "-o", path, "-V", "config-2", "-J", "-R",
             tmp)
    return path
