"""Instance system metadata: what the services note about an instance for
themselves, such as the image a shelved server is kept in.

Revision ID: 0004
Revises: 0003
"""
import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "instance_system_metadata",
        sa.Column("instance_uuid", sa.String(length=36), nullable=False),
        sa.Column("key", sa.String(length=255), nullable=False),
        sa.Column("value", sa.String(length=255), nullable=True),
        sa.PrimaryKeyConstraint("instance_uuid", "key"))


def downgrade():
    op.drop_table("instance_system_metadata")
