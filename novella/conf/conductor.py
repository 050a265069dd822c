"""The conductor's options: how long an operation's owner holds it, and when a
request no conductor began is taken as lost."""
from oslo_config import cfg

opts = [
    cfg.IntOpt("operation_lease", default=10, min=1,
               help="Seconds a conductor holds each operation it runs without renewing "
                    "its lease (it renews every third of that while it lives). When a "
                    "conductor dies, another takes over its operations once their lease "
                    "has run out: within two lease periods."),
    cfg.IntOpt("lost_request_timeout", default=300, min=0,
               help="Seconds after which a request the API accepted and cast to the "
                    "conductors (a create, resize, cold or live migration, evacuation, "
                    "resize confirmation or revert, unshelve) that no conductor has "
                    "begun is taken as lost (the process that sent it, or the conductor "
                    "that received it, died first) and settled by whichever conductor's "
                    "periodic recovery sees it first: a create, a move or an unshelve is "
                    "refused (the server in ERROR in cell0; the migration in error, the "
                    "task state cleared, a fault), a confirmation or revert is carried "
                    "out. A request that was only slow and arrives afterwards does "
                    "nothing. A task state the API set for a request it never recorded "
                    "in full (it died between its writes, so nothing was cast) is cleared "
                    "after the same time. Keep it well above rpc_response_timeout and "
                    "the longest a request may wait in the conductors' queue (default: "
                    "five times the default rpc_response_timeout). 0: never (the "
                    "all-in-one still settles them when it starts, as it is then its "
                    "databases' only conductor)."),
]


def register_opts(conf):
    conf.register_opts(opts, group="conductor")
