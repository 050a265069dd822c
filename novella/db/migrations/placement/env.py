"""Alembic environment: run on the connection handed over by novella.db.migrate."""
from alembic import context

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("use novella.db.migrate.sync() to run these migrations")
context.configure(connection=connection, target_metadata=None)
with context.begin_transaction():
    context.run_migrations()
