"""Shadow tables: where `novella manage db archive_deleted_rows` moves the
soft-deleted rows of the cell tables (and those of deleted instances).

Each ``shadow_<table>`` has its table's columns as they stand at this
revision and its primary key, nothing else.

Revision ID: 0005
Revises: 0004
"""
import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

# The archived tables as of this revision (novella/db/shadow.py may grow later).
TABLES = (
    "instances", "instance_metadata", "instance_extra", "instance_info_caches", "tags",
    "instance_system_metadata", "migrations", "block_device_mapping", "instance_actions",
    "instance_actions_events", "instance_faults", "services", "compute_nodes",
)


def upgrade():
    inspector = sa.inspect(op.get_bind())
    for name in TABLES:
        pk = set(inspector.get_pk_constraint(name)["constrained_columns"])
        columns = [sa.Column(c["name"], c["type"], nullable=c["nullable"] and c["name"] not in pk,
                             primary_key=c["name"] in pk, autoincrement=False)
                   for c in inspector.get_columns(name)]
        op.create_table("shadow_" + name, *columns)


def downgrade():
    for name in reversed(TABLES):
        op.drop_table("shadow_" + name)
