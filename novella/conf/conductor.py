"""The conductor's options: how long an operation's owner holds it."""
from oslo_config import cfg

opts = [
    cfg.IntOpt("operation_lease", default=10, min=1,
               help="Seconds a conductor holds each operation it runs without renewing "
                    "its lease (it renews every third of that while it lives). When a "
                    "conductor dies, another takes over its operations once their lease "
                    "has run out: within two lease periods."),
]


def register_opts(conf):
    conf.register_opts(opts, group="conductor")
