"""Time operations in the reference's own functional harness.

Run with the interpreter of the scratch virtualenv that holds nova 34 and its
test dependencies (bench/common.py creates it and runs this script); never
with Novella's interpreter. Nova's fixtures (in-process API, placement,
conductor, scheduler, fake virt driver) are imported and driven; the harness
waits for states by polling the API, as its tests do.

    /work/refnova/bin/python -W ignore bench/reference_nova.py \\
        --ops boot,delete,resize,migrate,live_migrate,evacuate,shelve_unshelve,cross_cell_resize --repeat 3

Prints one JSON document: for each operation the wall-clock samples and their
median, and the process CPU time of each sample (the harness runs every
service in this one process; its CPU time includes the polling requests), in
seconds; plus the setup time of each harness and the peak RSS.
"""
import argparse
import json
import logging
import os
import resource
import statistics
import sys
import time
import types
import unittest
import warnings

ALL_OPS = ("boot", "delete", "resize", "migrate", "live_migrate", "evacuate", "shelve_unshelve",
           "cross_cell_resize")


def _quiet():
    warnings.simplefilter("ignore")
    logging.disable(logging.CRITICAL)


def _set_poll_interval(module, interval):
    """Make the harness's state-polling sleep ``interval`` instead of its own.

    The helpers poll GET /servers/{id} with a fixed sleep between attempts;
    a shorter one measures the operation rather than the polling period.
    The number of attempts is raised accordingly (see ScaledWaits), so the
    longest wait stays the same.
    """
    real = module.time

    class _Time(types.ModuleType):
        def __getattr__(self, name):
            return getattr(real, name)

        @staticmethod
        def sleep(seconds):
            real.sleep(min(seconds, interval))

    module.time = _Time("time")


def build_cases(ops, repeat, results, setup_times, poll, deadline=None):
    from nova.tests.functional import integrated_helpers
    from nova.tests.functional import test_cross_cell_migrate

    # The harness waits at most max_retries polls of 0.5 s; keep that bound
    # in seconds when the polls are shorter.
    scale = max(1, int(round(0.5 / poll))) if poll else 1

    def reps():
        """Up to ``repeat`` repetitions; fewer (at least one) past the deadline."""
        for i in range(repeat):
            if i and deadline is not None and time.monotonic() > deadline:
                return
            yield i

    def record(op, seconds, cpu=None):
        results.setdefault(op, []).append(seconds)
        if cpu is not None:
            results.setdefault(op + ":cpu", []).append(cpu)

    class Clock:
        """Wall and process CPU time of one operation."""

        def __enter__(self):
            self.t0, self.c0 = time.perf_counter(), time.process_time()
            return self

        def __exit__(self, *exc):
            self.wall = time.perf_counter() - self.t0
            self.cpu = time.process_time() - self.c0

    class ScaledWaits:
        def _wait_for_server_parameter(self, server, expected_params, max_retries=10, *a, **kw):
            return super()._wait_for_server_parameter(
                server, expected_params, max_retries * scale, *a, **kw)

    class IntraCell(ScaledWaits, integrated_helpers.ProviderUsageBaseTestCase):
        """One cell, two hosts with the fake driver; boot, delete, resize, migrate."""

        compute_driver = "fake.MediumFakeDriver"

        def setUp(self):
            t0 = time.perf_counter()
            super().setUp()
            self._start_compute("host1")
            self._start_compute("host2")
            self.flavors = self.api.get_flavors()
            setup_times.setdefault("intra_cell", []).append(time.perf_counter() - t0)

        def _boot(self):
            return self._create_server(flavor_id=self.flavors[0]["id"], networks="none")

        def bench_boot_delete(self):
            for _ in reps():
                with Clock() as c:
                    server = self._boot()
                record("boot", c.wall, c.cpu)
                with Clock() as c:
                    self._delete_server(server)
                record("delete", c.wall, c.cpu)

        def bench_resize(self):
            for _ in reps():
                server = self._boot()
                with Clock() as c:
                    server = self._resize_server(server, self.flavors[1]["id"])
                    self._confirm_resize(server)
                record("resize", c.wall, c.cpu)
                self._delete_server(server)

        def bench_migrate(self):
            for _ in reps():
                server = self._boot()
                with Clock() as c:
                    server = self._migrate_server(server)
                    self._confirm_resize(server)
                record("migrate", c.wall, c.cpu)
                self._delete_server(server)

        def bench_live_migrate(self):
            for _ in reps():
                server = self._boot()
                source = server["OS-EXT-SRV-ATTR:host"]
                with Clock() as c:
                    server = self._live_migrate(server)
                record("live_migrate", c.wall, c.cpu)
                if server["OS-EXT-SRV-ATTR:host"] == source:
                    raise AssertionError("the live migration did not leave the source host")
                self._delete_server(server)

        def bench_evacuate(self):
            for _ in reps():
                server = self._boot()
                source = server["OS-EXT-SRV-ATTR:host"]
                service = self.api.get_services(host=source, binary="nova-compute")[0]["id"]
                self.computes[source].stop()
                self.api.put_service(service, {"forced_down": True})
                with Clock() as c:
                    # (the harness's latest microversion evacuates to SHUTOFF)
                    server = self._evacuate_server(server, expected_state="SHUTOFF")
                record("evacuate", c.wall, c.cpu)
                if server["OS-EXT-SRV-ATTR:host"] == source:
                    raise AssertionError("the evacuation did not leave the source host")
                # The host comes back (cleaning up the evacuated server), then is forced up.
                self.computes[source] = self.restart_compute_service(self.computes[source])
                self.api.put_service(service, {"forced_down": False})
                self._delete_server(server)

        def bench_shelve_unshelve(self):
            for _ in reps():
                server = self._boot()
                with Clock() as c:
                    server = self._shelve_server(server)     # offloaded at once
                    server = self._unshelve_server(server)
                record("shelve_unshelve", c.wall, c.cpu)
                self._delete_server(server)

    class CrossCell(ScaledWaits, test_cross_cell_migrate.TestMultiCellMigrate):
        """Two cells, one host each, cross-cell resize allowed for admins."""

        def setUp(self):
            t0 = time.perf_counter()
            super().setUp()
            self.flavors = self.api.get_flavors()
            setup_times.setdefault("cross_cell", []).append(time.perf_counter() - t0)

        def bench_cross_cell_resize(self):
            for _ in reps():
                server = self._create_server(self.flavors[0], no_networking=True)
                source = server["OS-EXT-SRV-ATTR:host"]
                with Clock() as c:
                    self.api.post_server_action(
                        server["id"], {"resize": {"flavorRef": self.flavors[1]["id"]}})
                    server = self._wait_for_state_change(server, "VERIFY_RESIZE")
                    server = self._confirm_resize(server, cross_cell=True)
                record("cross_cell_resize", c.wall, c.cpu)
                if server["OS-EXT-SRV-ATTR:host"] == source:
                    raise AssertionError("the resize did not leave the source cell")
                self._delete_server(server)

    cases = []
    if {"boot", "delete"} & set(ops):
        cases.append(IntraCell("bench_boot_delete"))
    if "resize" in ops:
        cases.append(IntraCell("bench_resize"))
    if "migrate" in ops:
        cases.append(IntraCell("bench_migrate"))
    if "live_migrate" in ops:
        cases.append(IntraCell("bench_live_migrate"))
    if "evacuate" in ops:
        cases.append(IntraCell("bench_evacuate"))
    if "shelve_unshelve" in ops:
        cases.append(IntraCell("bench_shelve_unshelve"))
    if "cross_cell_resize" in ops:
        cases.append(CrossCell("bench_cross_cell_resize"))
    return cases, integrated_helpers


def main(argv=None):
    ap = argparse.ArgumentParser(description="Time operations in nova's functional harness.")
    ap.add_argument("--ops", default=",".join(ALL_OPS),
                    help="comma-separated subset of " + ",".join(ALL_OPS))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--poll", type=float, default=0.05,
                    help="polling interval of the harness's state waits, seconds "
                         "(the harness's own is 0.5; 0 keeps it)")
    ap.add_argument("--max-seconds", type=float, default=150,
                    help="stop repeating an operation (keeping at least one sample) "
                         "once the run has lasted this long; 0 for no bound")
    args = ap.parse_args(argv)
    ops = [o.strip() for o in args.ops.split(",") if o.strip()]
    unknown = set(ops) - set(ALL_OPS)
    if unknown:
        ap.error(f"unknown operations: {', '.join(sorted(unknown))}")
    repeat = max(1, min(args.repeat, 20))

    _quiet()
    import nova
    from importlib import metadata

    results, setup_times, failures = {}, {}, []
    started = time.perf_counter()
    deadline = time.monotonic() + args.max_seconds if args.max_seconds else None
    cases, helpers = build_cases(ops, repeat, results, setup_times, args.poll, deadline)
    if args.poll:
        _set_poll_interval(helpers, args.poll)
    # The harness logs copiously; keep stdout for the JSON document.
    real_stdout = sys.stdout
    sys.stdout = sys.stderr
    try:
        for case in cases:
            result = unittest.TestResult()
            case.run(result)
            for test, tb in result.errors + result.failures:
                failures.append({"case": test.id(), "traceback": tb[-4000:]})
    finally:
        sys.stdout = real_stdout

    doc = {
        "implementation": "nova functional harness",
        "nova_version": metadata.version("nova"),
        "nova_path": os.path.dirname(nova.__file__),
        "python": sys.version.split()[0],
        "repeat": repeat,
        "poll_interval_s": args.poll or 0.5,
        "setup_s": {k: statistics.median(v) for k, v in setup_times.items()},
        "total_s": time.perf_counter() - started,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        "failures": failures,
    }
    for op in ops:
        samples = results.get(op, [])
        cpu = results.get(op + ":cpu", [])
        doc[op] = {"samples": samples, "median": statistics.median(samples) if samples else None,
                   "cpu_samples": cpu, "cpu_median": statistics.median(cpu) if cpu else None}
    json.dump(doc, sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")
    return 1 if failures and not any(results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
