"""Initial placement schema.

Revision ID: 0001
Revises:
"""
from alembic import op
import sqlalchemy as sa

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def _rp_fk(**kw):
    return sa.Column("provider_id", sa.Integer,
                     sa.ForeignKey("resource_providers.id"), primary_key=True, **kw)


def upgrade():
    op.create_table("placement_ledger",
                    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
                    sa.Column("version", sa.BigInteger, nullable=False))
    op.create_table("placement_changes",
                    sa.Column("version", sa.BigInteger, primary_key=True,
                              autoincrement=False),
                    sa.Column("providers", sa.Text, nullable=False),
                    sa.Column("consumers", sa.Text, nullable=False),
                    sa.Column("catalog", sa.Boolean, nullable=False))
    op.create_table("resource_classes",
                    sa.Column("name", sa.String(255), primary_key=True),
                    sa.Column("created_at", sa.DateTime, nullable=False),
                    sa.Column("updated_at", sa.DateTime))
    op.create_table("traits",
                    sa.Column("name", sa.String(255), primary_key=True),
                    sa.Column("created_at", sa.DateTime, nullable=False))
    op.create_table("resource_providers",
                    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
                    sa.Column("uuid", sa.String(36), nullable=False, unique=True),
                    sa.Column("name", sa.String(200), nullable=False, unique=True),
                    sa.Column("generation", sa.Integer, nullable=False),
                    sa.Column("parent_id", sa.Integer,
                              sa.ForeignKey("resource_providers.id")),
                    sa.Column("root_id", sa.Integer, nullable=False, index=True),
                    sa.Column("created_at", sa.DateTime, nullable=False),
                    sa.Column("updated_at", sa.DateTime))
    op.create_table("inventories", _rp_fk(),
                    sa.Column("resource_class", sa.String(255), primary_key=True),
                    *[sa.Column(c, sa.Integer, nullable=False) for c in
                      ("total", "reserved", "min_unit", "max_unit", "step_size")],
                    sa.Column("allocation_ratio", sa.Float, nullable=False))
    op.create_table("provider_traits", _rp_fk(),
                    sa.Column("trait", sa.String(255), primary_key=True, index=True))
    op.create_table("provider_aggregates", _rp_fk(),
                    sa.Column("aggregate", sa.String(36), primary_key=True, index=True))
    op.create_table("consumers",
                    sa.Column("uuid", sa.String(36), primary_key=True),
                    sa.Column("project_id", sa.String(255), nullable=False, index=True),
                    sa.Column("user_id", sa.String(255), nullable=False),
                    sa.Column("consumer_type", sa.String(255)),
                    sa.Column("generation", sa.Integer, nullable=False),
                    sa.Column("created_at", sa.DateTime, nullable=False),
                    sa.Column("updated_at", sa.DateTime))
    op.create_table("allocations",
                    sa.Column("consumer", sa.String(36), primary_key=True),
                    _rp_fk(index=True),
                    sa.Column("resource_class", sa.String(255), primary_key=True),
                    sa.Column("used", sa.Integer, nullable=False),
                    sa.Column("created_at", sa.DateTime, nullable=False))
