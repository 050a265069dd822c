"""Alembic environment of the cell database."""
from novella.db.migrations.env_common import run

run()
