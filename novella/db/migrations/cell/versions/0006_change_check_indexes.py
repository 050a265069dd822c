"""Indexes for the scheduler's per-cell change check.

The scheduler keeps each cell's host states until they change and learns
whether they did from one statement per cell, which reads the latest
``services.updated_at`` (a heartbeat, a disable) and the latest
``compute_nodes.deleted_at`` (a node gone). With these indexes each is one
index lookup instead of a scan of the cell's rows.

Revision ID: 0006
Revises: 0005
"""
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade():
    op.create_index("ix_services_updated_at", "services", ["updated_at"])
    op.create_index("ix_compute_nodes_deleted_at", "compute_nodes", ["deleted_at"])


def downgrade():
    op.drop_index("ix_compute_nodes_deleted_at", "compute_nodes")
    op.drop_index("ix_services_updated_at", "services")
