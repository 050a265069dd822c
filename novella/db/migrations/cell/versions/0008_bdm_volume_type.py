"""A block device mapping's volume type (2.67): the type of the volume the host
makes for it.

Revision ID: 0008
Revises: 0007
"""
import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade():
    for table in ("block_device_mapping", "shadow_block_device_mapping"):
        op.add_column(table, sa.Column("volume_type", sa.String(255), nullable=True))


def downgrade():
    for table in ("shadow_block_device_mapping", "block_device_mapping"):
        with op.batch_alter_table(table) as batch:
            batch.drop_column("volume_type")
