"""Alembic environment of the embedded volume service's schema."""
from novella.db.migrations.env_common import run

run()
