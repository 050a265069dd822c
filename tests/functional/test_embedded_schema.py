"""The embedded image, network and volume services' tables are made by
`novella manage api_db sync`, never by the services themselves."""
import subprocess
import sys

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from novella.cmd import main as cli
from novella.cmd import manage
from novella.conf import parse_args
from novella.context import get_admin_context
from novella.db import cells, migrate
from novella.image import models as image_models
from novella.image.api import ImageAPI
from novella.network.api import NetworkAPI
from novella.volume.api import VolumeAPI

IMAGE_TABLES = {"images"}
NETWORK_TABLES = {"qos_policies", "networks", "subnets", "ports", "ipallocations",
                  "ml2_port_bindings"}
VOLUME_TABLES = {"volumes", "volume_attachment"}
SERVICE_TABLES = IMAGE_TABLES | NETWORK_TABLES | VOLUME_TABLES


def _tables(url):
    return set(sa.inspect(cells.database(url).engine).get_table_names())


def _revisions(url):
    with cells.database(url).engine.connect() as conn:
        return {name: migrate.current(conn, name) for name in migrate.EMBEDDED}


def _build(url, tmp_path):
    image_api = ImageAPI(url, str(tmp_path / "images"))
    return image_api, NetworkAPI(url), VolumeAPI(url, image_api=image_api)


def test_api_db_sync_makes_the_services_tables(tmp_path, capsys):
    url = f"sqlite:///{tmp_path}/api.db"
    cli.main(["manage", "--api-database-connection", url, "api_db", "sync"])
    assert "embedded image, network and volume" in capsys.readouterr().out
    assert SERVICE_TABLES | {"cell_mappings", "flavors"} <= _tables(url)
    assert _revisions(url) == {name: migrate.head(name) for name in migrate.EMBEDDED}

    # The services start on it and keep their records there.
    ctxt = get_admin_context()
    image_api, network_api, volume_api = _build(url, tmp_path)
    image = image_api.create(ctxt, name="cirros")
    net = network_api.ensure_default_network(ctxt)
    port = network_api.create_port(ctxt, {"network_id": net["id"]})
    volume = volume_api.create(ctxt, 1)
    again = _build(url, tmp_path)
    assert again[0].get(ctxt, image["id"])["name"] == "cirros"
    assert again[1].get_port(ctxt, port["id"])["fixed_ips"] == port["fixed_ips"]
    assert again[2].get(ctxt, volume["id"])["status"] == "available"

    # A second sync (a restart of `novella up`) changes nothing.
    manage.api_db_sync(url)
    assert again[0].get(ctxt, image["id"])["name"] == "cirros"


@pytest.mark.parametrize("synced", [(), ("api",)], ids=["empty", "api-only"])
def test_services_on_an_unsynced_database_refuse_and_create_nothing(tmp_path, synced):
    url = f"sqlite:///{tmp_path}/api.db"
    for name in synced:
        migrate.sync(name, url)
    before = _tables(url)
    for build in (lambda: ImageAPI(url, str(tmp_path / "images")),
                  lambda: NetworkAPI(url), lambda: VolumeAPI(url)):
        with pytest.raises(migrate.SchemaNotSynced, match="run `novella manage api_db sync`"):
            build()
    assert _tables(url) == before
    assert not before & SERVICE_TABLES


@pytest.mark.parametrize("service", ["conductor", "image", "network", "volume"])
def test_serve_on_an_unsynced_database_exits_with_the_remedy(tmp_path, service):
    url = f"sqlite:///{tmp_path}/api.db"
    migrate.sync("api", url)
    conf = tmp_path / "nova.conf"
    conf.write_text(f"[DEFAULT]\ntransport_url = inproc://super\n"
                    f"[api_database]\nconnection = {url}\n"
                    f"[placement]\nendpoint_override = http://127.0.0.1:9\n")
    # A separate process: `serve` reads the process-wide options, which an
    # all-in-one run earlier in this one may have overridden.
    ran = subprocess.run([sys.executable, "-m", "novella.cmd.main", "serve", service,
                          "--config-file", str(conf), "--bind", "127.0.0.1:0"],
                         capture_output=True, text=True, timeout=60)
    assert ran.returncode == 1
    assert "error: the image schema" in ran.stderr
    assert "run `novella manage api_db sync`" in ran.stderr
    assert not _tables(url) & SERVICE_TABLES


def test_service_with_a_database_of_its_own(tmp_path):
    """[image_service] connection set: its tables go there, the others stay in the API database."""
    api_url = f"sqlite:///{tmp_path}/api.db"
    image_url = f"sqlite:///{tmp_path}/image.db"
    conf = tmp_path / "nova.conf"
    conf.write_text(f"[image_service]\nconnection = {image_url}\n")
    try:
        # The API database given on the command line: an all-in-one run earlier in
        # this process may have left an override of [api_database] connection.
        cli.main(["manage", "--config-file", str(conf), "--api-database-connection", api_url,
                  "api_db", "sync"])
    finally:
        parse_args([])  # leave the process-wide options as other tests expect them
    assert _tables(image_url) == IMAGE_TABLES | {"alembic_version_image"}
    assert not _tables(api_url) & IMAGE_TABLES
    assert NETWORK_TABLES | VOLUME_TABLES <= _tables(api_url)
    ImageAPI(image_url, str(tmp_path / "images"))
    with pytest.raises(migrate.SchemaNotSynced):
        ImageAPI(api_url, str(tmp_path / "images"))


def test_sync_adopts_tables_made_before_the_schema_was_versioned(tmp_path):
    """A data directory from before: the image service had made its table itself."""
    url = f"sqlite:///{tmp_path}/api.db"
    migrate.sync("api", url)
    engine = cells.database(url).engine
    image_models.Base.metadata.create_all(engine)
    with engine.begin() as conn:
        conn.execute(sa.insert(image_models.Image).values(id="img-1", name="old", properties={}))
    manage.api_db_sync(url)
    assert _revisions(url)["image"] == migrate.head("image")
    image_api = ImageAPI(url, str(tmp_path / "images"))
    assert image_api.get(get_admin_context(), "img-1")["name"] == "old"


def test_sync_refuses_a_partial_unversioned_schema(tmp_path):
    url = f"sqlite:///{tmp_path}/api.db"
    engine = cells.database(url).engine
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE volumes (id VARCHAR(36) PRIMARY KEY)"))
    with pytest.raises(migrate.SchemaNotSynced, match="some of the volume tables"):
        migrate.sync("volume", url)
    assert _tables(url) == {"volumes"}


@pytest.mark.parametrize("name", sorted(migrate.MODELS))
def test_revisions_build_what_the_models_describe(tmp_path, name):
    """Replaying the revisions (the path of an existing database) gives the same
    schema as the models, which a new database is made from."""
    engine = sa.create_engine(f"sqlite:///{tmp_path}/{name}.db")
    with engine.begin() as conn:
        command.upgrade(migrate._config(name, conn), "head")
    with engine.connect() as conn:
        assert migrate.current(conn, name) == migrate.head(name)
        ctx = MigrationContext.configure(conn, opts={"version_table": migrate.version_table(name)})
        assert compare_metadata(ctx, migrate.metadata(name)) == []
    engine.dispose()
