"""External networks (router:external) and the floating IPs held from them.

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
    with op.batch_alter_table("networks") as batch:
        batch.add_column(sa.Column("external", sa.Boolean(), nullable=False,
                                   server_default=sa.false()))
    op.create_table(
        "floatingips",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("floating_network_id", sa.String(length=36), nullable=False),
        sa.Column("floating_ip_address", sa.String(length=64), nullable=False),
        sa.Column("project_id", sa.String(length=255), nullable=True),
        sa.Column("port_id", sa.String(length=36), nullable=True),
        sa.Column("fixed_ip_address", sa.String(length=64), nullable=True),
        sa.Column("description", sa.String(length=255), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(["floating_network_id"], ["networks.id"]),
        sa.ForeignKeyConstraint(["port_id"], ["ports.id"], ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("floating_network_id", "floating_ip_address"))
    op.create_index(op.f("ix_floatingips_project_id"), "floatingips", ["project_id"],
                    unique=False)
    op.create_index(op.f("ix_floatingips_port_id"), "floatingips", ["port_id"], unique=False)


def downgrade():
    op.drop_table("floatingips")
    with op.batch_alter_table("networks") as batch:
        batch.drop_column("external")
