"""Placement's own configuration object, named as in placement.conf.

Placement keeps a private ``cfg.ConfigOpts`` so it can be embedded in a
process whose other services read a different configuration.
"""
import os

from oslo_config import cfg
from oslo_policy import opts as policy_opts

_OPTS = {
    "placement_database": [
        cfg.StrOpt("connection", required=True, secret=True,
                   help="SQLAlchemy URL of the placement database (required)."),
        cfg.BoolOpt("sync_on_startup", default=True,
                    help="Create or upgrade the schema when the app starts."),
    ],
    "api": [
        cfg.StrOpt("auth_strategy", default="keystone",
                   choices=("keystone", "noauth2"),
                   help="How requests are authenticated."),
    ],
    "placement": [
        cfg.BoolOpt("randomize_allocation_candidates", default=False,
                    help="Shuffle allocation candidates before applying limit."),
        cfg.StrOpt("incomplete_consumer_project_id",
                   default="00000000-0000-0000-0000-000000000000",
                   help="Project of the consumers of allocations written before 1.8 "
                        "(without project_id)."),
        cfg.StrOpt("incomplete_consumer_user_id",
                   default="00000000-0000-0000-0000-000000000000",
                   help="User of the consumers of allocations written before 1.8 "
                        "(without user_id)."),
    ],
}


def register_opts(conf):
    for group, opts in _OPTS.items():
        conf.register_opts(opts, group=group)
    for group, opts in policy_opts.list_opts():
        conf.register_opts(opts, group=group)
    from oslo_middleware import cors, sizelimit
    conf.register_opts(cors.CORS_OPTS, "cors")
    # [oslo_middleware] max_request_body_size: the request size limit (docs/limits.md)
    conf.register_opts(sizelimit.OPTS, "oslo_middleware")


def list_opts():
    """Placement's options by group, for ``oslo-config-generator --namespace
    novella.placement`` (the library options it uses have their own namespaces:
    oslo.policy, oslo.middleware.cors, oslo.middleware.sizelimit)."""
    return [(group, list(opts)) for group, opts in _OPTS.items()]


def make_conf(args=None, default_config_files=None, overrides=None):
    """Build and parse a ConfigOpts for placement.

    ``overrides`` maps group -> {option: value} and is applied after parsing.
    """
    conf = cfg.ConfigOpts()
    register_opts(conf)
    # Overrides are in place before parsing, which checks required options.
    for group, values in (overrides or {}).items():
        for name, value in values.items():
            conf.set_override(name, value, group=None if group == "DEFAULT" else group)
    conf(args or [], project="placement",
         default_config_files=default_config_files or [])
    return conf


def config_files(environ=None):
    """placement.conf, found as the reference's WSGI script finds it: the file
    ``NOVELLA_PLACEMENT_CONFIG`` names, else ``placement.conf`` in
    ``OS_PLACEMENT_CONFIG_DIR`` (default ``/etc/placement``); none if it does not exist."""
    env = os.environ if environ is None else environ
    path = env.get("NOVELLA_PLACEMENT_CONFIG") or os.path.join(
        env.get("OS_PLACEMENT_CONFIG_DIR", "/etc/placement"), "placement.conf")
    return [path] if os.path.exists(path) else []
