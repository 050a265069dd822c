"""A real guest's live migration: Novella's through the API beside QEMU's own over QMP.

The same guest (``novella.virt.guest_image``: 256 MiB, 1 vcpu, TCG, its root disk a
qcow2 overlay over the image each host caches) live-migrated between two hosts of
this machine with its disk copied (the hosts do not share their instances
directories), in the same run, alternated:

- Novella: ``os-migrateLive`` on an all-in-one whose two hosts run the QEMU driver,
  from the request to the server ACTIVE on the other host with nothing left of it on
  the source (the migration 'completed'); split into the hypervisor's share (QEMU's
  ``total-time`` of the copy: memory and disk) and the control plane's (the rest:
  API, scheduling, the destination's preparation and QEMU start, the handover, the
  clean-up of the source);
- QMP alone: the QEMU layer (``novella.virt.qemu.process``) starting the
  destination's QEMU, ``migrate`` with the same parameters, until QEMU says
  completed.

For both, the downtime as the guest sees it: the guest prints ``novella-counter
BOOT N UPTIME`` once a second on its serial console; the longest gap (host clock)
between two lines across the move, less the second between two lines. And QEMU's
own downtime figure. The guest must count on with the same boot id.

    python3 bench/live_migration_qemu.py [--runs 3]
"""
import argparse
import logging
import os
import re
import shutil
import statistics
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from novella.virt import guest_image  # noqa: E402
from novella.virt.driver import LiveMigrationSteering  # noqa: E402
from novella.virt.qemu.driver import UNLIMITED_BANDWIDTH  # noqa: E402
from novella.virt.qemu.process import Disk, GuestSpec, Host  # noqa: E402

COUNTER = re.compile(rb"novella-counter (\S+) (\d+)")
LIVE = {"os-migrateLive": {"host": None, "block_migration": "auto"}}


class CounterWatch:
    """Host-clock times of the guest's counter lines, read from its console logs (the
    source's, then the destination's) every 10 ms while the move runs."""

    def __init__(self, logs):
        """``logs()``: the console logs to read (the destination's may come later)."""
        self.logs, self.seen, self.stop = logs, {}, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stop.is_set():
            now = time.monotonic()
            for path in self.logs():
                try:
                    with open(path, "rb") as f:
                        for boot, n in COUNTER.findall(f.read()):
                            self.seen.setdefault((boot, int(n)), now)
                except FileNotFoundError:
                    pass
            time.sleep(0.01)

    def result(self, settle=3.0):
        """-> (the guest's downtime in s: longest gap less 1 s, boot ids seen)."""
        time.sleep(settle)  # a few lines on the destination
        self.stop.set()
        self.thread.join()
        times = sorted(self.seen.values())
        gap = max(b - a for a, b in zip(times, times[1:]))
        return max(0.0, gap - 1.0), {boot.decode() for boot, _ in self.seen}


def wait_counter(path, timeout=300):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(path, "rb") as f:
                found = COUNTER.findall(f.read())
            if len(found) >= 2:
                return found[-1][0].decode()
        except FileNotFoundError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"no counter in {path} after {timeout}s")


# --- Novella through the API ------------------------------------------------------------

def start_cloud(work, image_dir, cells=1):
    """An all-in-one of ``cells`` cells of two hosts each, its hosts running real guests
    with the QEMU driver (TCG), the guest image in ``image_dir`` its default image."""
    from novella.allinone import AllInOne
    from tests.real_guest.conftest import RealCloud
    data = os.path.join(work, "cloud")
    shutil.copytree(image_dir, os.path.join(data, "guest-image"))
    overrides = {None: {"compute_driver": "qemu.QEMUDriver", "service_down_time": 3600},
                 "libvirt": {"virt_type": "qemu"}}
    aio = AllInOne(data, cells=cells, hosts_per_cell=2, log=None, config_overrides=overrides)
    return RealCloud(aio.start())


def stop_cloud(cloud, work):
    """Every guest left destroyed, the all-in-one stopped, ``work`` removed."""
    for mgr in cloud.aio.computes.values():
        for uuid in mgr.driver.list_instances():
            mgr.driver.guest({"uuid": uuid}).destroy()
        shutil.rmtree(mgr.driver.hypervisor.run_dir, ignore_errors=True)
    cloud.aio.stop()
    shutil.rmtree(work, ignore_errors=True)


def novella_run(cloud):
    aio = cloud.aio
    status, body = cloud.api("POST", "/servers", {"server": {
        "name": "bench", "flavorRef": "1", "imageRef": aio.demo_image["id"],
        "networks": "none"}})
    assert status == 202, body
    aio.wait_idle(600)
    sid = body["server"]["id"]
    source = cloud.server(sid)["OS-EXT-SRV-ATTR:host"]
    dest = next(h for h in aio.computes if h != source)
    guests = [aio.computes[h].driver.guest({"uuid": sid}) for h in (source, dest)]
    boot_id = wait_counter(guests[0].console_log)
    last = {}
    report = LiveMigrationSteering.report

    def keep(steering, figures):  # the copy's final figures, QEMU's own
        last["progress"] = figures
        report(steering, figures)
    LiveMigrationSteering.report = keep
    try:
        watch = CounterWatch(lambda: [g.console_log for g in guests])
        t0 = time.monotonic()
        status, body = cloud.api("POST", f"/servers/{sid}/action", LIVE)
        assert status == 202, body
        aio.wait_idle(600)
        total = time.monotonic() - t0
    finally:
        LiveMigrationSteering.report = report
    downtime, boots = watch.result()
    server = cloud.server(sid)
    assert (server["status"], server["OS-EXT-SRV-ATTR:host"]) == ("ACTIVE", dest), server
    assert guests[0].pid() is None and guests[1].status() == "running"
    progress = last["progress"]
    cloud.api("DELETE", f"/servers/{sid}")
    aio.wait_idle(600)
    return {"total_s": total, "hypervisor_s": progress.total_time_ms / 1000,
            "qemu_downtime_ms": progress.downtime_ms, "guest_downtime_s": downtime,
            "memory_mib": progress.memory_processed / (1 << 20),
            "same_boot": boots == {boot_id}}


# --- QEMU alone over QMP -----------------------------------------------------------------

def qmp_run(image, work, n):
    hosts = [Host(os.path.join(work, f"qmp-{n}-{side}")) for side in ("a", "b")]

    def spec(host):
        cached = {name: host.cache_image(name, lambda p, s=src: shutil.copyfile(s, p))
                  for name, src in (("kernel", image.kernel), ("ramdisk", image.ramdisk),
                                    ("root", image.root))}
        disk = host.create_overlay("vm", "disk", cached["root"], 1 << 30)  # as m1.tiny's
        return GuestSpec("vm", 256, 1, (disk, ), cached["kernel"], cached["ramdisk"],
                         image.command_line)

    a, b = hosts
    try:
        src = a.start(spec(a))
        boot_id = wait_counter(src.console_log)
        watch = CounterWatch(lambda: [src.console_log, b.guest("vm").console_log])
        t0 = time.monotonic()
        dest = b.start(spec(b), incoming="defer")
        uri = f"unix:{dest.run_dir}/migrate.sock"
        dest.migrate_incoming(uri)
        src.migrate(uri, copy_disks=True, max_bandwidth=UNLIMITED_BANDWIDTH)
        info = src.wait_migration(interval=0.02)
        total = time.monotonic() - t0
        assert info.status == "completed", info
        downtime, boots = watch.result()
        return {"total_s": total, "hypervisor_s": info.total_time_ms / 1000,
                "qemu_downtime_ms": info.downtime_ms, "guest_downtime_s": downtime,
                "memory_mib": info.memory_processed / (1 << 20),
                "same_boot": boots == {boot_id}}
    finally:
        for host in hosts:
            host.guest("vm").destroy()
            shutil.rmtree(host.run_dir, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    logging.basicConfig(level=logging.ERROR)
    work = tempfile.mkdtemp(prefix="novella-bench-livemig-")
    image = guest_image.build(os.path.join(work, "guest-image"))
    cloud = start_cloud(work, os.path.dirname(image.root))
    runs = {"novella": [], "qmp": []}
    try:
        for n in range(args.runs):
            runs["novella"].append(novella_run(cloud))
            runs["qmp"].append(qmp_run(image, work, n))
    finally:
        stop_cloud(cloud, work)

    def med(way, key):
        return statistics.median(r[key] for r in runs[way])
    load = os.getloadavg()[0]
    print(f"# Live migration of a real guest (256 MiB, 1 vcpu, TCG, disk copied), "
          f"median of {args.runs} alternated runs, {os.cpu_count()} cores, load {load:.1f}")
    print("| | whole move | hypervisor (memory + disk copy) | control plane | "
          "memory sent | downtime, guest's counter | downtime, QEMU's figure | "
          "same boot counting on |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for way, name in (("novella", "Novella (os-migrateLive)"), ("qmp", "QEMU alone (QMP migrate)")):
        total, hyp = med(way, "total_s"), med(way, "hypervisor_s")
        print(f"| {name} | {total:.2f} s | {hyp:.2f} s | {total - hyp:.2f} s | "
              f"{med(way, 'memory_mib'):.1f} MiB | "
              f"{med(way, 'guest_downtime_s') * 1000:.0f} ms | "
              f"{med(way, 'qemu_downtime_ms'):.0f} ms | "
              f"{all(r['same_boot'] for r in runs[way])} |")
    print(f"\nNovella / QEMU alone, whole move: "
          f"{med('novella', 'total_s') / med('qmp', 'total_s'):.2f}x (target: within 1.2x)")


if __name__ == "__main__":
    main()
