"""A volume's own metadata (the user's key/value pairs).

Revision ID: 0002
Revises: 0001
"""
import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade():
    op.add_column("volumes", sa.Column("volume_metadata", sa.JSON(), nullable=True))


def downgrade():
    op.drop_column("volumes", "volume_metadata")
