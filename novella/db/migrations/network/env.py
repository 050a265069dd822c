"""Alembic environment of the embedded network service's schema."""
from novella.db.migrations.env_common import run

run()
