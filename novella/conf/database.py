from oslo_config import cfg

api_database_opts = [
    cfg.StrOpt("connection", secret=True,
               help="SQLAlchemy URL of the API database (cell mappings, flavors, ...)."),
]
database_opts = [
    cfg.StrOpt("connection", secret=True,
               help="SQLAlchemy URL of this service's cell database."),
]


def register_opts(conf):
    conf.register_opts(api_database_opts, group="api_database")
    conf.register_opts(database_opts, group="database")
