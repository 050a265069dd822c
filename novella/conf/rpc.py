from oslo_config import cfg

opts = [
    cfg.StrOpt("transport_url", default="inproc://default", secret=True,
               help="Message transport: inproc://NAME for the in-process transport, "
                    "rabbit://user:pass@host:port/vhost for RabbitMQ."),
    cfg.IntOpt("rpc_response_timeout", default=60,
               help="Seconds to wait for the answer to an RPC call."),
    cfg.IntOpt("long_rpc_timeout", default=1800,
               help="Seconds to wait for RPC calls known to be long "
                    "(e.g. the steps of a cross-cell resize)."),
    cfg.IntOpt("executor_thread_pool_size", default=8, min=1,
               help="Threads that run incoming casts (in-process transport) or "
                    "messages (RabbitMQ, per topic and server). The work is mostly "
                    "Python under one interpreter lock: beyond a few threads, more "
                    "only adds switching."),
]
notification_opts = [
    cfg.StrOpt("notification_format", default="versioned",
               choices=["unversioned", "versioned", "both"]),
    cfg.ListOpt("versioned_notifications_topics", default=["versioned_notifications"]),
]


def register_opts(conf):
    conf.register_opts(opts)
    conf.register_opts(notification_opts, group="notifications")
