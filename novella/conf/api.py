from oslo_config import cfg

api_opts = [
    cfg.StrOpt("auth_strategy", default="keystone", choices=["keystone", "noauth2"],
               help="keystone: tokens validated by keystonemiddleware; "
                    "noauth2: trust the X-Auth-Token as user:project (tests only)."),
    cfg.IntOpt("max_limit", default=1000, help="Largest page a list returns."),
    cfg.StrOpt("compute_link_prefix"),
    cfg.BoolOpt("list_records_by_skipping_down_cells", default=True),
    cfg.BoolOpt("enable_instance_password", default=True,
                help="Return the server's admin password in the create response."),
]


def register_opts(conf):
    conf.register_opts(api_opts, group="api")
