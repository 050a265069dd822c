"""One scheduler thread runs the periodic work of every simulated host."""
import threading
import time

from novella.service import Periodic, PeriodicScheduler


def _wait(predicate, timeout=20.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def test_many_tasks_share_a_few_threads_and_all_run():
    sched = PeriodicScheduler(workers=2, name="t-sched")
    counts = {}
    lock = threading.Lock()
    before = threading.active_count()

    def make(i):
        def fn():
            with lock:
                counts[i] = counts.get(i, 0) + 1
        return fn

    tasks = [sched.add(make(i), 0.3, f"heartbeat-host{i}") for i in range(300)]
    assert len(sched) == 300
    assert _wait(lambda: len(counts) == 300 and min(counts.values()) >= 2)
    assert threading.active_count() - before <= 3  # one timer thread, two workers
    for t in tasks:
        t.cancel()
    time.sleep(0.5)
    frozen = dict(counts)
    time.sleep(0.7)
    assert counts == frozen
    assert len(sched) == 0


def test_first_runs_are_spread_over_the_interval():
    sched = PeriodicScheduler(workers=1, name="t-spread")
    first = {}
    start = time.monotonic()

    def make(i):
        def fn():
            first.setdefault(i, time.monotonic() - start)
        return fn

    tasks = [sched.add(make(i), 2.0, f"report-host{i}") for i in range(40)]
    assert _wait(lambda: len(first) == 40)
    for t in tasks:
        t.cancel()
    times = sorted(first.values())
    # Not all at once: the runs cover most of the interval.
    assert times[-1] - times[0] > 1.0
    assert sum(1 for x in times if x < 1.0) not in (0, 40)


def test_a_slow_task_never_overlaps_itself_and_errors_do_not_stop_it():
    sched = PeriodicScheduler(workers=4, name="t-slow")
    running, overlaps, runs = [0], [], []

    def slow():
        running[0] += 1
        if running[0] > 1:
            overlaps.append(True)
        time.sleep(0.15)
        running[0] -= 1
        runs.append(1)
        raise RuntimeError("boom")

    task = sched.add(slow, 0.05, "slow")
    assert _wait(lambda: len(runs) >= 4)
    task.cancel()
    assert not overlaps


def test_periodic_wrapper_uses_the_shared_scheduler():
    sched = PeriodicScheduler(workers=1, name="t-wrap")
    hits = []
    p = Periodic(lambda: hits.append(1), 0.1, "wrapped", scheduler=sched).start()
    idle = Periodic(lambda: hits.append(2), 0, "disabled", scheduler=sched).start()
    assert _wait(lambda: len(hits) >= 2)
    p.stop()
    idle.stop()
    assert 2 not in hits
