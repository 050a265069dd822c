"""A guest's power state as its hypervisor reports it (``ComputeDriver.get_info``),
numbered as the reference numbers it; the server's ``power_state`` column keeps it."""


class power_state:  # noqa: N801 - a namespace, spelled as in the reference
    NOSTATE = 0
    RUNNING = 1
    PAUSED = 3
    SHUTDOWN = 4
    CRASHED = 6
    SUSPENDED = 7
    NAMES = {0: "NOSTATE", 1: "RUNNING", 3: "PAUSED", 4: "SHUTDOWN", 6: "CRASHED", 7: "SUSPENDED"}
