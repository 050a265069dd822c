from novella import rpc
from novella.rpc import rabbit


def test_oslo_url_becomes_kombu_url():
    assert rabbit.kombu_url("rabbit://guest:guest@127.0.0.1:5672/cell1") == \
        "amqp://guest:guest@127.0.0.1:5672/cell1"


def test_several_hosts_become_a_failover_list():
    assert rabbit.kombu_url("rabbit://u:p@h1:5672,u:p@h2:5672/v") == \
        "amqp://u:p@h1:5672/v;amqp://u:p@h2:5672/v"


def test_vhost_of():
    assert rabbit.vhost_of("rabbit://u:p@h:5672/cell1") == "cell1"
    assert rabbit.vhost_of("amqp://u:p@h:5672/") == "/"
    assert rabbit.vhost_of("amqp://u:p@h:5672/%2Fnova") == "/nova"


def test_transport_is_created_without_connecting():
    t = rabbit.RabbitTransport("rabbit://guest:guest@127.0.0.1:1/nowhere")
    try:
        assert isinstance(t, rpc.Transport)
        assert t.exchange.name == "nova" and t.exchange.type == "topic"
    finally:
        t.stop()
