"""Volume transfers between projects (Cinder's os-volume-transfer).

Revision ID: 0005
Revises: 0004
"""
import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "transfers",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("volume_id", sa.String(length=36), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=True),
        sa.Column("salt", sa.String(length=255), nullable=False),
        sa.Column("crypt_hash", sa.String(length=255), nullable=False),
        sa.Column("project_id", sa.String(length=255), nullable=True),
        sa.Column("deleted_at", sa.DateTime(), nullable=True),
        sa.Column("deleted", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(["volume_id"], ["volumes.id"]),
        sa.PrimaryKeyConstraint("id"))
    op.create_index(op.f("ix_transfers_volume_id"), "transfers", ["volume_id"], unique=False)
    op.create_index(op.f("ix_transfers_project_id"), "transfers", ["project_id"], unique=False)


def downgrade():
    op.drop_table("transfers")
