"""Security groups, their rules and the ports they apply to.

Revision ID: 0003
Revises: 0002
"""
import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "securitygroups",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("description", sa.String(length=255), nullable=False),
        sa.Column("project_id", sa.String(length=255), nullable=True),
        sa.Column("revision_number", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=True),
        sa.PrimaryKeyConstraint("id"))
    op.create_index(op.f("ix_securitygroups_project_id"), "securitygroups", ["project_id"],
                    unique=False)
    op.create_table(
        "securitygrouprules",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("security_group_id", sa.String(length=36), nullable=False),
        sa.Column("remote_group_id", sa.String(length=36), nullable=True),
        sa.Column("project_id", sa.String(length=255), nullable=True),
        sa.Column("direction", sa.String(length=16), nullable=False),
        sa.Column("ethertype", sa.String(length=40), nullable=False),
        sa.Column("protocol", sa.String(length=40), nullable=True),
        sa.Column("port_range_min", sa.Integer(), nullable=True),
        sa.Column("port_range_max", sa.Integer(), nullable=True),
        sa.Column("remote_ip_prefix", sa.String(length=255), nullable=True),
        sa.Column("description", sa.String(length=255), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(["remote_group_id"], ["securitygroups.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["security_group_id"], ["securitygroups.id"],
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"))
    op.create_index(op.f("ix_securitygrouprules_security_group_id"), "securitygrouprules",
                    ["security_group_id"], unique=False)
    op.create_table(
        "securitygroupportbindings",
        sa.Column("port_id", sa.String(length=36), nullable=False),
        sa.Column("security_group_id", sa.String(length=36), nullable=False),
        sa.ForeignKeyConstraint(["port_id"], ["ports.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["security_group_id"], ["securitygroups.id"]),
        sa.PrimaryKeyConstraint("port_id", "security_group_id"))
    op.create_index(op.f("ix_securitygroupportbindings_security_group_id"),
                    "securitygroupportbindings", ["security_group_id"], unique=False)


def downgrade():
    op.drop_table("securitygroupportbindings")
    op.drop_table("securitygrouprules")
    op.drop_table("securitygroups")
