"""Alembic environment of the embedded image service's schema."""
from novella.db.migrations.env_common import run

run()
