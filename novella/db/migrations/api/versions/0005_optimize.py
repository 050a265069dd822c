"""The drain's tables: audit templates, audits, action plans, actions
(novella/db/optimize_models.py).

Revision ID: 0005
Revises: 0004
"""
import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def _timestamps():
    return [sa.Column("created_at", sa.DateTime(), nullable=False),
            sa.Column("updated_at", sa.DateTime(), nullable=True)]


def upgrade():
    op.create_table(
        "optimize_audit_templates",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("uuid", sa.String(length=36), nullable=False),
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("description", sa.String(length=255), nullable=True),
        sa.Column("goal", sa.String(length=63), nullable=False),
        sa.Column("strategy", sa.String(length=63), nullable=True),
        sa.Column("scope", sa.Text(), nullable=False),
        *_timestamps(),
        sa.PrimaryKeyConstraint("id"), sa.UniqueConstraint("uuid"), sa.UniqueConstraint("name"))
    op.create_table(
        "optimize_audits",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("uuid", sa.String(length=36), nullable=False),
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("audit_type", sa.String(length=20), nullable=False),
        sa.Column("state", sa.String(length=20), nullable=False),
        sa.Column("goal", sa.String(length=63), nullable=False),
        sa.Column("strategy", sa.String(length=63), nullable=True),
        sa.Column("parameters", sa.Text(), nullable=False),
        sa.Column("scope", sa.Text(), nullable=False),
        sa.Column("auto_trigger", sa.Boolean(), nullable=False),
        sa.Column("status_message", sa.Text(), nullable=True),
        sa.Column("hostname", sa.String(length=255), nullable=True),
        sa.Column("context", sa.Text(), nullable=False),
        *_timestamps(),
        sa.PrimaryKeyConstraint("id"), sa.UniqueConstraint("uuid"))
    op.create_table(
        "optimize_action_plans",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("uuid", sa.String(length=36), nullable=False),
        sa.Column("audit_uuid", sa.String(length=36), nullable=False),
        sa.Column("strategy", sa.String(length=63), nullable=False),
        sa.Column("state", sa.String(length=20), nullable=False),
        sa.Column("efficacy_indicators", sa.Text(), nullable=False),
        sa.Column("global_efficacy", sa.Text(), nullable=False),
        sa.Column("status_message", sa.Text(), nullable=True),
        sa.Column("hostname", sa.String(length=255), nullable=True),
        sa.Column("lease_until", sa.DateTime(), nullable=True),
        sa.Column("parameters", sa.Text(), nullable=False),
        sa.Column("context", sa.Text(), nullable=False),
        *_timestamps(),
        sa.PrimaryKeyConstraint("id"), sa.UniqueConstraint("uuid"))
    op.create_index(op.f("ix_optimize_action_plans_audit_uuid"), "optimize_action_plans",
                    ["audit_uuid"])
    op.create_index(op.f("ix_optimize_action_plans_state"), "optimize_action_plans", ["state"])
    op.create_table(
        "optimize_actions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("uuid", sa.String(length=36), nullable=False),
        sa.Column("action_plan_uuid", sa.String(length=36), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("action_type", sa.String(length=63), nullable=False),
        sa.Column("state", sa.String(length=20), nullable=False),
        sa.Column("input_parameters", sa.Text(), nullable=False),
        sa.Column("parents", sa.Text(), nullable=False),
        sa.Column("description", sa.String(length=255), nullable=True),
        sa.Column("status_message", sa.Text(), nullable=True),
        sa.Column("progress", sa.Text(), nullable=False),
        *_timestamps(),
        sa.PrimaryKeyConstraint("id"), sa.UniqueConstraint("uuid"))
    op.create_index(op.f("ix_optimize_actions_action_plan_uuid"), "optimize_actions",
                    ["action_plan_uuid"])
