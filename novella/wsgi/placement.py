"""The Placement API as a WSGI application (placement.conf: see ``novella.wsgi``)."""
from novella.cmd import serve
from novella.placement import conf as _conf
from novella.wsgi import placement_config_files

application = serve.placement_api_builder(
    _conf.make_conf(default_config_files=placement_config_files()))()
