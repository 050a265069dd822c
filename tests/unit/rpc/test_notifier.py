import datetime

import pytest

from novella.conf import CONF
from novella.context import RequestContext
from novella.rpc import inproc, notifier

CTXT = RequestContext(user_id="u1", project_id="p1")
INSTANCE = {"uuid": "c0ffee00-0000-4000-8000-000000000001", "project_id": "p1", "user_id": "u1",
            "display_name": "vm1", "host": "h1", "node": "h1", "vm_state": "active",
            "task_state": "resize_prep", "power_state": 4,
            "created_at": datetime.datetime(2024, 1, 2, 3, 4, 5)}
FLAVOR = {"flavorid": "1", "name": "m1.tiny", "memory_mb": 512, "vcpus": 1, "root_gb": 1,
          "ephemeral_gb": 0, "extra_specs": {"hw:cpu_policy": "shared"}}
NETWORK_INFO = [{"id": "port-1", "address": "fa:16:3e:00:00:01",
                 "network": {"id": "net-1", "label": "private",
                             "subnets": [{"cidr": "10.0.0.0/24",
                                          "ips": [{"address": "10.0.0.5", "version": 4}]}]}}]


@pytest.fixture
def recorded():
    t = inproc.InProcessTransport("inproc://notifier-test")
    notes = notifier.FakeNotifications(t)
    yield t, notes
    t.stop()


def test_instance_payload_shape():
    p = notifier.instance_payload(INSTANCE, FLAVOR, network_info=NETWORK_INFO, ctxt=CTXT)
    assert p["nova_object.name"] == "InstanceActionPayload"
    assert p["nova_object.namespace"] == "nova"
    d = p["nova_object.data"]
    assert d["uuid"] == INSTANCE["uuid"] and d["tenant_id"] == "p1"
    assert d["power_state"] == "shutdown" and d["state"] == "active"
    assert d["created_at"] == "2024-01-02T03:04:05Z"
    assert d["flavor"]["nova_object.name"] == "FlavorPayload"
    assert d["flavor"]["nova_object.data"]["extra_specs"] == {"hw:cpu_policy": "shared"}
    [ip] = d["ip_addresses"]
    assert ip["nova_object.data"]["address"] == "10.0.0.5"
    assert ip["nova_object.data"]["port_uuid"] == "port-1"
    assert d["action_initiator_project"] == "p1" and d["request_id"] == CTXT.request_id


def test_fault_becomes_exception_payload():
    try:
        raise ValueError("disk full")
    except ValueError as exc:
        p = notifier.instance_payload(INSTANCE, FLAVOR, fault=exc)
    fault = p["nova_object.data"]["fault"]
    assert fault["nova_object.name"] == "ExceptionPayload"
    assert fault["nova_object.data"]["exception"] == "ValueError"
    assert fault["nova_object.data"]["exception_message"] == "disk full"


def test_versioned_is_the_default(recorded):
    t, notes = recorded
    notifier.Notifier(t, "nova-compute:h1").notify(
        CTXT, "instance.power_off.start", notifier.instance_payload(INSTANCE, FLAVOR))
    [msg] = notes.messages
    assert msg["payload"]["nova_object.name"] == "InstanceActionPayload"
    assert msg["publisher_id"] == "nova-compute:h1"


@pytest.mark.parametrize("fmt, versioned, legacy", [
    ("versioned", 1, 0), ("unversioned", 0, 1), ("both", 1, 1)])
def test_notification_format_option(recorded, fmt, versioned, legacy):
    t, notes = recorded
    CONF.set_override("notification_format", fmt, group="notifications")
    try:
        notifier.Notifier(t, "p").notify(CTXT, "instance.x", notifier.instance_payload(INSTANCE, FLAVOR))
    finally:
        CONF.clear_override("notification_format", group="notifications")
    payloads = [m["payload"] for m in notes.messages]
    assert sum(notifier.is_versioned(p) for p in payloads) == versioned
    plain = [p for p in payloads if not notifier.is_versioned(p)]
    assert len(plain) == legacy
    if plain:
        assert plain[0]["uuid"] == INSTANCE["uuid"]
        assert plain[0]["flavor"]["name"] == "m1.tiny"


def test_plain_payload_is_wrapped_when_versioned(recorded):
    t, notes = recorded
    notifier.Notifier(t, "p")(CTXT, "other-publisher", "service.update", {"host": "h1"})
    [msg] = notes.messages
    assert msg["publisher_id"] == "other-publisher"
    assert msg["payload"]["nova_object.data"] == {"host": "h1"}


def test_wait_for_reports_what_was_seen(recorded):
    t, notes = recorded
    notifier.Notifier(t, "p").info(CTXT, "a.b", {"x": 1})
    assert notes.wait_for("a.b")[0]["payload"]["nova_object.data"] == {"x": 1}
    with pytest.raises(AssertionError, match="a.b"):
        notes.wait_for("c.d", timeout=0.01)
