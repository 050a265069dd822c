"""RabbitMQ transport options, named as oslo.messaging names them."""
from oslo_config import cfg

opts = [
    cfg.StrOpt("control_exchange", default="nova",
               help="The topic exchange that RPC and notifications are published to."),
]


def register_opts(conf):
    conf.register_opts(opts)
