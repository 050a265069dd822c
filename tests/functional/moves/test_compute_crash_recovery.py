"""A compute service dies before any one of its effects; started again, it finishes.

The operations a host runs itself — delete, shelve (with its offload), stop,
start, reboot, and its part of a build — are run once cleanly to learn
every effect they have: each call to the hypervisor, to Placement, to the
network, volume and image services, and each write to the cell database.
Then, for each effect, a new server makes the same request and the host's
service dies just before that effect as a process death stops it (its
thread never runs another statement). A fresh compute service on the same
databases and disks starts (``init_host``), and the books must be those of
the finished operation: the server's state, Placement allocations and every
provider's usage, the guest files on the host, the ports' bindings. Deleting
the server then leaves every provider at zero and no guest on any host.
"""
import os
import threading

import pytest

from novella import rpc
from novella.compute.manager import ComputeManager
from novella.conf import CONF
from novella.db import engine
from novella.db import host_operations
from novella.db import records
from novella.placement import client as placement_client
from tests.functional.moves import test_crash_recovery as harness

COMPUTE_METHODS = ("build_and_run_instance", "terminate_instance", "shelve_instance",
                   "stop_instance", "start_instance", "reboot_instance",
                   # a move's steps on its hosts
                   "prep_resize", "resize_instance", "finish_resize", "confirm_resize",
                   "revert_resize", "finish_revert_resize",
                   "prepare_live_migration_at_destination", "live_migration",
                   "post_live_migration_at_destination", "post_live_migration_at_source",
                   "rollback_live_migration_at_destination", "rebuild_instance",
                   "abandon_rebuild",
                   "unshelve_instance",
                   # the guest actions
                   "pause_instance", "unpause_instance", "suspend_instance",
                   "resume_instance", "rescue_instance", "unrescue_instance",
                   "rebuild_in_place", "snapshot_instance", "backup_instance",
                   "set_admin_password", "soft_delete_instance", "restore_instance",
                   # ports attached and detached (test_interface_crash.py)
                   "attach_interface", "detach_interface",
                   # across cells
                   "prep_snapshot_based_resize_at_dest", "prep_snapshot_based_resize_at_source",
                   "finish_snapshot_based_resize_at_dest",
                   "confirm_snapshot_based_resize_at_source",
                   "revert_snapshot_based_resize_at_dest",
                   "finish_revert_snapshot_based_resize_at_source")


class HostDeath:
    """The thread running a host's part of the operation dies before the operation's
    ``at``-th effect (None: a clean run, counting them); that host then answers
    nothing until a fresh service starts for it."""

    def __init__(self):
        self.reached = threading.Event()
        self.host = None
        self.arm(None)

    def arm(self, at):
        self.at, self.count, self.effects, self.thread, self.depth = at, 0, [], None, 0
        self.dead = self.dead_thread = None
        self.reached.clear()

    def effect(self, name, real):
        """``real``, counted as an effect when the dying thread calls it (not from
        within another effect)."""
        def call(*args, **kwargs):
            mine = threading.current_thread() is self.thread and (
                name not in ("session", "connection") or kwargs.get("write"))
            if not mine:
                return real(*args, **kwargs)
            self.depth += 1
            try:
                if self.depth == 1:
                    self.count += 1
                    if self.at is None:
                        self.effects.append(name)
                    elif self.count == self.at:
                        self.dead, self.dead_thread = self.host, self.thread
                        self.reached.set()
                        threading.Event().wait()  # this thread never runs another statement
                return real(*args, **kwargs)
            finally:
                self.depth -= 1
        return call

    def wrap(self, compute):
        for name in COMPUTE_METHODS:
            setattr(compute, name, self.detached(getattr(compute, name)))

    def detached(self, method):
        """The host's entry point in a thread of its own, which may die: its caller
        then gets no answer; else the method's result or exception."""
        def run(*args, **kwargs):
            host = method.__self__.host
            if self.dead == host:
                raise StoppedAnswering(f"{host} is down")
            outcome = {}

            def target():
                try:
                    outcome["result"] = method(*args, **kwargs)
                except BaseException as exc:  # noqa: BLE001 - handed to the caller
                    outcome["error"] = exc
            thread = threading.Thread(target=target, daemon=True)
            self.thread, self.host = thread, host
            thread.start()
            while thread.is_alive() and self.dead_thread is not thread:
                thread.join(0.02)
            if self.dead_thread is thread:
                raise StoppedAnswering(f"{host} stopped answering")
            if "error" in outcome:
                raise outcome["error"]
            return outcome.get("result")
        return run

    @staticmethod
    def unanswered(call):
        """A caller waiting for a dead host's answer gets none: rpc.Timeout."""
        def wait(*args, **kwargs):
            try:
                return call(*args, **kwargs)
            except rpc.RemoteError as exc:
                if exc.exc_type == StoppedAnswering.__name__:
                    raise rpc.Timeout(exc.message) from None
                raise
        return wait


class StoppedAnswering(Exception):
    """How the harness's dead host thread tells the transport it never answered."""


def _public(cls):
    return [name for name, value in vars(cls).items()
            if callable(value) and not name.startswith("_")]


@pytest.fixture
def death(cloud, monkeypatch):
    return arm_host_deaths(cloud, monkeypatch)


def arm_host_deaths(cloud, monkeypatch):
    """The cloud's compute services may die before any effect (see HostDeath)."""
    death = HostDeath()
    aio = cloud.aio
    some = next(iter(aio.computes.values()))
    for service in (type(some.driver), placement_client.PlacementClient,
                    type(aio.network_api), type(aio.volume_api), type(aio.image_api)):
        for name in _public(service):
            monkeypatch.setattr(service, name, death.effect(name, getattr(service, name)))
    for name in ("session", "connection"):
        monkeypatch.setattr(engine.Database, name, death.effect(name, getattr(engine.Database,
                                                                              name)))
    for name in ("update_instance", "set_system_metadata", "add_fault"):
        monkeypatch.setattr(records, name, death.effect(name, getattr(records, name)))
    # The host's journal of its operations replaced their system-metadata notes: its
    # writes are counted under the notes' name.
    for name in ("begin", "step", "end"):
        monkeypatch.setattr(host_operations, name, death.effect(
            "set_system_metadata", getattr(host_operations, name)))
    for compute in aio.computes.values():
        death.wrap(compute)
    transport = type(some.transport)
    monkeypatch.setattr(transport, "call", death.unanswered(transport.call))
    return death


def _restart(cloud, death, host):
    """A fresh compute service for ``host`` on the same databases and disks (which
    may die too)."""
    old = cloud.aio.computes[host]
    old.transport.unserve("compute", host)
    fresh = ComputeManager(CONF, host, old.cell_db, old.placement, type(old.driver)(host, CONF),
                           network_api=old.network_api, volume_api=old.volume_api,
                           image_api=old.image_api, notifier=old.notifier,
                           transport=old.transport)
    fresh.init_host()
    death.wrap(fresh)
    death.dead = None  # it answers again
    old.transport.serve("compute", host, fresh)
    cloud.aio.computes[host] = fresh


def _guest_hosts(cloud, sid):
    root = next(iter(cloud.aio.computes.values())).driver.root
    return {host for host in cloud.aio.computes if os.path.exists(os.path.join(root, host, sid))}


def books(cloud, sid):
    status, body = cloud.api("GET", f"/servers/{sid}")
    if status == 404:
        server = {"status": "DELETED", "OS-EXT-STS:task_state": None,
                  "OS-EXT-SRV-ATTR:host": None}
    else:
        server = body["server"]
    held = {rp: a["resources"] for rp, a in cloud.allocations(sid).items()}
    return {"status": server["status"], "task_state": server["OS-EXT-STS:task_state"],
            "host": server["OS-EXT-SRV-ATTR:host"], "allocations": held,
            "usages": {h: u for h, u in cloud.usages().items() if any(u.values())},
            "guests": _guest_hosts(cloud, sid)}


def _boot(cloud):
    status, body = cloud.api("POST", "/servers", {"server": {
        "name": "vm", "flavorRef": "1", "imageRef": cloud.aio.demo_image["id"],
        "networks": "auto"}})
    assert status == 202, body
    return body["server"]["id"]


def _stable_rescue(cloud, sid):
    """A rescue from an image asking for a stable device rescue (one image per cloud)."""
    image_id = getattr(cloud, "stable_rescue_image", None)
    if image_id is None:
        api = cloud.aio.image_api
        image_id = api.create(None, name="rescue", visibility="public", disk_format="qcow2",
                              container_format="bare", properties={
                                  "hw_rescue_device": "disk", "hw_rescue_bus": "virtio"})["id"]
        api.upload(None, image_id, b"rescue\n")
        cloud.stable_rescue_image = image_id
    return cloud.action(sid, {"rescue": {"rescue_image_ref": image_id}}, version="2.87")


# operation: (what brings the server to where it starts, the request)
OPERATIONS = {
    "build": (None, None),
    "delete": (None, lambda cloud, sid: cloud.api("DELETE", f"/servers/{sid}")),
    "shelve": (None, lambda cloud, sid: cloud.action(sid, {"shelve": None})),
    "stop": (None, lambda cloud, sid: cloud.action(sid, {"os-stop": None})),
    "start": (lambda cloud, sid: cloud.action(sid, {"os-stop": None}),
              lambda cloud, sid: cloud.action(sid, {"os-start": None})),
    "reboot": (None, lambda cloud, sid: cloud.action(sid, {"reboot": {"type": "HARD"}})),
    "pause": (None, lambda cloud, sid: cloud.action(sid, {"pause": None})),
    "unpause": (lambda cloud, sid: cloud.action(sid, {"pause": None}),
                lambda cloud, sid: cloud.action(sid, {"unpause": None})),
    "suspend": (None, lambda cloud, sid: cloud.action(sid, {"suspend": None})),
    "resume": (lambda cloud, sid: cloud.action(sid, {"suspend": None}),
               lambda cloud, sid: cloud.action(sid, {"resume": None})),
    "rescue": (None, lambda cloud, sid: cloud.action(sid, {"rescue": None})),
    "stable-rescue": (None, _stable_rescue),
    "unrescue": (lambda cloud, sid: cloud.action(sid, {"rescue": None}),
                 lambda cloud, sid: cloud.action(sid, {"unrescue": None})),
    "rebuild": (None, lambda cloud, sid: cloud.action(sid, {"rebuild": {
        "imageRef": cloud.aio.demo_image["id"], "name": "rebuilt"}})),
    "createImage": (None, lambda cloud, sid: cloud.action(sid, {"createImage": {
        "name": "snap"}})),
    "createBackup": (None, lambda cloud, sid: cloud.action(sid, {"createBackup": {
        "name": "backup", "backup_type": "daily", "rotation": 1}})),
    # A host that does not answer: the caller gets 409, the password is not changed.
    "changePassword": (None, lambda cloud, sid: cloud.action(sid, {"changePassword": {
        "adminPass": "pw"}})),
    # With [DEFAULT] reclaim_instance_interval (SOFT_DELETING_OPERATIONS).
    "soft-delete": (None, lambda cloud, sid: cloud.api("DELETE", f"/servers/{sid}")),
    "restore": (lambda cloud, sid: cloud.api("DELETE", f"/servers/{sid}"),
                lambda cloud, sid: cloud.action(sid, {"restore": None})),
}
SOFT_DELETING_OPERATIONS = ("soft-delete", "restore")
IMAGE_OPERATIONS = ("createImage", "createBackup")


def _images(cloud, sid):
    """The statuses of the images made of the server (deleted ones left out)."""
    return sorted(i["status"] for i in cloud.aio.image_api.list(None, {"instance_uuid": sid}))


def _run(cloud, death, operation, at):
    """A server brought to where ``operation`` starts, then the request, its host
    dying before effect ``at``; returns the server."""
    prepare, request = OPERATIONS[operation]
    death.arm(None if operation == "build" else -1)
    if operation == "build":
        death.arm(at)
        sid = _boot(cloud)
    else:
        sid = _boot(cloud)
        cloud.aio.wait_idle()
        if prepare is not None:
            assert prepare(cloud, sid)[0] in (200, 202, 204)
            cloud.aio.wait_idle()
        death.arm(at)
        status, body = request(cloud, sid)
        assert status in (200, 202, 204) or (status == 409 and operation == "changePassword"
                                        and at is not None), body
    cloud.aio.wait_idle()
    return sid


def _delete_and_check_empty(cloud, death, sid, where=None):
    death.arm(-1)
    harness._hosts_back_up(cloud)
    if cloud.api("GET", f"/servers/{sid}")[0] == 200:
        assert cloud.api("DELETE", f"/servers/{sid}")[0] == 204
        cloud.aio.wait_idle()
    if cloud.api("GET", f"/servers/{sid}")[0] == 200:  # soft-deleted
        assert cloud.action(sid, {"forceDelete": None})[0] == 202
        cloud.aio.wait_idle()
    assert books(cloud, sid) == {"status": "DELETED", "task_state": None, "host": None,
                                 "allocations": {}, "usages": {}, "guests": set()}, where


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_a_compute_service_dying_before_any_effect_finishes_on_restart(cloud, death, operation,
                                                                       request):
    if operation in SOFT_DELETING_OPERATIONS:
        CONF.set_override("reclaim_instance_interval", 3600)
        request.addfinalizer(lambda: CONF.clear_override("reclaim_instance_interval"))
    sid = _run(cloud, death, operation, None)
    finished = books(cloud, sid)
    images = _images(cloud, sid)
    effects = list(death.effects)
    assert finished["task_state"] is None and len(effects) >= 2, (finished, effects)
    _delete_and_check_empty(cloud, death, sid)

    for at in range(1, len(effects) + 1):
        sid = _run(cloud, death, operation, at)
        assert death.reached.is_set(), f"{operation}: never reached effect {at}"
        _restart(cloud, death, death.host)
        cloud.aio.wait_idle()
        after = books(cloud, sid)
        where = (operation, at, effects[at - 1])
        if operation == "build" and after["status"] == "ERROR":
            assert after["task_state"] is None, where  # the build stopped on that host
        else:
            assert after == finished, where
        if operation in IMAGE_OPERATIONS:
            assert _images(cloud, sid) == images, where
        _delete_and_check_empty(cloud, death, sid, where)


# A move: its hosts' steps are counted together; the host running the step that
# dies is down while the conductor undoes the move, and starts again after.
def _resize(cloud, sid):
    return cloud.action(sid, {"resize": {"flavorRef": "2"}})


# move: (what brings the server to where it starts, the request)
MOVES = {
    "resize": (None, _resize),
    "migrate": (None, lambda cloud, sid: cloud.action(sid, {"migrate": None})),
    "live-migrate": (None, lambda cloud, sid: cloud.action(
        sid, {"os-migrateLive": {"host": None, "block_migration": "auto"}}, version="2.30")),
    "evacuate": (lambda cloud, sid: harness._host_down(cloud, None, sid),
                 lambda cloud, sid: cloud.action(sid, {"evacuate": {}}, version="2.79")),
    "unshelve": (lambda cloud, sid: cloud.action(sid, {"shelve": None}),
                 lambda cloud, sid: cloud.action(sid, {"unshelve": None})),
    "confirm": (_resize, lambda cloud, sid: cloud.action(sid, {"confirmResize": None})),
    "revert": (_resize, lambda cloud, sid: cloud.action(sid, {"revertResize": None})),
}


def _move(cloud, death, move, at):
    death.arm(-1)
    prepare, request = MOVES[move]
    sid = _boot(cloud)
    cloud.aio.wait_idle()
    source = cloud.host_of(sid)
    if prepare is not None:
        prepare(cloud, sid)
        cloud.aio.wait_idle()
    before = harness.books(cloud, sid, source)
    death.arm(at)
    status, body = request(cloud, sid)
    assert status in (200, 202, 204), body
    cloud.aio.wait_idle()
    return sid, source, before


@pytest.mark.parametrize("move", sorted(MOVES))
def test_a_host_dying_inside_a_move_is_undone_and_reconciled_when_it_starts(cloud, death,
                                                                            move):
    host_dies_at_every_effect(cloud, death, move)


def _swapped(books):
    """``books`` with the two hosts' roles exchanged."""
    def swap(label):
        if not isinstance(label, str):
            return label
        role, sep, rest = label.partition(":")
        other = {"source": "other", "other": "source"}.get(role, role)
        return other + sep + rest

    def walk(value):
        if isinstance(value, dict):
            return {swap(k): walk(v) for k, v in value.items()}
        if isinstance(value, (set, tuple)):
            return type(value)(walk(v) for v in value)
        return swap(value)
    return {key: walk(value) for key, value in books.items()}


def host_dies_at_every_effect(cloud, death, move):
    """The harness; returns (the books before and after a clean run, its effects)."""
    sid, source, clean_before = _move(cloud, death, move, None)
    finished = harness.books(cloud, sid, source)
    effects = list(death.effects)
    assert finished["task_state"] is None and len(effects) >= 2, (finished, effects)
    _delete_and_check_empty(cloud, death, sid)

    for at in range(1, len(effects) + 1):
        sid, source, before = _move(cloud, death, move, at)
        assert death.reached.is_set(), f"{move}: never reached effect {at}"
        where = (move, at, effects[at - 1], death.dead == source and "source" or "dest")
        _restart(cloud, death, death.dead)
        cloud.aio.conductor.recover_operations()  # as its periodic task does
        cloud.aio.wait_idle()
        after = harness.books(cloud, sid, source)
        undone = dict(before, migration="error") if move != "unshelve" else before
        ends = [finished, undone]
        if move == "unshelve":  # the host that did not answer is skipped for the other
            ends.append(_swapped(finished))
        assert after in ends, (where, [{k: (v, end.get(k)) for k, v in after.items()
                                        if end.get(k) != v} for end in ends])
        _delete_and_check_empty(cloud, death, sid, where)
    return clean_before, finished, effects
