"""QEMU processes for guests: a host's image cache, overlays, start, stop, migrate.

A guest's files::

    INSTANCES/NAME/            disks (qcow2 overlays), console.log, qemu.log, qemu.pid
    INSTANCES/_base/ID         the image cache: one copy of each image on this host
    RUN/NAME/                  qmp.sock, console.sock, probe.sock, vnc.sock

The sockets live in a short run directory because a UNIX socket's path is at
most 107 bytes. ``Host.guest(name)`` finds it again from its pid file. QEMU runs in a session of
its own, so it outlives the process that started it, as guests outlive a
restarted compute service; what it prints goes to ``qemu.log``.
"""
import dataclasses
import hashlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
import time

from novella.virt.qemu.qmp import Monitor, QMPError

QEMU = "qemu-system-x86_64"
QEMU_IMG = "qemu-img"


class QemuError(Exception):
    pass


@dataclasses.dataclass(frozen=True)
class Disk:
    """A disk of a guest; ``device`` names its virtio device (``vdN`` by its place when
    not given), so a disk plugged while the guest runs can be unplugged by name."""
    path: str
    format: str = "qcow2"
    readonly: bool = False
    device: str | None = None


@dataclasses.dataclass(frozen=True)
class GuestSpec:
    """What a guest is made of. The same spec starts it on a migration's destination,
    with the disk paths of that host."""
    name: str
    memory_mib: int = 256
    vcpus: int = 1
    disks: tuple = ()
    kernel: str | None = None
    ramdisk: str | None = None
    command_line: str | None = None
    vnc: bool = True


@dataclasses.dataclass(frozen=True)
class MigrationProgress:
    """query-migrate's answer in the reference's figures (bytes; times in ms)."""
    status: str
    memory_total: int = 0
    memory_processed: int = 0
    memory_remaining: int = 0
    disk_total: int = 0
    disk_processed: int = 0
    disk_remaining: int = 0
    total_time_ms: int | None = None
    downtime_ms: int | None = None
    error: str | None = None

    @classmethod
    def from_qmp(cls, info):
        ram, disk = info.get("ram", {}), info.get("disk", {})
        return cls(status=info.get("status", "none"),
                   memory_total=ram.get("total", 0), memory_processed=ram.get("transferred", 0),
                   memory_remaining=ram.get("remaining", 0),
                   disk_total=disk.get("total", 0), disk_processed=disk.get("transferred", 0),
                   disk_remaining=disk.get("remaining", 0),
                   total_time_ms=info.get("total-time"), downtime_ms=info.get("downtime"),
                   error=info.get("error-desc"))


def drives(spec):
    """-> [(drive id, Disk)] of ``spec``: ``drive-<device>``, the device ``vdN`` by its
    place when not named."""
    return [(f"drive-{disk.device or f'vd{i}'}", disk) for i, disk in enumerate(spec.disks)]


def _run(*cmd):
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        raise QemuError(f"{' '.join(cmd)}: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout


def qemu_img(*args):
    """Run ``qemu-img ARGS``; -> its output (QemuError when it fails)."""
    return _run(QEMU_IMG, *args)


def to_raw(src, dest):
    """The disk image ``src`` (in the format qemu-img finds it is) written as a raw
    file ``dest``. An image naming a backing file is refused: it would read another
    file of this machine. Without qemu-img (a simulated-only install) the bytes are
    copied as they are."""
    if shutil.which(QEMU_IMG) is None:
        shutil.copyfile(src, dest)
        return
    info = json.loads(qemu_img("info", "--output=json", src))
    if info.get("backing-filename"):
        raise QemuError(f"{src}: an image with a backing file is refused")
    qemu_img("convert", "-q", "-f", info["format"], "-O", "raw", src, dest)


def _alive(pid, name):
    """Whether ``pid`` is the QEMU process of guest ``name`` (pids are reused)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            args = f.read().split(b"\0")
    except OSError:
        return False
    return b"guest=" + name.encode() in args


class Host:
    """One compute host's hypervisor on this machine."""

    def __init__(self, instances_path, accel="tcg", run_dir=None):
        self.instances_path = os.path.abspath(instances_path)
        self.accel = accel
        digest = hashlib.sha1(self.instances_path.encode()).hexdigest()[:10]
        self.run_dir = run_dir or os.path.join(tempfile.gettempdir(), f"novella-qemu-{digest}")
        self.cache_dir = os.path.join(self.instances_path, "_base")
        for d in (self.instances_path, self.run_dir, self.cache_dir):
            os.makedirs(d, exist_ok=True)

    # --- disks -----------------------------------------------------------------------
    def cache_image(self, image_id, fetch):
        """The path of image ``image_id`` in this host's cache; ``fetch(path)`` writes it
        there the first time (renamed into place when complete)."""
        path = os.path.join(self.cache_dir, image_id)
        if not os.path.exists(path):
            tmp = f"{path}.part"
            fetch(tmp)
            os.replace(tmp, path)
        return path

    def create_overlay(self, name, disk_name, backing, size_bytes=None, backing_format="qcow2"):
        """A qcow2 overlay ``disk_name`` of guest ``name`` over ``backing``; grown to
        ``size_bytes`` when given. -> Disk."""
        path = os.path.join(self.guest_dir(name), disk_name)
        cmd = [QEMU_IMG, "create", "-q", "-f", "qcow2", "-F", backing_format, "-b", backing, path]
        _run(*cmd + ([str(size_bytes)] if size_bytes else []))
        return Disk(path)

    def guest_dir(self, name):
        path = os.path.join(self.instances_path, name)
        os.makedirs(path, exist_ok=True)
        return path

    # --- guests -------------------------------------------------------------------------
    def guest(self, name):
        return Guest(self, name)

    def guests(self):
        """The guests of this host whose QEMU process runs."""
        names = [n for n in os.listdir(self.instances_path) if n != "_base"]
        return [g for g in map(self.guest, sorted(names)) if g.pid() is not None]

    def start(self, spec, incoming=None, paused=False):
        """Start ``spec``'s QEMU process; -> Guest. ``incoming``: a migration
        destination, listening on that URI (``"defer"``: set by migrate_incoming)."""
        guest = self.guest(spec.name)
        if guest.pid() is not None:
            raise QemuError(f"guest {spec.name} is already running (pid {guest.pid()})")
        os.makedirs(guest.run_dir, exist_ok=True)
        for sock in (guest.qmp_socket, guest.console_socket, guest.probe_socket,
                     guest.vnc_socket):
            if os.path.exists(sock):
                os.unlink(sock)
        log = open(guest.log_file, "ab")
        try:
            proc = subprocess.Popen(self.command(spec, guest, incoming, paused),
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                    start_new_session=True)
        finally:
            log.close()
        # Its own session: the guest outlives this process; reaped here while it lives.
        threading.Thread(target=proc.wait, daemon=True).start()
        guest.wait_monitor(proc)
        return guest

    def command(self, spec, guest, incoming=None, paused=False):
        """The QEMU command line of ``spec`` on this host."""
        def chardev(id_, path, extra=""):
            return ["-chardev", f"socket,id={id_},path={path},server=on,wait=off{extra}"]

        cmd = [QEMU, "-name", f"guest={spec.name}", "-accel", self.accel, "-machine", "pc",
               "-m", str(spec.memory_mib), "-smp", str(spec.vcpus),
               "-nodefaults", "-no-user-config", "-display", "none",
               "-pidfile", guest.pid_file,
               *chardev("qmp", guest.qmp_socket), "-mon", "chardev=qmp,mode=control",
               *chardev("console", guest.console_socket,
                        f",logfile={guest.console_log},logappend=on"),
               "-serial", "chardev:console",
               *chardev("probe", guest.probe_socket), "-serial", "chardev:probe"]
        if spec.vnc:
            # -nodefaults leaves no display adapter: the VNC server needs one to show.
            cmd += ["-device", "VGA", "-vnc", f"unix:{guest.vnc_socket}"]
        if spec.kernel:
            cmd += ["-kernel", spec.kernel]
            if spec.ramdisk:
                cmd += ["-initrd", spec.ramdisk]
            if spec.command_line:
                cmd += ["-append", spec.command_line]
        for drive, disk in drives(spec):
            # Named drives (not -blockdev): QEMU's block migration copies named ones.
            ro = ",readonly=on" if disk.readonly else ""
            cmd += ["-drive", f"file={disk.path},format={disk.format},if=none,"
                              f"id={drive}{ro}",
                    "-device", f"virtio-blk-pci,drive={drive},id={drive[len('drive-'):]}"]
        if paused:
            cmd.append("-S")
        if incoming:
            cmd += ["-incoming", incoming]
        return cmd


class Guest:
    """One guest's QEMU process on a host (it may or may not be running)."""

    def __init__(self, host, name):
        self.host, self.name = host, name
        self.dir = os.path.join(host.instances_path, name)
        self.run_dir = os.path.join(host.run_dir, name)
        self.pid_file = os.path.join(self.dir, "qemu.pid")
        self.log_file = os.path.join(self.dir, "qemu.log")
        self.console_log = os.path.join(self.dir, "console.log")
        self.qmp_socket = os.path.join(self.run_dir, "qmp.sock")
        self.console_socket = os.path.join(self.run_dir, "console.sock")
        self.probe_socket = os.path.join(self.run_dir, "probe.sock")
        self.vnc_socket = os.path.join(self.run_dir, "vnc.sock")
        self.monitor = Monitor(self.qmp_socket)

    def pid(self):
        """The running QEMU process's pid, or None."""
        try:
            with open(self.pid_file) as f:
                pid = int(f.read().strip())
        except (OSError, ValueError):
            return None
        return pid if _alive(pid, self.name) else None

    def wait_monitor(self, proc, timeout=30):
        """Wait for a starting QEMU (``proc``) to answer on its monitor."""
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise QemuError(f"QEMU for {self.name} exited {proc.returncode}: "
                                + self.log_tail())
            try:
                self.monitor.command("query-status")
                return
            except QMPError:
                if time.monotonic() > deadline:
                    raise QemuError(f"QEMU for {self.name} does not answer: " + self.log_tail())
                time.sleep(0.05)

    def log_tail(self, lines=5):
        try:
            with open(self.log_file, errors="replace") as f:
                return " | ".join(f.read().strip().splitlines()[-lines:])
        except FileNotFoundError:
            return ""

    def status(self):
        """QEMU's run state (running, paused, inmigrate, postmigrate, shutdown, ...),
        or ``shutoff`` when no process runs."""
        if self.pid() is None:
            return "shutoff"
        try:
            return self.monitor.command("query-status")["status"]
        except QMPError:
            return "shutoff" if self.pid() is None else "unknown"

    def console_output(self):
        try:
            with open(self.console_log, "rb") as f:
                return f.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    def pause(self):
        self.monitor.command("stop")

    def attach_disk(self, disk):
        """Plug ``disk`` (its ``device`` named) into the running guest."""
        drive = f"drive-{disk.device}"
        self.monitor.command("blockdev-add", **{
            "node-name": drive, "driver": disk.format, "read-only": disk.readonly,
            "file": {"driver": "file", "filename": disk.path}})
        try:
            self.monitor.command("device_add", driver="virtio-blk-pci", drive=drive,
                                 id=disk.device)
        except QMPError:
            self.monitor.command("blockdev-del", **{"node-name": drive})
            raise

    def detach_disk(self, device, timeout=30):
        """Unplug the disk ``device``: the guest is asked (ACPI hot-unplug) and must let
        it go within ``timeout``; -> whether it was plugged."""
        if device not in self.devices():
            return False
        self.monitor.command("device_del", id=device)
        deadline = time.monotonic() + timeout
        while device in self.devices():
            if time.monotonic() > deadline:
                raise QemuError(f"the guest {self.name} did not release {device} "
                                f"within {timeout}s")
            time.sleep(0.2)
        try:  # a disk plugged while running has its node to drop; one from -drive has not
            self.monitor.command("blockdev-del", **{"node-name": f"drive-{device}"})
        except QMPError:
            pass
        return True

    def devices(self):
        """Ids of the guest's named devices (its disks among them)."""
        return {p["name"] for p in self.monitor.command("qom-list", path="/machine/peripheral")
                if p["type"].startswith("child<")}

    def save_state(self, path, timeout=300):
        """Stop the guest and write its whole state (memory, devices) to ``path``, then
        end the process; ``Host.start(spec, incoming=Guest.restore_uri(path))`` brings
        it back as it was."""
        self.monitor.command("stop")
        self._set_capabilities(block=False)
        self.monitor.command("migrate", uri=f"exec:cat > {shlex.quote(path)}")
        done = self.wait_migration(timeout)
        if done.status != "completed":
            self.monitor.command("cont")
            raise QemuError(f"saving {self.name}'s state failed: {done.error}")
        self.destroy()

    @staticmethod
    def restore_uri(path):
        return f"exec:cat {shlex.quote(path)}"

    def resume(self):
        self.monitor.command("cont")

    def power_off(self, timeout=30, press_every=5):
        """Press the ACPI power button (again every ``press_every`` seconds: a press
        before the guest listens for it is lost) and wait for the guest to power off;
        -> whether it did within ``timeout`` (the process is stopped either way)."""
        deadline = time.monotonic() + timeout
        clean = False
        while not clean and time.monotonic() < deadline:
            try:
                self.monitor.command("system_powerdown")
            except QMPError:
                pass
            clean = self.wait_exit(max(0.0, min(press_every, deadline - time.monotonic())))
        if not clean:
            self.destroy()
        return clean

    def destroy(self):
        """Stop the process at once (pulling the plug)."""
        pid = self.pid()
        if pid is None:
            return
        try:
            self.monitor.command("quit")
        except QMPError:
            pass
        if not self.wait_exit(5):
            os.kill(pid, signal.SIGKILL)
            self.wait_exit(5)

    def wait_status(self, status, timeout=300):
        """Wait until QEMU's run state is ``status`` (e.g. an incoming guest loaded)."""
        deadline = time.monotonic() + timeout
        while (now := self.status()) != status:
            if now == "shutoff" or time.monotonic() > deadline:
                raise QemuError(f"guest {self.name} is {now}, not {status}: "
                                + self.log_tail())
            time.sleep(0.1)

    def wait_loaded(self, timeout=300):
        """Wait until an incoming migration's guest is loaded (no longer ``inmigrate``)."""
        deadline = time.monotonic() + timeout
        while (now := self.status()) == "inmigrate":
            if time.monotonic() > deadline:
                raise QemuError(f"guest {self.name} still {now} after {timeout}s")
            time.sleep(0.05)
        if now == "shutoff":
            raise QemuError(f"guest {self.name} is not running: " + self.log_tail())

    def wait_exit(self, timeout):
        deadline = time.monotonic() + timeout
        while self.pid() is not None:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)  # QEMU told to quit is gone in a few ms
        return True

    def remove_files(self):
        """Delete the guest's directory and sockets (after destroy)."""
        shutil.rmtree(self.dir, ignore_errors=True)
        shutil.rmtree(self.run_dir, ignore_errors=True)

    # --- live migration ------------------------------------------------------------
    def migrate_incoming(self, uri):
        """On a destination started with ``incoming="defer"``: listen on ``uri``."""
        self.monitor.command("migrate-incoming", uri=uri)

    def _set_capabilities(self, block=False, pause_before_switchover=False):
        self.monitor.command("migrate-set-capabilities", capabilities=[
            {"capability": "block", "state": bool(block)},
            {"capability": "pause-before-switchover", "state": bool(pause_before_switchover)}])

    def migrate(self, uri, copy_disks=False, max_bandwidth=None, downtime_limit_ms=None,
                pause_before_switchover=False):
        """Start a live migration to a destination listening on ``uri``. ``copy_disks``:
        the disks are not shared, copy them too (only the overlays: the destination's
        overlays stand on the same cached images). ``pause_before_switchover``: once
        the copy converges the guest stops and the migration waits in
        ``pre-switchover`` for ``continue_migration()`` (or an abort): it cannot hand
        the guest over without its caller."""
        self._set_capabilities(copy_disks, pause_before_switchover)
        params = {"block-incremental": bool(copy_disks)}
        if max_bandwidth:
            params["max-bandwidth"] = int(max_bandwidth)
        if downtime_limit_ms:
            params["downtime-limit"] = int(downtime_limit_ms)
        self.monitor.command("migrate-set-parameters", **params)
        self.monitor.command("migrate", uri=uri)

    # Non-shared disks beside shared ones (volumes): the destination exports its empty
    # copies over NBD and the source mirrors into them, then only the memory is migrated.
    def export_disks(self, socket, drive_ids):
        """On a destination waiting for its guest: its ``drive_ids`` writable over NBD on
        the UNIX ``socket``, for the source's mirrors."""
        self.monitor.command("nbd-server-start", addr={"type": "unix",
                                                       "data": {"path": socket}})
        for drive in drive_ids:
            self.monitor.command("nbd-server-add", device=drive, writable=True)

    def stop_exports(self):
        """The NBD server of ``export_disks`` ended (none: nothing to do)."""
        try:
            self.monitor.command("nbd-server-stop")
        except QMPError:
            pass

    def mirror_disks(self, socket, drive_ids):
        """Mirror each of ``drive_ids`` (only what its top image holds: the destination's
        overlay stands on the same image) into the destination's export on ``socket``;
        every write of the guest goes to both from then on."""
        for drive in drive_ids:
            self.monitor.command("blockdev-add", **{
                "driver": "nbd", "node-name": f"nbd-{drive}", "export": drive,
                "server": {"type": "unix", "path": socket}})
            self.monitor.command("blockdev-mirror", **{
                "job-id": f"mirror-{drive}", "device": drive, "target": f"nbd-{drive}",
                "sync": "top"})

    def mirrors(self):
        """-> {job id: (ready, len, offset)} of the guest's mirror jobs."""
        return {j["device"]: (j["ready"], j["len"], j["offset"])
                for j in self.monitor.command("query-block-jobs") if j["type"] == "mirror"}

    def end_mirrors(self, abandon=False, timeout=300):
        """End the mirror jobs and drop their targets. A ready mirror of a stopped guest
        ends with the destination's copy the same as the source's (its last writes
        sent first); ``abandon``: at once, the copy left as it is (the move undone)."""
        for job in self.mirrors():
            self.monitor.command("block-job-cancel", device=job, force=abandon)
        deadline = time.monotonic() + timeout
        while self.mirrors():
            if time.monotonic() > deadline:
                raise QemuError(f"the disk mirrors of {self.name} did not end")
            time.sleep(0.05)
        for node in self.monitor.command("query-named-block-nodes"):
            if node["node-name"].startswith("nbd-drive-"):
                self.monitor.command("blockdev-del", **{"node-name": node["node-name"]})

    def migration(self):
        """-> MigrationProgress of the current (or last) outgoing migration."""
        return MigrationProgress.from_qmp(self.monitor.command("query-migrate"))

    def set_migration_bandwidth(self, bytes_per_second):
        """The most the running migration copies per second from now on."""
        self.monitor.command("migrate-set-parameters", **{"max-bandwidth": int(bytes_per_second)})

    def abort_migration(self):
        self.monitor.command("migrate_cancel")

    def continue_migration(self):
        """Hand the guest over to the destination (a migration in ``pre-switchover``)."""
        self.monitor.command("migrate-continue", state="pre-switchover")

    def wait_migration(self, timeout=300, interval=0.2, progress=None):
        """Wait for the migration to end; -> its last MigrationProgress. ``progress`` is
        called with each figure read while it runs."""
        deadline = time.monotonic() + timeout
        while True:
            info = self.migration()
            if info.status in ("completed", "failed", "cancelled"):
                return info
            if progress is not None:
                progress(info)
            if time.monotonic() > deadline:
                raise QemuError(f"migration of {self.name} still {info.status} after {timeout}s")
            time.sleep(interval)
