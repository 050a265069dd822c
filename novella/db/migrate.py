"""Bring a database's schema to the newest revision with Alembic.

Each schema ``<name>`` keeps its Alembic scripts in
``novella/db/migrations/<name>/`` and its table definitions in the module
named in ``MODELS`` (exposing ``metadata`` or a declarative ``Base``). A
database holding none of a schema's tables gets them straight from the
models and is stamped at head, which is much faster than replaying every
revision; an existing one is upgraded revision by revision; one already at
head is left alone without loading Alembic's machinery.

The embedded image, network and volume services' schemas usually live in the
API database beside its own tables, so each keeps its revision in a version
table of its own (``alembic_version_<name>``); the API, cell and placement
databases use Alembic's ``alembic_version``.
"""
import functools
import importlib
import os

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory

from novella.db import engine as engine_mod

_HERE = os.path.dirname(os.path.abspath(__file__))

MODELS = {
    "api": "novella.db.api_models",
    "cell": "novella.db.cell_models",
    "placement": "novella.db.placement_models",
    "image": "novella.image.models",
    "network": "novella.network.models",
    "volume": "novella.volume.models",
}
# Synced by `novella manage api_db sync`, into the API database unless
# configured elsewhere ([image_service] connection, ...).
EMBEDDED = ("image", "network", "volume")


class SchemaNotSynced(RuntimeError):
    """A service was started on a database whose schema is missing or out of date."""


def version_table(database_name):
    return f"alembic_version_{database_name}" if database_name in EMBEDDED else "alembic_version"


# Modules whose tables share another database's metadata: the drain's tables are
# in the API database.
SHARING = {"api": ("novella.db.optimize_models",)}


def metadata(database_name):
    models = importlib.import_module(MODELS[database_name])
    for name in SHARING.get(database_name, ()):
        importlib.import_module(name)  # its tables join the metadata it builds on
    return getattr(models, "metadata", None) or models.Base.metadata


def _config(database_name, connection):
    cfg = Config()
    cfg.set_main_option("script_location",
                        os.path.join(_HERE, "migrations", database_name))
    cfg.attributes["connection"] = connection
    cfg.attributes["version_table"] = version_table(database_name)
    return cfg


@functools.cache
def _scripts(database_name):
    return ScriptDirectory.from_config(_config(database_name, None))


def head(database_name):
    return _scripts(database_name).get_current_head()


def current(connection, database_name=None):
    """The revision ``connection``'s database is at for ``database_name`` (None: unversioned).

    Read straight from the version table: one query, none of Alembic's set-up
    (or its log lines) in every service's start."""
    table = version_table(database_name)
    if not sa.inspect(connection).has_table(table):
        return None
    return connection.execute(sa.text(f"SELECT version_num FROM {table}")).scalar_one_or_none()


def _hide_password(url):
    return sa.engine.make_url(url).render_as_string(hide_password=True)


def sync(database_name, url=None, engine=None):
    """Create or upgrade the schema of ``database_name`` at ``url``."""
    engine = engine or engine_mod.get_engine(url)
    tables = metadata(database_name)
    with engine.begin() as conn:
        rev = current(conn, database_name)
        if rev is not None and rev == head(database_name):
            return
        cfg = _config(database_name, conn)
        if rev is None:
            present = set(sa.inspect(conn).get_table_names()) & set(tables.tables)
            if not present:
                tables.create_all(conn)
                command.stamp(cfg, "head")
                return
            if database_name not in EMBEDDED or present != set(tables.tables):
                raise SchemaNotSynced(
                    f"{_hide_password(engine.url)} holds some of the {database_name} tables "
                    f"({', '.join(sorted(present))}) but no {version_table(database_name)}; "
                    "it was not made by this program's migrations")
            # The embedded services created their own tables before their schemas
            # were versioned: those match their first revision.
            command.stamp(cfg, _scripts(database_name).get_base())
        command.upgrade(cfg, "head")


def require(database_name, engine):
    """Raise SchemaNotSynced unless the database of ``engine`` holds the newest
    ``database_name`` schema; creates nothing."""
    with engine.connect() as conn:
        rev = current(conn, database_name)
    if rev != head(database_name):
        found = f"revision {rev}" if rev else "no version of it"
        raise SchemaNotSynced(
            f"the {database_name} schema in {_hide_password(engine.url)} is not at revision "
            f"{head(database_name)} (found {found}): run `novella manage api_db sync`")
