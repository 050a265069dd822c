"""Alembic environment of the api database."""
from novella.db.migrations.env_common import run

run()
