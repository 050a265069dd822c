"""A live migration's progress as its hypervisor reports it while the copy runs
(the reference's ``memory_total/processed/remaining`` and ``disk_*`` figures,
bytes), shown by ``GET /servers/{id}/migrations``.

Revision ID: 0013
Revises: 0012
"""
import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

COLUMNS = ("memory_total", "memory_processed", "memory_remaining",
           "disk_total", "disk_processed", "disk_remaining")


def upgrade():
    for table in ("migrations", "shadow_migrations"):
        for name in COLUMNS:
            op.add_column(table, sa.Column(name, sa.BigInteger, nullable=True))


def downgrade():
    for table in ("shadow_migrations", "migrations"):
        with op.batch_alter_table(table) as batch:
            for name in COLUMNS:
                batch.drop_column(name)
