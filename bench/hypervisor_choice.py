"""libvirt or straight QMP: the same guest, the same moves, measured both ways.

For each way, two independent "hosts" on this machine, the guest built by
``novella.virt.guest_image`` (256 MiB, 1 vcpu, TCG), and:

- start: from the start request to the guest's first line on its serial port
  (``novella-boot ...``, printed once it has booted);
- control path memory: the resident memory of the daemons each host needs
  beside QEMU (libvirtd + virtlogd; none for QMP, whose client lives in the
  compute service);
- live migration with the disks copied (non-shared storage, only the
  overlay: both hosts hold the base image): wall time of the whole migration,
  and the downtime QEMU reports; the guest is checked to have kept its boot
  id and gone on counting on the destination.

QMP: two ``novella.virt.qemu.process.Host`` objects (their own instances and
run directories). libvirt: two libvirtd instances, each with virtlogd in a
mount namespace of its own (``unshare -m``) so that /run/libvirt,
/var/lib/libvirt, /var/log/libvirt, /etc/libvirt (its ``host_uuid``) and the
images directory are its own, their sockets in the host's directory;
``virsh migrate --live --copy-storage-inc`` between them. Needs root, the
packages ``libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients`` and a
``libvirt-qemu`` user (created when missing); without them only QMP runs.

    python3 bench/hypervisor_choice.py [--runs 2] [--skip-libvirt]
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from novella.virt import guest_image  # noqa: E402
from novella.virt.qemu.process import Disk, GuestSpec, Host  # noqa: E402

MEMORY_MIB = 256
BOOT_LINE = re.compile(r"novella-boot (\S+)")
COUNTER = re.compile(r"novella-counter (\S+) (\d+)")


def wait_for(path, pattern, timeout=180, start=None):
    """Seconds from ``start`` until ``pattern`` appears in file ``path``; -> (s, match)."""
    start = start or time.monotonic()
    while time.monotonic() - start < timeout:
        try:
            with open(path, errors="replace") as f:
                m = pattern.search(f.read())
            if m:
                return time.monotonic() - start, m
        except FileNotFoundError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"{pattern.pattern!r} not in {path} after {timeout}s")


def counters(path):
    with open(path, errors="replace") as f:
        return [(b, int(n)) for b, n in COUNTER.findall(f.read())]


def check_continued(boot_id, before, after_log):
    """The destination's counter lines: same boot id, counting on from ``before``."""
    _, m = wait_for(after_log, COUNTER, timeout=30)
    time.sleep(2.5)
    after = counters(after_log)
    ok = bool(after) and all(b == boot_id for b, _ in after) and after[-1][1] > before
    return ok, after[-1][1] if after else None


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))


# --- QMP -----------------------------------------------------------------------------

def run_qmp(image, work):
    hosts = [Host(os.path.join(work, f"qmp-{n}")) for n in ("a", "b")]

    def spec(host):
        cached = {name: host.cache_image(name, lambda p, s=src: shutil.copyfile(s, p))
                  for name, src in (("kernel", image.kernel), ("ramdisk", image.ramdisk),
                                    ("root", image.root))}
        disk = host.create_overlay("vm1", "disk", cached["root"])
        return GuestSpec("vm1", MEMORY_MIB, 1, (disk,), cached["kernel"], cached["ramdisk"],
                         image.command_line)

    a, b = hosts
    try:
        t0 = time.monotonic()
        src = a.start(spec(a))
        start_s, m = wait_for(src.console_log, BOOT_LINE, start=t0)
        boot_id = m.group(1)
        wait_for(src.console_log, COUNTER)
        time.sleep(2)
        before = counters(src.console_log)[-1][1]
        t0 = time.monotonic()
        dest = b.start(spec(b), incoming="defer")
        uri = f"unix:{dest.run_dir}/migrate.sock"
        dest.migrate_incoming(uri)
        src.migrate(uri, copy_disks=True)
        info = src.wait_migration(interval=0.05)
        migrate_s = time.monotonic() - t0
        if info.status != "completed":
            raise RuntimeError(f"QMP migration {info.status}: {info.error}")
        ok, last = check_continued(boot_id, before, dest.console_log)
        return {"start_s": start_s, "control_rss_kib": 0, "migrate_s": migrate_s,
                "downtime_ms": info.downtime_ms, "continued": ok}
    finally:
        for host in hosts:
            host.guest("vm1").destroy()


# --- libvirt ------------------------------------------------------------------------------

# Runs inside `unshare -m`: this host's own libvirt directories, then its daemons.
LIBVIRT_HOST = r"""set -e
H=$1
for d in run lib cache log/qemu etc sock images; do mkdir -p $H/$d; done
mkdir -p /run/libvirt /var/lib/libvirt /var/cache/libvirt /var/log/libvirt /etc/libvirt \
         /var/lib/novella-images
mount --make-rprivate /
mount --bind $H/run /run/libvirt
mount --bind $H/lib /var/lib/libvirt
mount --bind $H/cache /var/cache/libvirt
mount --bind $H/log /var/log/libvirt
mount --bind $H/etc /etc/libvirt
mount --bind $H/images /var/lib/novella-images
printf 'unix_sock_dir = "%s/sock"\nhost_uuid = "%s"\n' $H $(cat $H/uuid) \
    > /etc/libvirt/libvirtd.conf
printf 'user = "root"\ngroup = "root"\ndynamic_ownership = 0\nsecurity_driver = "none"\n' \
    > /etc/libvirt/qemu.conf
virtlogd -d -p $H/virtlogd.pid
libvirtd -d --pid-file $H/libvirtd.pid
"""

DOMAIN = """<domain type='qemu'>
  <name>vm1</name>
  <memory unit='MiB'>{memory}</memory>
  <vcpu>1</vcpu>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>/var/lib/novella-images/vmlinuz</kernel>
    <initrd>/var/lib/novella-images/initrd</initrd>
    <cmdline>{cmdline}</cmdline>
  </os>
  <features><acpi/></features>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <disk type='file' device='disk'>
      <driver name='qemu' type='qcow2'/>
      <source file='/var/lib/novella-images/vm1.qcow2'/>
      <target dev='vda' bus='virtio'/>
    </disk>
    <serial type='file'>
      <source path='/var/log/libvirt/qemu/vm1-console.log' append='on'/>
      <target port='0'/>
    </serial>
    <memballoon model='none'/>
  </devices>
</domain>
"""


def libvirt_missing():
    missing = [t for t in ("libvirtd", "virtlogd", "virsh", "unshare") if not shutil.which(t)]
    if os.geteuid() != 0:
        missing.append("root")
    return missing


def run_libvirt(image, work):
    if subprocess.run(["id", "libvirt-qemu"], capture_output=True).returncode:
        # libvirtd's QEMU driver resolves its default user before reading qemu.conf.
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell",
                        "/usr/sbin/nologin", "libvirt-qemu"], check=True)
    dirs = [os.path.join(work, f"libvirt-{n}") for n in ("a", "b")]
    uris = [f"qemu:///system?socket={d}/sock/libvirt-sock" for d in dirs]
    xml = os.path.join(work, "vm1.xml")
    with open(xml, "w") as f:
        f.write(DOMAIN.format(memory=MEMORY_MIB, cmdline=image.command_line))
    try:
        for d in dirs:
            os.makedirs(os.path.join(d, "images"))
            with open(os.path.join(d, "uuid"), "w") as f:
                f.write(str(uuid.uuid4()))
            for src, name in ((image.kernel, "vmlinuz"), (image.ramdisk, "initrd"),
                              (image.root, "root.qcow2")):
                shutil.copyfile(src, os.path.join(d, "images", name))
            # The overlay names its backing file as the host sees it, in its namespace.
            subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-u", "-b",
                            "/var/lib/novella-images/root.qcow2",
                            os.path.join(d, "images", "vm1.qcow2"), f"{guest_image.ROOT_SIZE_MIB}M"],
                           check=True)
            subprocess.run(["unshare", "-m", "sh", "-c", LIBVIRT_HOST, "sh", d], check=True)
        for d, uri in zip(dirs, uris):
            for _ in range(100):
                if subprocess.run(["virsh", "-c", uri, "version"],
                                  capture_output=True).returncode == 0:
                    break
                time.sleep(0.1)
        control_kib = sum(rss_kib(int(open(os.path.join(dirs[0], p)).read()))
                          for p in ("libvirtd.pid", "virtlogd.pid"))
        src_log = os.path.join(dirs[0], "log", "qemu", "vm1-console.log")
        dest_log = os.path.join(dirs[1], "log", "qemu", "vm1-console.log")
        t0 = time.monotonic()
        subprocess.run(["virsh", "-q", "-c", uris[0], "create", xml], check=True,
                       capture_output=True)
        start_s, m = wait_for(src_log, BOOT_LINE, start=t0)
        boot_id = m.group(1)
        wait_for(src_log, COUNTER)
        time.sleep(2)
        before = counters(src_log)[-1][1]
        t0 = time.monotonic()
        subprocess.run(["virsh", "-c", uris[0], "migrate", "--live", "--copy-storage-inc",
                        "vm1", uris[1]], check=True, capture_output=True)
        migrate_s = time.monotonic() - t0
        stats = subprocess.run(["virsh", "-c", uris[1], "domjobinfo", "vm1", "--completed"],
                               capture_output=True, text=True).stdout
        downtime = re.search(r"Total downtime:\s+(\d+)", stats)
        ok, last = check_continued(boot_id, before, dest_log)
        return {"start_s": start_s, "control_rss_kib": control_kib, "migrate_s": migrate_s,
                "downtime_ms": int(downtime.group(1)) if downtime else None, "continued": ok}
    finally:
        for uri in uris:
            subprocess.run(["virsh", "-c", uri, "destroy", "vm1"], capture_output=True)
        for d in dirs:
            for name in ("libvirtd.pid", "virtlogd.pid"):
                try:
                    os.kill(int(open(os.path.join(d, name)).read()), 15)
                except (OSError, ValueError):
                    pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--skip-libvirt", action="store_true")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="novella-hv-")
    try:
        image = guest_image.build(os.path.join(work, "image"))
        ways = {"qmp": run_qmp}
        missing = libvirt_missing()
        if args.skip_libvirt or missing:
            print(f"libvirt not measured: {'--skip-libvirt' if args.skip_libvirt else missing}")
        else:
            ways["libvirt"] = run_libvirt
        results = {w: [] for w in ways}
        for run in range(args.runs):
            for way, fn in ways.items():  # alternated, so both see the same machine load
                run_dir = os.path.join(work, f"{way}-{run}")
                os.makedirs(run_dir)
                results[way].append(fn(image, run_dir))
                print(f"run {run + 1} {way}: {results[way][-1]}", flush=True)
        with open("/proc/loadavg") as f:
            load = f.read().split()[0]
        print(f"\n{MEMORY_MIB} MiB guest, 1 vcpu, TCG; load average {load}; "
              f"median of {args.runs} run(s)")
        print(f"{'':10} {'start->first line':>18} {'control RSS':>12} "
              f"{'live migration':>15} {'downtime':>9}  counter continued")
        for way, rs in results.items():
            med = {k: statistics.median(r[k] for r in rs if r[k] is not None)
                   for k in ("start_s", "control_rss_kib", "migrate_s", "downtime_ms")
                   if any(r[k] is not None for r in rs)}
            print(f"{way:10} {med['start_s']:>17.1f}s {med['control_rss_kib'] / 1024:>9.1f} MiB "
                  f"{med['migrate_s']:>14.2f}s {med.get('downtime_ms', 0):>7.0f}ms  "
                  f"{all(r['continued'] for r in rs)}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
