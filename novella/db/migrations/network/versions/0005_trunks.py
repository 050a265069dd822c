"""Trunks: a parent port and the subports it carries.

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
        "trunks",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("description", sa.String(length=255), nullable=False),
        sa.Column("project_id", sa.String(length=255), nullable=True),
        sa.Column("port_id", sa.String(length=36), nullable=False),
        sa.Column("admin_state_up", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(["port_id"], ["ports.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("port_id"))
    op.create_index(op.f("ix_trunks_project_id"), "trunks", ["project_id"], unique=False)
    op.create_table(
        "subports",
        sa.Column("port_id", sa.String(length=36), nullable=False),
        sa.Column("trunk_id", sa.String(length=36), nullable=False),
        sa.Column("segmentation_type", sa.String(length=32), nullable=False),
        sa.Column("segmentation_id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["port_id"], ["ports.id"]),
        sa.ForeignKeyConstraint(["trunk_id"], ["trunks.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("port_id"),
        sa.UniqueConstraint("trunk_id", "segmentation_type", "segmentation_id"))
    op.create_index(op.f("ix_subports_trunk_id"), "subports", ["trunk_id"], unique=False)


def downgrade():
    op.drop_table("subports")
    op.drop_table("trunks")
