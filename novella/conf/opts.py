"""Every option of the compute side's configuration, by group, for
``oslo-config-generator --namespace novella`` (entry point ``oslo.config.opts``)."""
from oslo_config import cfg


def list_opts():
    from novella.conf import MODULES
    conf = cfg.ConfigOpts()
    for module in MODULES:
        module.register_opts(conf)
        for group, opts in getattr(module, "sample_opts", list)():
            conf.register_opts(opts, group=group)
    out = [("DEFAULT", [info["opt"] for info in conf._opts.values()
                        if info["opt"].name not in _BUILTIN])]
    for name in sorted(conf._groups):
        out.append((name, [info["opt"] for info in conf._groups[name]._opts.values()]))
    return out


# Options every ConfigOpts registers for itself.
_BUILTIN = {"config_file", "config_dir", "config_source", "shell_completion"}
