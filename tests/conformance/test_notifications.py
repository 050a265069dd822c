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
KEPT = {
    ("RequestSpecPayload", "instance_group"), ("RequestSpecPayload", "numa_topology"),
    ("RequestSpecPayload", "pci_requests"), ("RequestSpecPayload", "requested_destination"),
    ("RequestSpecPayload", "retry"),
}


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
        if sid not in (data.get("uuid"), data.get("instance_uuid")):
            continue
        assert msg["event_type"] in EVENTS, msg["event_type"]
        assert msg["payload"]["nova_object.name"] == EVENTS[msg["event_type"]]
        assert msg["priority"] == ("ERROR" if msg["event_type"].endswith(".error") else "INFO")
        assert msg["context"]["request_id"]
        unlisted |= _differences(msg["payload"]) - KEPT
        seen.append((msg["event_type"], msg["publisher_id"].split(":")[0]))
    assert unlisted == set()
    return seen


C, API, COND = "nova-compute", "nova-api", "nova-conductor"


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
        ("instance.resize_prep.end", C), ("compute_task.migrate_server.error", COND)]


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
    assert seen[:2] == _pairs("live_migration_pre")
    assert sorted(seen[2:]) == sorted(_pairs("live_migration_rollback")
                                      + _pairs("live_migration_rollback_dest")
                                      + [("compute_task.migrate_server.error", COND)])


def test_evacuate(make_cloud):  # noqa: F811
    cloud = make_cloud(hosts=2)
    notes, sid = _boot(cloud)
    src = cloud.host_of(sid)
    status, body = cloud.api("GET", f"/os-services?host={src}&binary=nova-compute",
                             version="2.53")
    (svc,) = body["services"]
    assert cloud.api("PUT", f"/os-services/{svc['id']}", {"forced_down": True},
                     version="2.53")[0] == 200
    _act(cloud, sid, {"evacuate": {}}, expect=200)
    assert _check(notes, sid) == [("instance.evacuate", API),
                                  ("instance.rebuild_scheduled", COND)] + _pairs("rebuild")
    [scheduled] = notes.of_type("instance.rebuild_scheduled")
    assert scheduled["publisher_id"] == f"nova-conductor:{cloud.host_of(sid)}"
