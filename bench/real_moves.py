"""Every move of one real guest, its time split between the control plane and the hypervisor.

One all-in-one whose hosts run the QEMU driver (TCG): two cells of two hosts each
(the hosts share no instances directory: every disk is copied). One server
(256 MiB, 1 vcpu, the novella-guest image, booted on cell1-host1) taken in turn
through:

- cold migration + confirm (to the other host of its cell);
- resize + confirm (to a flavor of the same memory and a 2 GiB root disk);
- live migration (``os-migrateLive``, block migration), with the downtime the guest
  sees: the longest gap between two of its once-a-second counter lines, less 1 s;
- evacuation, its host's compute service forced down (rebuilt from the image on the
  other host; the source's service is brought back after, untimed);
- shelve (offloaded at once) + unshelve (to the other host of its cell);
- cross-cell resize + confirm (to a flavor of a 3 GiB root disk; the other host of
  its cell disabled for it, so the scheduler's choice is the other cell).

Before each move the guest has booted: it prints its counter and listens to its ACPI
power button (a press before it listens is lost: the clean power-off of shelve and
cross-cell moves would then wait its whole 60 s). For each:

- whole move: from the request until the server is ACTIVE (VERIFY_RESIZE for a
  resize or a cold migration) and every cast has been handled, plus the same for the
  confirm (for shelve: the shelve plus the unshelve);
- hypervisor: the wall time spent inside the QEMU driver's calls that act on a guest
  or its disks (``HYPERVISOR_CALLS``: copying disks and memory, powering off,
  starting QEMU, caching the image on a host, removing a copy), the union of their
  intervals within the move; the guest's own boot after QEMU starts is not in it
  (the move ends when the API says ACTIVE);
- control plane: the rest (API, scheduling, placement, conductor, RPC, database,
  network and image service calls).

    python3 bench/real_moves.py [--runs 3]
"""
import argparse
import functools
import logging
import os
import statistics
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from live_migration_qemu import LIVE, CounterWatch, start_cloud, stop_cloud  # noqa: E402

from novella.virt import guest_image  # noqa: E402
from novella.virt.guest_probe import ProbeError  # noqa: E402
from novella.virt.qemu.driver import QEMUDriver  # noqa: E402

HYPERVISOR_CALLS = (
    "spawn", "rebuild", "destroy", "power_off", "snapshot",
    "migrate_disk_and_power_off", "finish_migration", "confirm_migration",
    "pre_live_migration", "live_migration", "post_live_migration_at_destination",
    "cleanup_live_migration_source")
MOVES = ("cold migration", "resize", "live migration", "evacuation",
         "shelve + unshelve", "cross-cell resize")
SOURCE = "cell1-host1"


class DriverClock:
    """Intervals (monotonic) of every HYPERVISOR_CALLS call on any host, while installed
    (one made inside another, e.g. destroy in cleanup_live_migration_source, is the
    outer one's)."""

    def __init__(self):
        self.intervals, self.lock, self.real = [], threading.Lock(), {}
        self.inside = threading.local()

    def install(self):
        for name in HYPERVISOR_CALLS:
            real = self.real[name] = getattr(QEMUDriver, name)

            @functools.wraps(real)
            def timed(*args, _real=real, _name=name, **kwargs):
                if getattr(self.inside, "call", None):  # within another: counted there
                    return _real(*args, **kwargs)
                start, self.inside.call = time.monotonic(), _name
                try:
                    return _real(*args, **kwargs)
                finally:
                    self.inside.call = None
                    with self.lock:
                        self.intervals.append((start, time.monotonic(), _name))
            setattr(QEMUDriver, name, timed)

    def uninstall(self):
        for name, real in self.real.items():
            setattr(QEMUDriver, name, real)

    def within(self, t0, t1):
        """-> (seconds in [t0, t1] covered by at least one call, {call: seconds})."""
        with self.lock:
            spans = sorted((max(a, t0), min(b, t1), name) for a, b, name in self.intervals
                           if b > t0 and a < t1)
        total, end, calls = 0.0, t0, {}
        for a, b, name in spans:
            calls[name] = calls.get(name, 0.0) + b - a
            if b > end:
                total += b - max(a, end)
                end = b
        return total, calls


class Move:
    """The timed steps of one move: ``step(...)`` each request, waited for."""

    def __init__(self, cloud, clock, sid):
        self.cloud, self.clock, self.sid = cloud, clock, sid
        self.total = self.hypervisor = 0.0
        self.calls = {}

    def step(self, body, version="2.79", expect=None):
        t0 = time.monotonic()
        code, out = self.cloud.api("POST", f"/servers/{self.sid}/action", body,
                                   version=version)
        assert code in (200, 202, 204), out
        self.cloud.aio.wait_idle(600)
        t1 = time.monotonic()
        self.total += t1 - t0
        hypervisor, calls = self.clock.within(t0, t1)
        self.hypervisor += hypervisor
        for name, seconds in calls.items():
            self.calls[name] = self.calls.get(name, 0.0) + seconds
        server = self.cloud.server(self.sid)
        if expect is not None:
            assert server["status"] == expect, (body, server["status"], server.get("fault"))
        return server

    def result(self, **extra):
        return {"total_s": self.total, "hypervisor_s": self.hypervisor,
                "calls": self.calls, **extra}


def service(cloud, host):
    code, body = cloud.api("GET", f"/os-services?host={host}&binary=nova-compute",
                           version="2.53")
    (svc,) = body["services"]
    return svc["id"]


def set_service(cloud, host, **change):
    code, body = cloud.api("PUT", f"/os-services/{service(cloud, host)}", change,
                           version="2.53")
    assert code == 200, body


def wait_power_button(probe, timeout=120):
    """Wait until the booted guest listens to its ACPI power button: pressed before
    (a move's clean power-off), the press is lost and the host waits its whole
    timeout (60 s) before pulling the plug."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            _, ps = probe.run("ps", timeout=10)
            if any("head" in line and "novella-powerbutton" in line
                   for line in ps.splitlines()):
                return
        except (OSError, ProbeError):
            pass
        assert time.monotonic() < deadline, "the guest never listened to its power button"
        time.sleep(0.5)


def other_host(cloud, sid):
    host = cloud.host_of(sid)
    cell = host.split("-")[0]
    return next(h for h in sorted(cloud.aio.computes) if h != host and h.startswith(cell))


def make_flavor(cloud, name, disk):
    code, body = cloud.api("POST", "/flavors", {"flavor": {
        "name": name, "ram": 256, "vcpus": 1, "disk": disk}})
    assert code == 200, body
    return body["flavor"]["id"]


def run_moves(cloud, clock, flavors, n):
    """One server through every move; -> {move: figures}."""
    code, body = cloud.api("POST", "/servers", {"server": {
        "name": f"bench-{n}", "flavorRef": "1", "imageRef": cloud.aio.demo_image["id"],
        "networks": "none", "host": SOURCE}}, version="2.74")
    assert code == 202, body
    cloud.aio.wait_idle(600)
    sid = body["server"]["id"]
    boots = set()
    out = {}

    def booted():
        boots.add(cloud.wait_boot(sid, seen=boots))
        wait_power_button(cloud.probe(sid))

    booted()

    # Cold migration + confirm.
    dest = other_host(cloud, sid)
    move = Move(cloud, clock, sid)
    server = move.step({"migrate": {"host": dest}}, version="2.56", expect="VERIFY_RESIZE")
    assert server["OS-EXT-SRV-ATTR:host"] == dest
    move.step({"confirmResize": None}, expect="ACTIVE")
    out["cold migration"] = move.result()
    booted()

    # Resize + confirm.
    dest = other_host(cloud, sid)
    move = Move(cloud, clock, sid)
    server = move.step({"resize": {"flavorRef": flavors["2g"]}}, expect="VERIFY_RESIZE")
    assert server["OS-EXT-SRV-ATTR:host"] == dest
    move.step({"confirmResize": None}, expect="ACTIVE")
    out["resize"] = move.result()
    booted()

    # Live migration, the guest's counter watched on both hosts.
    source, dest = cloud.host_of(sid), other_host(cloud, sid)
    guests = [cloud.aio.computes[h].driver.guest({"uuid": sid}) for h in (source, dest)]
    watch = CounterWatch(lambda: [g.console_log for g in guests])
    move = Move(cloud, clock, sid)
    server = move.step(LIVE, expect="ACTIVE")
    downtime, seen = watch.result()
    assert server["OS-EXT-SRV-ATTR:host"] == dest and seen <= boots, (server, seen, boots)
    out["live migration"] = move.result(guest_downtime_s=downtime)

    # Evacuation from a host whose compute service is forced down.
    source, dest = cloud.host_of(sid), other_host(cloud, sid)
    set_service(cloud, source, forced_down=True)
    move = Move(cloud, clock, sid)
    server = move.step({"evacuate": {}}, expect="ACTIVE")
    assert server["OS-EXT-SRV-ATTR:host"] == dest
    out["evacuation"] = move.result()
    cloud.aio.computes[source].init_host()  # back: it destroys its stale copy
    set_service(cloud, source, forced_down=False)
    booted()

    # Shelve (offloaded at once) + unshelve on the other host of its cell.
    dest = other_host(cloud, sid)
    move = Move(cloud, clock, sid)
    move.step({"shelve": None}, expect="SHELVED_OFFLOADED")
    server = move.step({"unshelve": {"host": dest}}, version="2.91", expect="ACTIVE")
    assert server["OS-EXT-SRV-ATTR:host"] == dest
    out["shelve + unshelve"] = move.result()
    booted()

    # Cross-cell resize + confirm: the other host of its cell disabled for it.
    source, same_cell = cloud.host_of(sid), other_host(cloud, sid)
    set_service(cloud, same_cell, status="disabled")
    try:
        move = Move(cloud, clock, sid)
        server = move.step({"resize": {"flavorRef": flavors["3g"]}}, expect="VERIFY_RESIZE")
        assert not server["OS-EXT-SRV-ATTR:host"].startswith(source.split("-")[0]), server
        move.step({"confirmResize": None}, expect="ACTIVE")
        out["cross-cell resize"] = move.result()
    finally:
        set_service(cloud, same_cell, status="enabled")

    code, body = cloud.api("DELETE", f"/servers/{sid}")
    assert code == 204, body
    cloud.aio.wait_idle(600)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    logging.basicConfig(level=logging.ERROR)
    work = tempfile.mkdtemp(prefix="novella-bench-moves-")
    image = guest_image.build(os.path.join(work, "guest-image"))
    cloud = start_cloud(work, os.path.dirname(image.root), cells=2)
    cloud.allow_cross_cell()
    clock = DriverClock()
    clock.install()
    runs = []
    started = time.monotonic()
    try:
        flavors = {"2g": make_flavor(cloud, "m1.tiny.2g", 2),
                   "3g": make_flavor(cloud, "m1.tiny.3g", 3)}
        for n in range(args.runs):
            runs.append(run_moves(cloud, clock, flavors, n))
    finally:
        clock.uninstall()
        stop_cloud(cloud, work)

    def med(move, key):
        return statistics.median(r[move][key] for r in runs)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"# Every move of a real guest (256 MiB, 1 vcpu, TCG, disks copied), median of "
          f"{args.runs} runs, {os.cpu_count()} cores, load average {load}, "
          f"{time.monotonic() - started:.0f} s in all")
    print("| move | whole move | hypervisor | control plane | control plane share | "
          "downtime, guest's counter | hypervisor's calls (median s) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for move in MOVES:
        total, hyp = med(move, "total_s"), med(move, "hypervisor_s")
        down = (f"{med(move, 'guest_downtime_s') * 1000:.0f} ms"
                if "guest_downtime_s" in runs[0][move] else "-")
        names = sorted({name for r in runs for name in r[move]["calls"]},
                       key=HYPERVISOR_CALLS.index)
        calls = ", ".join(
            f"{name} {statistics.median(r[move]['calls'].get(name, 0.0) for r in runs):.2f}"
            for name in names)
        print(f"| {move} | {total:.2f} s | {hyp:.2f} s | {total - hyp:.2f} s | "
              f"{(total - hyp) / total:.0%} | {down} | {calls} |")

if __name__ == "__main__":
    main()
