"""Quotas: project, per-user and class limits (os-quota-sets, os-quota-class-sets).

Revision ID: 0003
Revises: 0002
"""
import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def _limit_table(name, keys, constraint):
    op.create_table(
        name,
        sa.Column("id", sa.Integer(), nullable=False),
        *[sa.Column(key, sa.String(length=255), nullable=False) for key in keys],
        sa.Column("resource", sa.String(length=255), nullable=False),
        sa.Column("hard_limit", sa.Integer(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint(*constraint[1], name=constraint[0]),
    )


def upgrade():
    _limit_table("quotas", ["project_id"],
                 ("uniq_quotas0project_id0resource", ["project_id", "resource"]))
    _limit_table("project_user_quotas", ["project_id", "user_id"],
                 ("uniq_project_user_quotas0user_id0project_id0resource",
                  ["user_id", "project_id", "resource"]))
    _limit_table("quota_classes", ["class_name"],
                 ("uniq_quota_classes0class_name0resource", ["class_name", "resource"]))
