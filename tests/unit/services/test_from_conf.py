from novella.cmd import manage
from novella.conf import CONF
from novella.embedded import service_connections, services_from_conf


def test_services_share_the_api_database_by_default(tmp_path, admin):
    url = f"sqlite:///{tmp_path}/api.db"
    CONF.set_override("connection", url, group="api_database")
    CONF.set_override("data_dir", str(tmp_path / "images"), group="image_service")
    try:
        manage.api_db_sync(url, service_connections(CONF))
        image_api, network_api, volume_api = services_from_conf(CONF)
        again = services_from_conf(CONF)
    finally:
        CONF.clear_override("connection", group="api_database")
        CONF.clear_override("data_dir", group="image_service")
    image = image_api.create(admin, name="img")
    image_api.upload(admin, image["id"], b"data")
    assert again[0].get(admin, image["id"])["status"] == "active"
    net = network_api.ensure_default_network(admin)
    assert again[1].get_network(admin, net["id"])["name"] == "private"
    vol = volume_api.create(admin, 1, image_id=image["id"])
    assert again[2].get(admin, vol["id"])["volume_image_metadata"]["image_name"] == "img"
