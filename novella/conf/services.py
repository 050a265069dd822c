"""Where the compute side finds the other services (placement, identity, ...)."""
from oslo_config import cfg

placement_opts = [
    cfg.StrOpt("endpoint_override", help="Placement endpoint URL (the all-in-one embeds it)."),
    cfg.StrOpt("token", default="admin", secret=True,
               help="Token sent to placement when no Keystone session is configured."),
]


def register_opts(conf):
    conf.register_opts(placement_opts, group="placement")
