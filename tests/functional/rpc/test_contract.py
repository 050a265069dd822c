"""One contract, two transports: every test runs in-process and over RabbitMQ."""
import threading

import pytest

from novella import rpc
from novella.context import RequestContext
from novella.rpc.notifier import FakeNotifications, Notifier, instance_payload

CTXT = RequestContext(user_id="u1", project_id="p1", roles=["member"])


class Endpoint:
    def __init__(self, name="server", cast_seen=None):
        self.name = name
        self.casts = []
        self.cast_seen = cast_seen or threading.Condition()
        self.release = threading.Event()

    def echo(self, ctxt, value):
        return {"value": value, "by": self.name, "project": ctxt.project_id}

    def fail(self, ctxt, message):
        raise KeyError(message)

    def record(self, ctxt, n):
        with self.cast_seen:
            self.casts.append(n)
            self.cast_seen.notify_all()

    def slow(self, ctxt):
        return self.release.wait(10)

    def _private(self, ctxt):
        return "never"


def wait_casts(endpoints, total, timeout=10):
    """Wait until the endpoints (sharing one condition) recorded ``total`` casts."""
    def count():
        return sum(len(e.casts) for e in endpoints)

    with endpoints[0].cast_seen:
        endpoints[0].cast_seen.wait_for(lambda: count() >= total, timeout)
    return count()


def test_call_returns_result_with_context(transport, topic):
    transport.serve(topic, "h1", Endpoint("h1"))
    assert transport.call(CTXT, topic, "h1", "echo", value=[1, "two", {"3": None}]) == {
        "value": [1, "two", {"3": None}], "by": "h1", "project": "p1"}


def test_call_to_any_server_of_topic(transport, topic):
    transport.serve(topic, "h1", Endpoint("h1"))
    assert transport.call(CTXT, topic, None, "echo", value=1)["by"] == "h1"


def test_remote_exception_becomes_remote_error(transport, topic):
    transport.serve(topic, "h1", Endpoint())
    with pytest.raises(rpc.RemoteError) as err:
        transport.call(CTXT, topic, "h1", "fail", message="no such thing")
    assert err.value.exc_type == "KeyError"
    assert "no such thing" in err.value.message
    with pytest.raises(rpc.RemoteError) as err:
        transport.call(CTXT, topic, "h1", "_private")
    assert err.value.exc_type == "AttributeError"


def test_cast_is_delivered(transport, topic):
    ep = Endpoint()
    transport.serve(topic, "h1", ep)
    transport.cast(CTXT, topic, "h1", "record", n=7)
    assert wait_casts([ep], 1) == 1
    assert ep.casts == [7]


def test_topic_casts_are_balanced_across_servers(transport, topic):
    seen = threading.Condition()
    a, b = Endpoint("a", seen), Endpoint("b", seen)
    transport.serve(topic, "a", a)
    transport.serve(topic, "b", b)
    for n in range(10):
        transport.cast(CTXT, topic, None, "record", n=n)
    assert wait_casts([a, b], 10) == 10
    assert sorted(a.casts + b.casts) == list(range(10))
    assert a.casts and b.casts


def test_server_addressed_cast_reaches_only_that_server(transport, topic):
    a, b = Endpoint("a"), Endpoint("b")
    transport.serve(topic, "a", a)
    transport.serve(topic, "b", b)
    for n in range(4):
        transport.cast(CTXT, topic, "b", "record", n=n)
    assert wait_casts([b], 4) == 4
    # A call to "a" afterwards proves a's queue is drained and got nothing.
    assert transport.call(CTXT, topic, "a", "echo", value=0)["by"] == "a"
    assert a.casts == []


def test_call_without_server_times_out(transport, topic):
    with pytest.raises(rpc.Timeout):
        transport.call(CTXT, topic, "nobody", "echo", timeout=0.5, value=1)


def test_unserve_stops_delivery(transport, topic):
    transport.serve(topic, "h1", Endpoint())
    transport.unserve(topic, "h1")
    with pytest.raises(rpc.Timeout):
        transport.call(CTXT, topic, "h1", "echo", timeout=0.5, value=1)


def test_long_call_does_not_block_others(transport, topic):
    ep = Endpoint()
    transport.serve(topic, "h1", ep)
    result = {}
    t = threading.Thread(target=lambda: result.setdefault(
        "slow", transport.call(CTXT, topic, "h1", "slow", timeout=10)))
    t.start()
    try:
        assert transport.call(CTXT, topic, "h1", "echo", timeout=5, value=2)["value"] == 2
        assert "slow" not in result
    finally:
        ep.release.set()
        t.join(10)
    assert result["slow"] is True


class Relay:
    """A conductor-like endpoint that calls another service on its own transport."""

    def __init__(self, transport, target):
        self.transport, self.target = transport, target

    def relay(self, ctxt, value):
        return self.transport.call(ctxt, self.target, None, "echo", timeout=10, value=value)


def test_endpoint_calls_another_topic_on_the_same_transport(transport, topic):
    transport.serve(topic + "x", "h", Endpoint("inner"))
    transport.serve(topic, "h", Relay(transport, topic + "x"))
    results = []
    threads = [threading.Thread(target=lambda n=n: results.append(
        transport.call(CTXT, topic, "h", "relay", timeout=10, value=n))) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(15)
    assert sorted(r["value"] for r in results) == list(range(8))
    assert {r["by"] for r in results} == {"inner"}


def test_notifications_reach_listener(transport):
    notes = FakeNotifications(transport)
    notifier = Notifier(transport, "nova-compute:h1")
    instance = {"uuid": "8a4e2c1b-0000-4000-8000-000000000001", "project_id": "p1",
                "user_id": "u1", "host": "h1", "vm_state": "active", "power_state": 1}
    notifier.notify(CTXT, "instance.resize.start", instance_payload(instance, {"name": "m1.small"}))
    notifier.error(CTXT, "instance.resize.error", instance_payload(instance, None))
    [start] = notes.wait_for("instance.resize.start")
    [error] = notes.wait_for("instance.resize.error")
    assert start["publisher_id"] == "nova-compute:h1"
    assert start["priority"] == "INFO" and error["priority"] == "ERROR"
    payload = start["payload"]
    assert payload["nova_object.name"] == "InstanceActionPayload"
    assert payload["nova_object.data"]["uuid"] == instance["uuid"]
    assert payload["nova_object.data"]["power_state"] == "running"
    assert payload["nova_object.data"]["flavor"]["nova_object.data"]["name"] == "m1.small"
    assert start["context"]["project_id"] == "p1"


@pytest.mark.parametrize("kind", ["inproc", "rabbit"])
def test_transports_are_isolated(request, make_transport, kind, topic):
    """Two cells' transports (RabbitMQ: two vhosts) never see each other's messages."""
    if kind == "rabbit":
        from novella.rpc import rabbit
        from tests.functional.rpc.conftest import new_vhost_url
        urls = [request.getfixturevalue("rabbit_url"), new_vhost_url()]
        request.addfinalizer(lambda: rabbit.delete_vhost(urls[1]))
    else:
        urls = ["inproc://iso-a-" + topic, "inproc://iso-b-" + topic]
    one, two = (make_transport(kind, u) for u in urls)
    one.serve(topic, "h", Endpoint("one"))
    two.serve(topic, "h", Endpoint("two"))
    one.serve(topic + "x", "h", Endpoint("only-one"))
    notes_two = FakeNotifications(two)
    assert one.call(CTXT, topic, "h", "echo", value=1)["by"] == "one"
    assert two.call(CTXT, topic, "h", "echo", value=1)["by"] == "two"
    with pytest.raises(rpc.Timeout):
        two.call(CTXT, topic + "x", "h", "echo", timeout=0.5, value=1)
    Notifier(one, "p").notify(CTXT, "one.event", {"x": 1})
    Notifier(two, "p").notify(CTXT, "two.event", {"x": 2})
    notes_two.wait_for("two.event")
    assert notes_two.event_types == ["two.event"]


def test_rabbit_keeps_casts_for_a_restarting_server(make_transport, topic):
    """Once a server has listened, its queue holds casts while it is down."""
    transport = make_transport("rabbit")
    transport.serve(topic, "h1", Endpoint("first"))
    transport.unserve(topic, "h1")
    transport.cast(CTXT, topic, "h1", "record", n=1)
    back = Endpoint("back")
    transport.serve(topic, "h1", back)
    assert wait_casts([back], 1) == 1 and back.casts == [1]


def test_rabbit_consumers_reconnect_after_losing_the_broker(make_transport, topic):
    import socket
    transport = make_transport("rabbit")
    transport.serve(topic, "h1", Endpoint("h1"))
    assert transport.call(CTXT, topic, "h1", "echo", value=1)["value"] == 1
    consumers = [transport._servers[(topic, "h1")][0], transport._reply_consumer]
    # Cut every connection under the transport, as a broker restart would.
    for conn in [c.conn for c in consumers] + [transport._pub_conn]:
        conn.connection.transport.sock.shutdown(socket.SHUT_RDWR)
    # A call racing the reconnection may lose its reply, as with any broker
    # restart; the transport must be usable again within a few seconds.
    for _ in range(5):
        try:
            assert transport.call(CTXT, topic, "h1", "echo", timeout=3, value=2)["value"] == 2
            break
        except rpc.Timeout:
            continue
    else:
        pytest.fail("the transport did not recover")
