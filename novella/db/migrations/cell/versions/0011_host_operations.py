"""The operations a compute host runs on its servers, recorded while they run.

A host records before it acts what it is doing to a server that a restart
must finish (a volume swap, an interface attach or detach, a guest frozen
for a snapshot, a root volume to write an image on); it used to note these
in the server's system metadata. The notes already there become rows as
their host's service starts (novella/compute/recovery.py), so nothing is
moved here. The shadow table is where archiving moves the rows of deleted
servers.

Revision ID: 0011
Revises: 0010
"""
import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def _columns(shadow):
    """The table's columns; its shadow's have the same primary key and no other
    constraint."""
    return [sa.Column("created_at", sa.DateTime, nullable=False),
            sa.Column("updated_at", sa.DateTime, nullable=True),
            sa.Column("id", sa.Integer, primary_key=True, autoincrement=not shadow),
            sa.Column("instance_uuid", sa.String(36), nullable=False),
            sa.Column("kind", sa.String(64), nullable=False),
            sa.Column("steps", sa.Text, nullable=False),
            sa.Column("state", sa.Text, nullable=False)]


def upgrade():
    op.create_table("host_operations", *_columns(False),
                    sa.UniqueConstraint("instance_uuid", "kind",
                                        name="uniq_host_operations0instance_uuid0kind"))
    op.create_table("shadow_host_operations", *_columns(True))


def downgrade():
    op.drop_table("shadow_host_operations")
    op.drop_table("host_operations")
