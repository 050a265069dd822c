"""A port's attributes kept as given (description, allowed_address_pairs, dns_name,
extra_dhcp_opts, propagate_uplink_status).

Revision ID: 0008
Revises: 0007
"""
import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("ports") as batch:
        batch.add_column(sa.Column("kept", sa.JSON(), nullable=False, server_default="{}"))


def downgrade():
    with op.batch_alter_table("ports") as batch:
        batch.drop_column("kept")
