"""Bring a database's schema to the newest revision with Alembic.

Each database kind ``<name>`` keeps its Alembic scripts in
``novella/db/migrations/<name>/`` and its table definitions in
``novella.db.<name>_models`` (a module exposing ``metadata``). A brand-new
empty database is created straight from the models and stamped at head,
which is much faster than replaying every revision; an existing one is
upgraded revision by revision.
"""
import importlib
import os

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from novella.db import engine as engine_mod

_HERE = os.path.dirname(os.path.abspath(__file__))


def _config(database_name, connection):
    cfg = Config()
    cfg.set_main_option("script_location",
                        os.path.join(_HERE, "migrations", database_name))
    cfg.attributes["connection"] = connection
    return cfg


def head(database_name):
    return ScriptDirectory.from_config(_config(database_name, None)).get_current_head()


def current(connection):
    return MigrationContext.configure(connection).get_current_revision()


def sync(database_name, url=None, engine=None):
    """Create or upgrade the schema of ``database_name`` at ``url``."""
    engine = engine or engine_mod.get_engine(url)
    models = importlib.import_module(f"novella.db.{database_name}_models")
    with engine.begin() as conn:
        cfg = _config(database_name, conn)
        if current(conn) is None and not sa.inspect(conn).get_table_names():
            models.metadata.create_all(conn)
            command.stamp(cfg, "head")
        else:
            command.upgrade(cfg, "head")
