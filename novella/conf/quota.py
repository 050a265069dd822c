"""``[quota]``: the compute quotas, with the reference's option names and
defaults. -1 means unlimited."""
from oslo_config import cfg

quota_opts = [
    cfg.IntOpt("instances", default=10, min=-1, help="Servers a project may have."),
    cfg.IntOpt("cores", default=20, min=-1, help="Instance cores (VCPUs) a project may use."),
    cfg.IntOpt("ram", default=50 * 1024, min=-1, help="Megabytes of instance RAM a project may use."),
    cfg.IntOpt("metadata_items", default=128, min=-1, help="Metadata items per server."),
    cfg.IntOpt("injected_files", default=5, min=-1, help="Injected files per server."),
    cfg.IntOpt("injected_file_content_bytes", default=10 * 1024, min=-1,
               help="Bytes of one injected file."),
    cfg.IntOpt("injected_file_path_length", default=255, min=-1,
               help="Characters of an injected file's path."),
    cfg.IntOpt("key_pairs", default=100, min=-1, help="Key pairs a user may have."),
    cfg.IntOpt("server_groups", default=10, min=-1, help="Server groups a project may have."),
    cfg.IntOpt("server_group_members", default=10, min=-1, help="Servers in one server group."),
    cfg.StrOpt("driver", default="nova.quota.DbQuotaDriver",
               choices=["nova.quota.DbQuotaDriver", "nova.quota.NoopQuotaDriver",
                        "nova.quota.UnifiedLimitsDriver"],
               help="DbQuotaDriver enforces the limits below and the API's overrides; "
                    "NoopQuotaDriver enforces none. UnifiedLimitsDriver is read as "
                    "DbQuotaDriver."),
    cfg.BoolOpt("recheck_quota", default=True,
                help="Count again after the servers (or the resize) are recorded, and undo "
                     "them if a concurrent request took the room meanwhile."),
    cfg.BoolOpt("count_usage_from_placement", default=False,
                help="Count cores and RAM from the project's placement usages instead of "
                     "from the cells' instance records."),
]


def register_opts(conf):
    conf.register_opts(quota_opts, group="quota")


def list_opts():
    return [("quota", quota_opts)]
