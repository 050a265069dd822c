"""The Alembic environment every database shares: run on the connection handed over
by novella.db.migrate (each database's env.py only calls ``run()``)."""
from alembic import context


def run():
    connection = context.config.attributes.get("connection")
    if connection is None:
        raise RuntimeError("use novella.db.migrate.sync() to run these migrations")
    context.configure(connection=connection, target_metadata=None,
                      version_table=context.config.attributes.get("version_table",
                                                                  "alembic_version"))
    with context.begin_transaction():
        context.run_migrations()
