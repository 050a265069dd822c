"""The Placement API as a WSGI application (placement.conf: see ``novella.wsgi``)."""
from novella.cmd import serve
from novella.placement import conf as _conf

application = serve.placement_api_builder(
    _conf.make_conf(default_config_files=_conf.config_files()))()
