"""Alembic environment of the placement database."""
from novella.db.migrations.env_common import run

run()
