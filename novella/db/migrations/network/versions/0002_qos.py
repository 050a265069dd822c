"""QoS as the network API exposes it: policies gain description, shared, is_default
and a revision number; their rules move from a JSON list on the policy to rows of
their own (with ids, which a port's request group ids are derived from); the
JSON column is left empty.

Revision ID: 0002
Revises: 0001
"""
import datetime
import uuid

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

VALUE = {"minimum_bandwidth": "min_kbps", "minimum_packet_rate": "min_kpps",
         "bandwidth_limit": "max_kbps"}


def upgrade():
    op.create_table(
        "qos_rules",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("qos_policy_id", sa.String(length=36), nullable=False),
        sa.Column("type", sa.String(length=32), nullable=False),
        sa.Column("direction", sa.String(length=16), nullable=False),
        sa.Column("min_kbps", sa.BigInteger(), nullable=True),
        sa.Column("min_kpps", sa.BigInteger(), nullable=True),
        sa.Column("max_kbps", sa.BigInteger(), nullable=True),
        sa.Column("max_burst_kbps", sa.BigInteger(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(["qos_policy_id"], ["qos_policies.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("qos_policy_id", "type", "direction"))
    op.create_index(op.f("ix_qos_rules_qos_policy_id"), "qos_rules", ["qos_policy_id"],
                    unique=False)
    op.add_column("qos_policies", sa.Column("description", sa.String(length=255),
                                            nullable=False, server_default=""))
    op.add_column("qos_policies", sa.Column("shared", sa.Boolean(), nullable=False,
                                            server_default=sa.false()))
    op.add_column("qos_policies", sa.Column("is_default", sa.Boolean(), nullable=False,
                                            server_default=sa.false()))
    op.add_column("qos_policies", sa.Column("revision_number", sa.Integer(), nullable=False,
                                            server_default="1"))
    op.create_index(op.f("ix_qos_policies_project_id"), "qos_policies", ["project_id"],
                    unique=False)

    # The rules each policy kept as JSON become rows, in their order.
    conn = op.get_bind()
    policies = sa.table("qos_policies", sa.column("id"), sa.column("rules", sa.JSON),
                        sa.column("created_at", sa.DateTime))
    rules = sa.table("qos_rules", *(sa.column(c) for c in (
        "id", "qos_policy_id", "type", "direction", "min_kbps", "min_kpps", "max_kbps",
        "max_burst_kbps")), sa.column("created_at", sa.DateTime))
    for policy_id, kept, created in conn.execute(
            sa.select(policies.c.id, policies.c.rules, policies.c.created_at)).all():
        for i, r in enumerate(kept or []):
            column = VALUE.get(r.get("type"))
            if column is None:
                continue
            conn.execute(rules.insert().values(
                id=str(uuid.uuid4()), qos_policy_id=policy_id, type=r["type"],
                direction=r.get("direction") or "egress",
                **{column: r.get(column)}, max_burst_kbps=r.get("max_burst_kbps"),
                created_at=created + datetime.timedelta(microseconds=i)))  # keeps the order

    # The JSON column stays (emptied): rebuilding the table, as SQLite would need to
    # drop it, would cascade to the rules just written.
    conn.execute(policies.update().values(rules=[]))


def downgrade():
    op.drop_index(op.f("ix_qos_policies_project_id"), table_name="qos_policies")
    with op.batch_alter_table("qos_policies") as batch:
        for column in ("revision_number", "is_default", "shared", "description"):
            batch.drop_column(column)
    op.drop_index(op.f("ix_qos_rules_qos_policy_id"), table_name="qos_rules")
    op.drop_table("qos_rules")
