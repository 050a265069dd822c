"""Versioned notifications compared with the reference's (nova, installed as a test dependency).

The reference's notification classes name, with the samples they are
documented by, every event type and its payload class; the payload classes
give each payload's version and fields. Novella's table
(novella/rpc/notifications.py) must agree with them, and every notification
recorded from every move (and its failures) must have the payload class,
version and fields the reference's class has, nested payloads included.
Differences that are kept are listed in KEPT (and in docs/conformance.md,
"Notifications"); any other fails.
"""
import json
import subprocess
import sys

import pytest

from novella.rpc import notifications
from novella.rpc.notifier import FakeNotifications
from novella.virt import simulated
from tests.functional.moves.conftest import make_cloud  # noqa: F401 - fixture

# (payload class, field) differences kept, with docs/conformance.md saying why.
KEPT = {("RequestSpecPayload", "numa_topology"), ("RequestSpecPayload", "pci_requests")}

# Fields the reference's payload class leaves out when it has no value for
# them: DestinationPayload sets host only when one was asked for,
# ImageMetaPropsPayload only the properties the image has ("*").
UNSET = {("DestinationPayload", "host"), ("ImageMetaPropsPayload", "*")}


# Importing nova registers its options on oslo.config's global object, which
# Novella registers its own on: the reference is read in a separate interpreter.
_READ_REFERENCE = """
import importlib, json, pkgutil
import nova.notifications.objects as pkg
from nova.notifications.objects import base
payloads, events = {}, {}
for m in pkgutil.iter_modules(pkg.__path__):
    module = importlib.import_module("nova.notifications.objects." + m.name)
    for obj in vars(module).values():
        if not isinstance(obj, type):
            continue
        if issubclass(obj, base.NotificationPayloadBase):
            payloads[obj.__name__] = {"version": obj.VERSION, "fields": {
                name: field.nullable for name, field in obj.fields.items()}}
        if issubclass(obj, base.NotificationBase) and getattr(obj, "samples", None):
            payload = obj.fields["payload"].AUTO_TYPE._obj_name
            for sample in obj.samples:
                events[sample[:-len(".json")].replace("-", ".")] = payload
print(json.dumps([events, payloads]))
"""


def _reference():
    """({event type: payload class}, {payload class: {"version", "fields": {name: nullable}}})."""
    pytest.importorskip("nova")
    done = subprocess.run([sys.executable, "-c", _READ_REFERENCE], capture_output=True,
                          text=True, timeout=120, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


EVENTS, PAYLOADS = _reference()


def test_table_matches_the_reference():
    wrong = {}
    for event_type in notifications.event_types():
        name, version = notifications.payload_of(event_type)
        ref = EVENTS.get(event_type)
        if ref is None:
            wrong[event_type] = "not sent by the reference"
        elif ref != name or PAYLOADS[ref]["version"] != version:
            wrong[event_type] = f"{name} {version}, reference {ref} {PAYLOADS[ref]['version']}"
    assert wrong == {}


def _differences(payload, where="", out=None):
    """Every (class, field) where a versioned payload differs from the reference's class."""
    out = set() if out is None else out
    if isinstance(payload, list):
        for item in payload:
            _differences(item, where, out)
        return out
    if not (isinstance(payload, dict) and "nova_object.name" in payload):
        return out
    name = payload["nova_object.name"]
    cls = PAYLOADS.get(name)
    if cls is None:
        out.add((name, "<class unknown to the reference>"))
        return out
    if payload["nova_object.version"] != cls["version"]:
        out.add((name, f"<version {payload['nova_object.version']} != {cls['version']}>"))
    data = payload["nova_object.data"]
    for field in set(cls["fields"]) ^ set(data):
        if not ({(name, field), (name, "*")} & UNSET) or field in data:
            out.add((name, field))
    for field, value in data.items():
        if field in cls["fields"] and value is None and not cls["fields"][field]:
            out.add((name, f"{field} is null"))
        _differences(value, f"{where}.{field}", out)
    return out


def _check(notes, sid):
    """The server's notifications as (event type, service), each payload checked."""
    seen, unlisted = [], set()
    for msg in notes.messages:
        data = msg["payload"].get("nova_object.data", {})
        # compute.exception names no server: the tests' clouds run one at a time.
        if msg["event_type"] != notifications.COMPUTE_EXCEPTION and \
                sid not in (data.get("uuid"), data.get("instance_uuid")):
            continue
        assert msg["event_type"] in EVENTS, msg["event_type"]
        assert msg["payload"]["nova_object.name"] == EVENTS[msg["event_type"]]
        assert msg["priority"] == ("ERROR" if msg["event_type"].endswith((".error", ".exception"))
                                   else "INFO")
        assert msg["context"]["request_id"]
        unlisted |= _differences(msg["payload"]) - KEPT
        seen.append((msg["event_type"], msg["publisher_id"].split(":")[0]))
    assert unlisted == set()
    return seen


C, API, COND = "nova-compute", "nova-api", "nova-conductor"
EXC = ("compute.exception", C)


def _pairs(action, service=C):
    return [(f"instance.{action}.start", service), (f"instance.{action}.end", service)]


def _boot(cloud):
    notes = FakeNotifications(cloud.aio.transport)
    sid = cloud.boot(flavor="1")
    notes.clear()
    return notes, sid


def _act(cloud, sid, body, expect=202):
    status, resp = cloud.action(sid, body)
    assert status == expect, resp
    cloud.aio.wait_idle()


RESIZE = _pairs("resize_prep") + _pairs("resize") + _pairs("resize_finish")


def test_resize_then_revert(make_cloud):  # noqa: F811
    cloud = make_cloud(hosts=2)
    notes, sid = _boot(cloud)
    _act(cloud, sid, {"resize": {"flavorRef": "2"}})
    _act(cloud, sid, {"revertResize": None})
    assert _check(notes, sid) == RESIZE + _pairs("resize_revert")
    [prep] = [m for m in notes.messages if m["event_type"] == "instance.resize_prep.start"]
    data = prep["payload"]["nova_object.data"]
    assert (data["flavor"]["nova_object.data"]["name"],
            data["new_flavor"]["nova_object.data"]["name"]) == ("m1.tiny", "m1.small")
    [end] = [m for m in notes.messages if m["event_type"] == "instance.resize_finish.end"]
    assert end["payload"]["nova_object.data"]["ip_addresses"]


def test_resize_then_confirm(make_cloud):  # noqa: F811
    cloud = make_cloud(hosts=2)
    notes, sid = _boot(cloud)
    _act(cloud, sid, {"resize": {"flavorRef": "2"}})
    _act(cloud, sid, {"confirmResize": None}, expect=204)
    assert _check(notes, sid) == RESIZE + _pairs("resize_confirm")


def test_resize_refused_by_every_host(make_cloud):  # noqa: F811
    cloud = make_cloud(hosts=2)
    notes, sid = _boot(cloud)
    dest = next(h for h in cloud.aio.computes if h != cloud.host_of(sid))
    simulated.inject_fault(dest, "prep_resize", instance_uuid=sid)
    _act(cloud, sid, {"resize": {"flavorRef": "2"}})
    assert _check(notes, sid) == [
        ("instance.resize_prep.start", C), ("instance.resize.error", C),
        ("instance.resize_prep.end", C), EXC, ("compute_task.migrate_server.error", COND)]
    [exc] = notes.of_type("compute.exception")
    data = exc["payload"]["nova_object.data"]
    assert exc["publisher_id"] == f"nova-compute:{dest}"
    assert (data["module_name"], data["function_name"]) == ("novella.virt.simulated", "_fault")
    assert "injected fault" in data["exception_message"] and data["traceback"]


def test_request_spec_of_a_failed_move(make_cloud):  # noqa: F811
    """compute_task.migrate_server.error's RequestSpecPayload with its objects:
    the server group, the destination asked for, the hosts tried."""
    cloud = make_cloud(hosts=2)
    notes = FakeNotifications(cloud.aio.transport)
    status, body = cloud.api("POST", "/os-server-groups", {"server_group": {
        "name": "g", "policy": "anti-affinity", "rules": {"max_server_per_host": 1}}},
        version="2.64")
    assert status == 200, body
    group = body["server_group"]["id"]
    server = {"name": "vm", "flavorRef": "1", "imageRef": cloud.aio.demo_image["id"],
              "networks": "auto"}
    status, body = cloud.api("POST", "/servers", {"server": server,
                                                  "os:scheduler_hints": {"group": group}})
    assert status == 202, body
    cloud.aio.wait_idle()
    sid = body["server"]["id"]
    src = cloud.host_of(sid)
    dest = next(h for h in cloud.aio.computes if h != src)
    notes.clear()
    simulated.inject_fault(dest, "prep_resize", instance_uuid=sid)
    _act(cloud, sid, {"migrate": {"host": dest}}, expect=202)
    _check(notes, sid)
    [error] = notes.of_type("compute_task.migrate_server.error")
    spec = error["payload"]["nova_object.data"]["request_spec"]["nova_object.data"]
    sg = spec["instance_group"]["nova_object.data"]
    assert (sg["uuid"], sg["policy"], sg["policies"], sg["rules"]) == (
        group, "anti-affinity", ["anti-affinity"], {"max_server_per_host": "1"})
    assert spec["requested_destination"]["nova_object.data"]["host"] == dest
    assert spec["retry"]["nova_object.name"] == "SchedulerRetriesPayload"
    assert spec["flavor"]["nova_object.data"]["name"] == "m1.tiny"
    image = spec["image"]["nova_object.data"]
    assert image["id"] == cloud.aio.demo_image["id"]
    assert image["properties"]["nova_object.name"] == "ImageMetaPropsPayload"


def test_live_migration(make_cloud):  # noqa: F811
    cloud = make_cloud(hosts=2)
    notes, sid = _boot(cloud)
    _act(cloud, sid, {"os-migrateLive": {"host": None, "block_migration": "auto"}})
    assert _check(notes, sid) == (_pairs("live_migration_pre") + _pairs("live_migration_post_dest")
                                  + _pairs("live_migration_post"))


def test_live_migration_failing_at_the_source_rolls_back(make_cloud):  # noqa: F811
    cloud = make_cloud(hosts=2)
    notes, sid = _boot(cloud)
    simulated.inject_fault(cloud.host_of(sid), "live_migration", instance_uuid=sid)
    _act(cloud, sid, {"os-migrateLive": {"host": None, "block_migration": "auto"}})
    seen = _check(notes, sid)
    assert seen[:3] == _pairs("live_migration_pre") + [EXC]
    assert sorted(seen[3:]) == sorted(_pairs("live_migration_rollback")
                                      + _pairs("live_migration_rollback_dest")
                                      + [("compute_task.migrate_server.error", COND)])


def _publishers(notes, *event_types):
    return {m["event_type"]: m["publisher_id"] for m in notes.messages
            if m["event_type"] in event_types}


def test_live_migration_destination_failing_its_preparation_rolls_back(make_cloud):  # noqa: F811
    cloud = make_cloud(hosts=2)
    notes, sid = _boot(cloud)
    src = cloud.host_of(sid)
    dest = next(h for h in cloud.aio.computes if h != src)
    simulated.inject_fault(dest, "pre_live_migration", instance_uuid=sid)
    _act(cloud, sid, {"os-migrateLive": {"host": None, "block_migration": "auto"}})
    seen = _check(notes, sid)
    # The destination fails; the source tells the rollback, the destination its own.
    assert seen[:2] == [("instance.live_migration_pre.start", C), EXC]
    assert sorted(seen[2:]) == sorted(_pairs("live_migration_rollback")
                                      + _pairs("live_migration_rollback_dest")
                                      + [("compute_task.migrate_server.error", COND)])
    assert seen.index(("instance.live_migration_rollback.start", C)) < \
        seen.index(("instance.live_migration_rollback.end", C))
    assert _publishers(notes, "instance.live_migration_pre.start", "compute.exception",
                       "instance.live_migration_rollback.start",
                       "instance.live_migration_rollback.end",
                       "instance.live_migration_rollback_dest.end") == {
        "instance.live_migration_pre.start": f"nova-compute:{dest}",
        "compute.exception": f"nova-compute:{dest}",
        "instance.live_migration_rollback.start": f"nova-compute:{src}",
        "instance.live_migration_rollback.end": f"nova-compute:{src}",
        "instance.live_migration_rollback_dest.end": f"nova-compute:{dest}"}
    assert cloud.host_of(sid) == src and cloud.server(sid)["status"] == "ACTIVE"


def _steered(make_cloud, steer):  # noqa: F811
    """A live migration that copies memory until ``steer(cloud, server, migration
    id)`` (the API's abort or force complete) acts on it; (cloud, notifications,
    server, source host, the server's notifications)."""
    from tests.functional.moves.test_live_migration import _in_progress, _start
    cloud = make_cloud(hosts=2, simulated={"live_migration_copy_seconds": 60})
    notes, sid = _boot(cloud)
    src = cloud.host_of(sid)
    _start(cloud, sid)
    assert steer(cloud, sid, _in_progress(cloud, sid, "running")["id"])[0] == 202
    cloud.aio.wait_idle()
    return cloud, notes, sid, src, _check(notes, sid)


def test_live_migration_abort(make_cloud):  # noqa: F811
    from tests.functional.moves.test_live_migration import _abort
    cloud, notes, sid, src, seen = _steered(make_cloud, _abort)
    # An abort is asked for, not a failure: no compute.exception. The copy stops
    # as the abort is asked, so the rollback may overtake the abort's .end.
    assert seen[:2] == _pairs("live_migration_pre")
    assert sorted(seen[2:]) == sorted(_pairs("live_migration_abort")
                                      + _pairs("live_migration_rollback")
                                      + _pairs("live_migration_rollback_dest")
                                      + [("compute_task.migrate_server.error", COND)])
    for action in ("abort", "rollback", "rollback_dest"):
        start, end = _pairs(f"live_migration_{action}")
        assert seen.index(start) < seen.index(end)
    assert _publishers(notes, "instance.live_migration_abort.end") == {
        "instance.live_migration_abort.end": f"nova-compute:{src}"}
    assert cloud.host_of(sid) == src and cloud.migrations(sid)[0]["status"] == "cancelled"


def test_live_migration_force_complete(make_cloud):  # noqa: F811
    from tests.functional.moves.test_live_migration import _force
    cloud, notes, sid, src, seen = _steered(make_cloud, _force)
    # The copy ends as the forced completion is asked: the move may overtake its .end.
    assert seen[:2] == _pairs("live_migration_pre")
    assert [e for e in seen[2:] if "force_complete" not in e[0]] == (
        _pairs("live_migration_post_dest") + _pairs("live_migration_post"))
    assert [e for e in seen[2:] if "force_complete" in e[0]] == \
        _pairs("live_migration_force_complete")
    assert _publishers(notes, "instance.live_migration_force_complete.end") == {
        "instance.live_migration_force_complete.end": f"nova-compute:{src}"}
    assert cloud.host_of(sid) != src and cloud.migrations(sid)[0]["status"] == "completed"


def test_shelve_then_unshelve(make_cloud):  # noqa: F811
    cloud = make_cloud(hosts=2)
    notes, sid = _boot(cloud)
    _act(cloud, sid, {"shelve": None})
    # shelved_offload_time 0: offloaded at once, by the same host.
    assert _check(notes, sid) == _pairs("shelve") + _pairs("shelve_offload")
    notes.clear()
    _act(cloud, sid, {"unshelve": None})
    assert _check(notes, sid) == _pairs("unshelve")
    assert cloud.server(sid)["status"] == "ACTIVE"


def _force_down(cloud, host):
    status, body = cloud.api("GET", f"/os-services?host={host}&binary=nova-compute",
                             version="2.53")
    (svc,) = body["services"]
    assert cloud.api("PUT", f"/os-services/{svc['id']}", {"forced_down": True},
                     version="2.53")[0] == 200


def test_evacuate(make_cloud):  # noqa: F811
    cloud = make_cloud(hosts=2)
    notes, sid = _boot(cloud)
    src = cloud.host_of(sid)
    _force_down(cloud, src)
    _act(cloud, sid, {"evacuate": {}}, expect=200)
    assert _check(notes, sid) == [("instance.evacuate", API),
                                  ("instance.rebuild_scheduled", COND)] + _pairs("rebuild")
    [scheduled] = notes.of_type("instance.rebuild_scheduled")
    assert scheduled["publisher_id"] == f"nova-conductor:{cloud.host_of(sid)}"


def test_evacuate_failing_on_the_destination(make_cloud):  # noqa: F811
    cloud = make_cloud(hosts=2)
    notes, sid = _boot(cloud)
    src = cloud.host_of(sid)
    dest = next(h for h in cloud.aio.computes if h != src)
    _force_down(cloud, src)
    simulated.inject_fault(dest, "spawn", instance_uuid=sid)
    _act(cloud, sid, {"evacuate": {}}, expect=200)
    assert _check(notes, sid) == [
        ("instance.evacuate", API), ("instance.rebuild_scheduled", COND),
        ("instance.rebuild.start", C), ("instance.rebuild.error", C), EXC,
        ("compute_task.rebuild_server.error", COND)]
    assert _publishers(notes, "instance.rebuild.error", "compute.exception") == {
        "instance.rebuild.error": f"nova-compute:{dest}",
        "compute.exception": f"nova-compute:{dest}"}
    assert cloud.host_of(sid) == src


def test_request_spec_payload_objects_match_the_reference_classes():
    from novella.rpc import notifier
    spec = {"instance_uuid": "6f4e3f5c-9a3b-4c1a-8f41-2d0c5b1e7a10", "project_id": "p",
            "user_id": "u", "flavor": {"flavorid": "1", "name": "m1.tiny", "memory_mb": 512,
                                       "vcpus": 1, "root_gb": 1, "ephemeral_gb": 0},
            "image": {"id": "0c8b2f9e-3c55-4c1b-9d8a-4d2f0e6f1a2b", "name": "cirros",
                      "properties": {"hw_machine_type": "q35", "os_distro": "cirros",
                                     "my_own": "x"}},
            "instance_group": {"uuid": "1d2c3b4a-5e6f-4a7b-8c9d-0e1f2a3b4c5d",
                               "policy": "affinity", "rules": {}, "members": ["a"],
                               "hosts": ["h1"]},
            "requested_destination": {"host": "h2", "node": "n2",
                                      "cell_uuid": "9a8b7c6d-5e4f-4a3b-9c2d-1e0f9a8b7c6d"},
            "retry": {"num_attempts": 2, "hosts": [["h1", "n1"]]},
            "force_hosts": ["h3"], "force_nodes": [], "scheduler_hints": {"group": "g"}}
    payload = notifier.request_spec_payload(spec)
    assert _differences(payload) - KEPT == set()
    data = payload["nova_object.data"]
    props = data["image"]["nova_object.data"]["properties"]["nova_object.data"]
    assert props == {"hw_machine_type": "q35", "os_distro": "cirros"}
    assert data["retry"]["nova_object.data"] == {"num_attempts": 2, "hosts": ["n1"]}
    dest = data["requested_destination"]["nova_object.data"]
    assert (dest["host"], dest["node"], dest["cell"]["nova_object.data"]["uuid"]) == (
        "h2", "n2", spec["requested_destination"]["cell_uuid"])
    assert (data["force_hosts"], data["force_nodes"]) == ("h3", None)
    assert data["instance_group"]["nova_object.data"]["policies"] == ["affinity"]
