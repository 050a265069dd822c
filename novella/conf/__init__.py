"""Configuration for the compute side, with the reference's option names.

Options live in one module per area; ``CONF`` is oslo.config's global object
that every compute-side service reads. Placement has its own ConfigOpts
(novella/placement/conf.py) so it can be embedded beside a different config.
"""
from oslo_config import cfg

from novella.conf import (api, clients, compute, conductor, consoles, database, embedded, libvirt,
                          messaging, middleware, quota, rpc, scheduler)

CONF = cfg.CONF

MODULES = (api, clients, compute, conductor, consoles, database, embedded, libvirt, messaging,
           middleware, quota, rpc, scheduler)

for _module in MODULES:
    _module.register_opts(CONF)


def parse_args(argv=None, default_config_files=None):
    CONF(argv if argv is not None else [], project="nova",
         default_config_files=default_config_files or [])
