import urllib.parse
import uuid

import kombu
import pytest

from novella.rpc import inproc, rabbit
from tests import backends

# Server names the contract tests use; their queues are removed afterwards.
SERVERS = ("h", "h1", "a", "b", "nobody")


def new_vhost_url():
    """A fresh RabbitMQ virtual host (the caller deletes it)."""
    parts = urllib.parse.urlsplit(backends.rabbit_url())
    url = parts._replace(path="/novella_t_" + uuid.uuid4().hex[:10]).geturl()
    try:
        rabbit.ensure_vhost(url)
    except Exception as exc:  # noqa: BLE001 - rabbitmqctl missing or failing
        backends._unavailable("rabbitmqctl add_vhost", exc)
    return url


def _delete_queues(url, topic):
    names = [topic, topic + "x"] + [f"{t}.{s}" for t in (topic, topic + "x") for s in SERVERS]
    # Notifications the tests sent pile up in the operator-facing queues otherwise.
    names += [f"{t}.{p}" for t in ("versioned_notifications", "notifications")
              for p in ("info", "error")]
    try:
        with kombu.Connection(rabbit.kombu_url(url)) as conn:
            channel = conn.channel()
            for name in names:
                channel.queue_delete(name)
    except Exception:  # noqa: BLE001 - the vhost is gone already
        pass


@pytest.fixture
def topic():
    """A topic name of its own, so tests sharing a vhost never see each other's queues."""
    return "t" + uuid.uuid4().hex[:12]


@pytest.fixture
def make_transport(request, topic):
    """make_transport(kind, url=None) -> a transport, stopped (and its queues removed) after the test."""
    made = []

    def make(kind, url=None):
        if kind == "inproc":
            t = inproc.InProcessTransport(url or f"inproc://{uuid.uuid4().hex}")
        else:
            t = rabbit.RabbitTransport(url or request.getfixturevalue("rabbit_url"))
        made.append(t)
        return t

    yield make
    for t in made:
        t.stop()
    for t in made:
        if isinstance(t, rabbit.RabbitTransport):
            _delete_queues(t.url, topic)


@pytest.fixture(params=["inproc", "rabbit"])
def transport(request, make_transport):
    return make_transport(request.param)
