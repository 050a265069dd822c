"""What a subnet is created or updated with that was not kept: description, DNS
name servers, host routes, IPv6 modes; a network's description.

Revision ID: 0007
Revises: 0006
"""
import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("subnets") as batch:
        batch.add_column(sa.Column("description", sa.String(length=255), nullable=False,
                                   server_default=""))
        batch.add_column(sa.Column("dns_nameservers", sa.JSON(), nullable=False,
                                   server_default="[]"))
        batch.add_column(sa.Column("host_routes", sa.JSON(), nullable=False,
                                   server_default="[]"))
        batch.add_column(sa.Column("ipv6_ra_mode", sa.String(length=16), nullable=True))
        batch.add_column(sa.Column("ipv6_address_mode", sa.String(length=16), nullable=True))
    with op.batch_alter_table("networks") as batch:
        batch.add_column(sa.Column("description", sa.String(length=255), nullable=False,
                                   server_default=""))


def downgrade():
    with op.batch_alter_table("networks") as batch:
        batch.drop_column("description")
    with op.batch_alter_table("subnets") as batch:
        for name in ("ipv6_address_mode", "ipv6_ra_mode", "host_routes", "dns_nameservers",
                     "description"):
            batch.drop_column(name)
