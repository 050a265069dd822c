"""The embedded image, network and volume services, built from configuration.

Every process of a deployment builds its own client objects over the same
databases (and, for images, the same data directory), so what one process
writes the others see. Each service has a ``connection`` option of its own;
unset, it shares the API database (the table names do not overlap).
"""


def services_from_conf(conf):
    """-> (image_api, network_api, volume_api)."""
    from novella.image.api import ImageAPI
    from novella.network.api import NetworkAPI
    from novella.volume.api import VolumeAPI
    default = conf.api_database.connection
    image_api = ImageAPI(conf.image_service.connection or default, conf.image_service.data_dir)
    network_api = NetworkAPI(conf.network_service.connection or default)
    volume_api = VolumeAPI(conf.volume_service.connection or default, image_api=image_api)
    return image_api, network_api, volume_api
