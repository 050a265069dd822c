"""Versioned notifications on RabbitMQ, read by a stock oslo.messaging listener.

Every service runs in a process of its own (tests/e2e/processes.py). One
``oslo_messaging.get_notification_listener`` per transport (the top-level
one and each cell's) receives the notifications of a cross-cell resize and
its confirmation: the computes of both cells publish on their cell's
transport, the conductor on the top-level one, and each message arrives
with its context (``_context_*`` keys of the oslo.messaging envelope).
"""
import threading

import pytest
import requests

from tests.e2e import processes
from tests.e2e.processes import ADMIN

pytestmark = [pytest.mark.postgresql, pytest.mark.rabbitmq]

oslo_messaging = pytest.importorskip("oslo_messaging")


class _Recorder:
    """A notification endpoint: every message with the transport it came on."""

    def __init__(self):
        self.messages = []
        self.cond = threading.Condition()

    def endpoint(self, transport_name):
        recorder = self

        class Endpoint:
            def _record(self, ctxt, publisher_id, event_type, payload, metadata, priority):
                with recorder.cond:
                    recorder.messages.append({
                        "transport": transport_name, "context": ctxt,
                        "publisher_id": publisher_id, "event_type": event_type,
                        "payload": payload, "metadata": metadata, "priority": priority})
                    recorder.cond.notify_all()

            def info(self, ctxt, publisher_id, event_type, payload, metadata):
                self._record(ctxt, publisher_id, event_type, payload, metadata, "INFO")

            def error(self, ctxt, publisher_id, event_type, payload, metadata):
                self._record(ctxt, publisher_id, event_type, payload, metadata, "ERROR")

        return Endpoint()

    def wait_for(self, event_type, timeout=60):
        with self.cond:
            if not self.cond.wait_for(
                    lambda: any(m["event_type"] == event_type for m in self.messages), timeout):
                raise AssertionError(f"no {event_type}; seen "
                                     f"{[m['event_type'] for m in self.messages]}")
            return [m for m in self.messages if m["event_type"] == event_type]


@pytest.fixture
def deployment(tmp_path):
    with processes.deployment(tmp_path) as d:
        yield d


@pytest.fixture
def listened(deployment):
    from oslo_config import cfg
    recorder = _Recorder()
    listeners = []
    for name, url in deployment["transports"].items():
        conf = cfg.ConfigOpts()
        conf([])
        transport = oslo_messaging.get_notification_transport(
            conf, url=url.replace("amqp://", "rabbit://", 1))
        listener = oslo_messaging.get_notification_listener(
            transport, [oslo_messaging.Target(topic="versioned_notifications", exchange="nova")],
            [recorder.endpoint(name)], executor="threading")
        listener.start()
        listeners.append((listener, transport))
    yield deployment, recorder
    for listener, transport in listeners:
        listener.stop()
        listener.wait()
        transport.cleanup()


def test_cross_cell_resize_notifications_reach_an_oslo_messaging_listener(listened):
    deployment, recorder = listened
    api = deployment["api"]
    image, _image_api = processes.seed(deployment)
    r = requests.post(f"{api}/servers", json={"server": {
        "name": "mover", "flavorRef": "small", "imageRef": image["id"], "networks": "auto",
        "host": "cell1-host"}}, headers=dict(ADMIN, **{"OpenStack-API-Version": "compute 2.74"}))
    assert r.status_code == 202, r.text
    sid = r.json()["server"]["id"]
    processes.wait("ACTIVE", lambda: processes.status(api, sid) == "ACTIVE")

    r = requests.post(f"{api}/servers/{sid}/action", headers=ADMIN,
                      json={"resize": {"flavorRef": "medium"}})
    assert r.status_code == 202, r.text
    request_id = r.headers.get("x-openstack-request-id")
    processes.wait("VERIFY_RESIZE", lambda: processes.status(api, sid) == "VERIFY_RESIZE",
                   timeout=120)
    assert requests.post(f"{api}/servers/{sid}/action", headers=ADMIN,
                         json={"confirmResize": None}).status_code == 204
    processes.wait("ACTIVE", lambda: processes.status(api, sid) == "ACTIVE", timeout=120)

    # Who publishes what, on which transport.
    expected = {
        "instance.resize_prep.start": ("cell2", "nova-compute:cell2-host"),
        "instance.resize_prep.end": ("cell2", "nova-compute:cell2-host"),
        "instance.resize.start": ("cell1", "nova-compute:cell1-host"),
        "instance.resize.end": ("cell1", "nova-compute:cell1-host"),
        "instance.resize_finish.start": ("cell2", "nova-compute:cell2-host"),
        "instance.resize_finish.end": ("cell2", "nova-compute:cell2-host"),
        "instance.resize_confirm.start": ("super", None),
        "instance.resize_confirm.end": ("super", None),
    }
    for event_type, (transport, publisher) in expected.items():
        [msg] = [m for m in recorder.wait_for(event_type)
                 if m["payload"]["nova_object.data"]["uuid"] == sid]
        assert msg["transport"] == transport, (event_type, msg["transport"])
        if publisher:
            assert msg["publisher_id"] == publisher
        else:
            assert msg["publisher_id"].startswith("nova-conductor:")
        assert msg["priority"] == "INFO"
        assert msg["metadata"]["message_id"] and msg["metadata"]["timestamp"]
        # The context arrives whole: who asked, in which project, which request.
        ctxt = msg["context"]
        assert ctxt["user"] and ctxt["project_id"] and ctxt["request_id"]
        assert msg["payload"]["nova_object.data"]["action_initiator_user"] == ctxt["user"]
        if request_id and event_type.startswith(("instance.resize_prep", "instance.resize.",
                                                 "instance.resize_finish")):
            assert ctxt["request_id"] == request_id
    [prep] = [m for m in recorder.wait_for("instance.resize_prep.start")
              if m["payload"]["nova_object.data"]["uuid"] == sid]
    assert prep["payload"]["nova_object.name"] == "InstanceActionResizePrepPayload"
    data = prep["payload"]["nova_object.data"]
    assert data["flavor"]["nova_object.data"]["name"] != \
        data["new_flavor"]["nova_object.data"]["name"]
    assert requests.delete(f"{api}/servers/{sid}", headers=ADMIN).status_code == 204
    processes.wait("gone", lambda: processes.status(api, sid) == 404)
