"""The all-in-one process dies while a host runs its step of a move; started again on
the same data, it leaves exact books.

A kill of `novella up` stops the conductor and the host's compute service
together: the host's thread stops before one of its effects (as in
test_compute_crash_recovery.py) and the conductor waiting for that host's
answer never runs another statement either (no retry on an alternate, no
undo). The process then starts again as `novella up` does: the compute
service first (``init_host``), then a fresh conductor that takes over what
the dead one left (``recover_operations(previous_owners=True)``); and as
separate services may, the conductor first while the host is still down.

The server is volume-backed, so its books are: the server's state and host,
Placement allocations by consumer (server and migration) and every
provider's usage, its ports' bindings, its volume's attachments (host and
status), the guest files on each host and the migration's status. They must
be those of a clean run or those before the request (the migration in
error); an unshelve may also end on the other host. Deleting the server then
leaves every provider at zero, no binding, no attachment and no guest.
"""
import threading

import pytest

from novella import rpc
from novella.conductor.manager import ConductorManager
from novella.conf import CONF
from novella.context import get_admin_context
from tests.functional.moves import test_compute_crash_recovery as host_death
from tests.functional.moves import test_crash_recovery as harness


def _evacuate(cloud, sid):
    return cloud.action(sid, {"evacuate": {}}, version="2.79")


# move: (what brings the server to where it starts, the request)
MOVES = {
    "evacuate": (lambda cloud, sid: harness._host_down(cloud, None, sid), _evacuate),
    "unshelve": (lambda cloud, sid: cloud.action(sid, {"shelve": None}),
                 lambda cloud, sid: cloud.action(sid, {"unshelve": None})),
}


class ProcessDeath:
    """The conductor's thread waiting for a host that died dies too."""

    def __init__(self, monkeypatch, transport):
        self.armed = False
        self.dead = threading.Event()
        call = transport.call

        def waiting(*args, **kwargs):
            try:
                return call(*args, **kwargs)
            except rpc.Timeout:
                if not self.armed:
                    raise
                self.dead.set()
                threading.Event().wait()  # this thread never runs another statement
        monkeypatch.setattr(transport, "call", waiting)


def _books(cloud, sid, source):
    books = harness.books(cloud, sid, source)
    books["attachments"] = sorted(
        (None if a["attached_host"] is None else
         "source" if a["attached_host"] == source else "other", a["status"])
        for a in cloud.aio.volume_api.attachment_list(get_admin_context(), instance_uuid=sid))
    return books


def _move(cloud, death, process, crash, move, at):
    death.arm(-1)
    crash.arm(None, None)
    process.armed, _ = False, process.dead.clear()
    prepare, request = MOVES[move]
    sid, _volume = cloud.boot_from_volume()
    source = cloud.host_of(sid)
    prepare(cloud, sid)
    cloud.aio.wait_idle()
    before = _books(cloud, sid, source)
    death.arm(at)
    process.armed = at is not None
    crash.arm(sid, ("never", None))  # the conductor works in a thread that may die
    status, body = request(cloud, sid)
    assert status in (200, 202, 204), body
    cloud.aio.wait_idle()
    for thread in crash.threads:
        while thread.is_alive() and not process.dead.is_set():
            thread.join(0.02)
    cloud.aio.wait_idle()
    return sid, source, before


def _delete_and_check_empty(cloud, death, sid, source, where):
    host_death._delete_and_check_empty(cloud, death, sid, where)
    ctxt = get_admin_context()
    network = cloud.aio.network_api
    assert [b for port in network.list_ports(ctxt, device_id=sid)
            for b in network.list_port_bindings(ctxt, port["id"])] == [], where
    assert cloud.aio.volume_api.attachment_list(ctxt, instance_uuid=sid) == [], where


@pytest.mark.parametrize("host_first", [True, False], ids=["all-in-one", "conductor-first"])
@pytest.mark.parametrize("move", sorted(MOVES))
def test_the_process_dying_inside_a_hosts_step_leaves_exact_books_when_it_starts(
        cloud, monkeypatch, move, host_first):
    """``host_first``: as `novella up` starts; else as separate services may, the
    conductor taking the operation over while the host is still down."""
    death = host_death.arm_host_deaths(cloud, monkeypatch)
    crash = harness.arm_crashes(cloud, monkeypatch)
    process = ProcessDeath(monkeypatch, type(next(iter(cloud.aio.computes.values())).transport))

    sid, source, clean_before = _move(cloud, death, process, crash, move, None)
    finished = _books(cloud, sid, source)
    effects = list(death.effects)
    assert finished["task_state"] is None and len(effects) >= 2, (finished, effects)
    _delete_and_check_empty(cloud, death, sid, source, move)

    for at in range(1, len(effects) + 1):
        sid, source, before = _move(cloud, death, process, crash, move, at)
        where = (move, at, effects[at - 1])
        assert death.reached.is_set() and process.dead.is_set(), where
        # Started again: the host's compute service and a fresh conductor (an
        # evacuation's source stays down).
        process.armed = False
        host = death.dead
        death.arm(-1)
        death.dead = host  # it answers nothing until it starts
        if host_first:
            host_death._restart(cloud, death, host)
        fresh = ConductorManager(CONF, cloud.aio.api_db, cloud.aio.placement,
                                 network_api=cloud.aio.network_api,
                                 volume_api=cloud.aio.volume_api, image_api=cloud.aio.image_api)
        fresh.recover_operations(previous_owners=True)
        cloud.aio.wait_idle()
        if not host_first:
            host_death._restart(cloud, death, host)
            cloud.aio.wait_idle()
        after = _books(cloud, sid, source)
        ends = [finished, dict(before, migration="error") if move == "evacuate" else before]
        if move == "unshelve":  # it may run on either host
            ends.append(host_death._swapped(finished))
        assert after in ends, (where, [{k: (v, end.get(k)) for k, v in after.items()
                                        if end.get(k) != v} for end in ends])
        _delete_and_check_empty(cloud, death, sid, source, where)
