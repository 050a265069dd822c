"""Where the embedded image, volume and network services keep their state.

Each service has a database of its own, so a real Glance, Cinder or Neutron
can take its place without touching the compute databases.
"""
from oslo_config import cfg

image_opts = [
    cfg.StrOpt("connection", secret=True,
               help="Database URL of the embedded image service "
                    "(default: the [api_database] connection)."),
    cfg.StrOpt("data_dir", default="$state_path/images",
               help="Directory holding image data files; shared by every process."),
]
volume_opts = [
    cfg.StrOpt("connection", secret=True,
               help="Database URL of the embedded volume service "
                    "(default: the [api_database] connection)."),
]
network_opts = [
    cfg.StrOpt("connection", secret=True,
               help="Database URL of the embedded network service "
                    "(default: the [api_database] connection)."),
]


def register_opts(conf):
    conf.register_opts(image_opts, group="image_service")
    conf.register_opts(volume_opts, group="volume_service")
    conf.register_opts(network_opts, group="network_service")
