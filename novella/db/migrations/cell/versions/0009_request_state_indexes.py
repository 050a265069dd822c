"""Indexes for the conductors' periodic look for requests no conductor began.

Every recovery period each conductor reads the servers in a task state the
API sets when it accepts a request and the migrations in a status it gives
one; nearly every row has neither, so with these indexes each is an index
lookup instead of a scan of the cell's servers and migrations.

Revision ID: 0009
Revises: 0008
"""
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade():
    op.create_index("ix_instances_task_state", "instances", ["task_state"])
    op.create_index("ix_migrations_status", "migrations", ["status"])


def downgrade():
    op.drop_index("ix_migrations_status", "migrations")
    op.drop_index("ix_instances_task_state", "instances")
