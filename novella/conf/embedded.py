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
    cfg.StrOpt("volumes_dir", default="$state_path/volumes",
               help="Directory of the volumes' files (one raw file per volume, made when "
                    "the volume is first connected to a host); the compute hosts of this "
                    "machine open them there."),
]
network_opts = [
    cfg.StrOpt("connection", secret=True,
               help="Database URL of the embedded network service "
                    "(default: the [api_database] connection)."),
    cfg.BoolOpt("shared_network", default=True,
                help="`novella up` and `novella manage bootstrap` make the shared network "
                     "'private' (10.0.0.0/24), which a server asking for no network in "
                     "particular gets. False: no shared network; a project's servers use "
                     "its own networks, or one auto-allocated for it (see "
                     "default_subnet_pool)."),
    cfg.StrOpt("default_subnet_pool",
               help="A prefix (CIDR) for `novella up` and `novella manage bootstrap` to make "
                    "the default IPv4 subnet pool 'default-subnetpool-v4' of, and to make the "
                    "external network 'public' the default one: what auto-allocated "
                    "topologies need (GET /v2.0/auto-allocated-topology, a server created "
                    "with networks 'auto' by a project without a network). Unset: neither."),
    cfg.IntOpt("default_subnet_pool_prefixlen", default=26, min=8, max=30,
               help="The length of the prefixes of subnets cut from the default subnet pool "
                    "made for default_subnet_pool."),
]


def register_opts(conf):
    conf.register_opts(image_opts, group="image_service")
    conf.register_opts(volume_opts, group="volume_service")
    conf.register_opts(network_opts, group="network_service")
