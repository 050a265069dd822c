"""The embedded image, network and volume services, built from configuration.

Every process of a deployment builds its own client objects over the same
databases (and, for images, the same data directory), so what one process
writes the others see. Each service has a ``connection`` option of its own;
unset, it shares the API database (the table names do not overlap).

The services never create their tables: `novella manage api_db sync` does,
once, before the services start (``service_connections`` says where), and a
service built over a database without them raises
``novella.db.migrate.SchemaNotSynced``.

Their HTTP APIs (``service_app``) are served by `novella up` and by `novella
serve image|network|volume`.
"""


def service_connections(conf, api_url=None):
    """-> {"image"|"network"|"volume": database URL} (unset: ``api_url`` or the API database)."""
    default = api_url or conf.api_database.connection
    return {"image": conf.image_service.connection or default,
            "network": conf.network_service.connection or default,
            "volume": conf.volume_service.connection or default}


def services_from_conf(conf):
    """-> (image_api, network_api, volume_api)."""
    from novella.image.api import ImageAPI
    from novella.network.api import NetworkAPI
    from novella.volume.api import VolumeAPI
    url = service_connections(conf)
    image_api = ImageAPI(url["image"], conf.image_service.data_dir)
    network_api = NetworkAPI(url["network"])
    volume_api = VolumeAPI(url["volume"], image_api=image_api,
                           volumes_dir=conf.volume_service.volumes_dir)
    return image_api, network_api, volume_api


def service_app(conf, name, service):
    """The HTTP API of embedded service ``name`` ("image", "network" or "volume") over its
    client object: a WSGI app behind the authentication ``[api] auth_strategy`` chooses."""
    from importlib import import_module
    return import_module(f"novella.api.{name}.app").make_app(conf, service)
