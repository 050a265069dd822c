"""Routers, subnet pools and auto-allocated topologies: the default external network
(networks.is_default), the pool a subnet was cut from (subnets.subnetpool_id).

Revision ID: 0006
Revises: 0005
"""
import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "subnetpools",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("description", sa.String(length=255), nullable=False),
        sa.Column("project_id", sa.String(length=255), nullable=True),
        sa.Column("ip_version", sa.Integer(), nullable=False),
        sa.Column("prefixes", sa.JSON(), nullable=False),
        sa.Column("default_prefixlen", sa.Integer(), nullable=False),
        sa.Column("min_prefixlen", sa.Integer(), nullable=False),
        sa.Column("max_prefixlen", sa.Integer(), nullable=False),
        sa.Column("shared", sa.Boolean(), nullable=False),
        sa.Column("is_default", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=True),
        sa.PrimaryKeyConstraint("id"))
    op.create_index(op.f("ix_subnetpools_project_id"), "subnetpools", ["project_id"],
                    unique=False)
    with op.batch_alter_table("networks") as batch:
        batch.add_column(sa.Column("is_default", sa.Boolean(), nullable=False,
                                   server_default=sa.false()))
    with op.batch_alter_table("subnets") as batch:
        batch.add_column(sa.Column("subnetpool_id", sa.String(length=36), nullable=True))
        batch.create_foreign_key("fk_subnets_subnetpool_id", "subnetpools",
                                 ["subnetpool_id"], ["id"])
        batch.create_index(batch.f("ix_subnets_subnetpool_id"), ["subnetpool_id"], unique=False)
    op.create_table(
        "routers",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("description", sa.String(length=255), nullable=False),
        sa.Column("project_id", sa.String(length=255), nullable=True),
        sa.Column("admin_state_up", sa.Boolean(), nullable=False),
        sa.Column("gw_port_id", sa.String(length=36), nullable=True),
        sa.Column("enable_snat", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(["gw_port_id"], ["ports.id"]),
        sa.PrimaryKeyConstraint("id"))
    op.create_index(op.f("ix_routers_project_id"), "routers", ["project_id"], unique=False)
    op.create_table(
        "routerports",
        sa.Column("router_id", sa.String(length=36), nullable=False),
        sa.Column("port_id", sa.String(length=36), nullable=False),
        sa.Column("port_type", sa.String(length=255), nullable=False),
        sa.ForeignKeyConstraint(["router_id"], ["routers.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["port_id"], ["ports.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("router_id", "port_id"),
        sa.UniqueConstraint("port_id"))
    op.create_table(
        "auto_allocated_topologies",
        sa.Column("project_id", sa.String(length=255), nullable=False),
        sa.Column("network_id", sa.String(length=36), nullable=False),
        sa.Column("router_id", sa.String(length=36), nullable=True),
        sa.ForeignKeyConstraint(["network_id"], ["networks.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["router_id"], ["routers.id"], ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("project_id"),
        sa.UniqueConstraint("network_id"))


def downgrade():
    op.drop_table("auto_allocated_topologies")
    op.drop_table("routerports")
    op.drop_table("routers")
    with op.batch_alter_table("subnets") as batch:
        batch.drop_index(batch.f("ix_subnets_subnetpool_id"))
        batch.drop_constraint("fk_subnets_subnetpool_id", type_="foreignkey")
        batch.drop_column("subnetpool_id")
    with op.batch_alter_table("networks") as batch:
        batch.drop_column("is_default")
    op.drop_table("subnetpools")
