"""A server's disk configuration (``OS-DCF:diskConfig``): AUTO is true, MANUAL false.

Revision ID: 0007
Revises: 0006
"""
import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade():
    for table in ("instances", "shadow_instances"):
        op.add_column(table, sa.Column("auto_disk_config", sa.Boolean(), nullable=True))


def downgrade():
    for table in ("shadow_instances", "instances"):
        with op.batch_alter_table(table) as batch:
            batch.drop_column("auto_disk_config")
