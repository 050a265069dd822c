from oslo_config import cfg

api_opts = [
    cfg.StrOpt("auth_strategy", default="keystone", choices=["keystone", "noauth2"],
               help="keystone: tokens validated by keystonemiddleware; "
                    "noauth2: trust the X-Auth-Token as user:project (tests only)."),
    cfg.IntOpt("max_limit", default=1000, help="Largest page a list returns."),
    cfg.StrOpt("compute_link_prefix",
               help="Scheme, host and port that replace the request's in the links of "
                    "responses (a proxy in front of the API)."),
    cfg.BoolOpt("list_records_by_skipping_down_cells", default=True,
                help="Lists leave out the servers of a cell that does not answer; "
                     "false: such a list fails."),
    cfg.BoolOpt("enable_instance_password", default=True,
                help="Return the server's admin password in the create response."),
]


def register_opts(conf):
    conf.register_opts(api_opts, group="api")
