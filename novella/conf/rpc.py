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
    cfg.IntOpt("executor_thread_pool_size", default=64, min=1,
               help="Threads that run the messages a service receives over RabbitMQ "
                    "(per topic and server); they spend most of their time waiting "
                    "on other processes."),
    cfg.IntOpt("inprocess_cast_threads", default=1, min=1,
               help="Threads that run casts on the in-process transport. Nothing there "
                    "waits on another process (a call runs in its caller's thread), so "
                    "casts are pure work under one interpreter lock; more threads only "
                    "add switching, which costs more than it overlaps."),
]
notification_opts = [
    cfg.StrOpt("notification_format", default="versioned",
               choices=["unversioned", "versioned", "both"],
               help="Which notifications are sent: the versioned ones (payloads of the "
                    "reference's classes), the legacy unversioned ones, or both."),
    cfg.ListOpt("versioned_notifications_topics", default=["versioned_notifications"],
                help="Topics the versioned notifications are published to on RabbitMQ."),
    cfg.BoolOpt("bdms_in_notifications", default=False,
                help="Include the server's volumes (block_devices) in the payloads of "
                     "versioned instance notifications."),
]


def register_opts(conf):
    conf.register_opts(opts)
    conf.register_opts(notification_opts, group="notifications")
