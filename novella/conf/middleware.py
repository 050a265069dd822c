"""``[oslo_middleware]``: the option of oslo.middleware's request size limiter
that every HTTP API of Novella honours (docs/limits.md). The option object is
the library's own, so its name, type and default are the reference's."""
from oslo_middleware import sizelimit

middleware_opts = sizelimit.OPTS


def register_opts(conf):
    conf.register_opts(middleware_opts, group="oslo_middleware")


def list_opts():
    return [("oslo_middleware", list(middleware_opts))]
