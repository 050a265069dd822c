import urllib.parse
import uuid

import pytest

from novella.rpc import inproc, rabbit
from tests import backends


def _rabbit_vhost_url():
    parts = urllib.parse.urlsplit(backends.rabbit_url())
    url = parts._replace(path="/novella_t_" + uuid.uuid4().hex[:10]).geturl()
    try:
        rabbit.ensure_vhost(url)
    except (OSError, Exception) as exc:  # noqa: BLE001 - rabbitmqctl missing or failing
        backends._unavailable("rabbitmqctl add_vhost", exc)
    return url


@pytest.fixture(scope="module")
def rabbit_vhost():
    """A fresh RabbitMQ virtual host for the module, deleted afterwards."""
    url = _rabbit_vhost_url()
    yield url
    rabbit.delete_vhost(url)


@pytest.fixture
def make_transport(request):
    """make_transport(kind, vhost_url=None) -> a started transport, stopped after the test."""
    made = []

    def make(kind, url=None):
        if kind == "inproc":
            t = inproc.InProcessTransport(url or f"inproc://{uuid.uuid4().hex}")
        else:
            t = rabbit.RabbitTransport(url or request.getfixturevalue("rabbit_vhost"))
        made.append(t)
        return t

    yield make
    for t in made:
        t.stop()


@pytest.fixture(params=["inproc", "rabbit"])
def transport(request, make_transport):
    return make_transport(request.param)


@pytest.fixture
def topic():
    """A topic name of its own, so tests sharing a vhost never see each other's queues."""
    return "t" + uuid.uuid4().hex[:12]
