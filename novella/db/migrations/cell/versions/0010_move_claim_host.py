"""The host that counts an instance's move claim, indexed.

Every claim a host makes sums what its node has given out, including the
claims of moves to it (not yet applied) and from it (applied, until confirmed
or reverted), which live in ``instance_extra.migration_context``. With
``move_claim_host`` (the destination until the claim is applied, then the
source) those are an index lookup instead of a scan of the cell's
instance_extra. The contexts already there give it its value.

Revision ID: 0010
Revises: 0009
"""
import json

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade():
    for table in ("instance_extra", "shadow_instance_extra"):
        op.add_column(table, sa.Column("move_claim_host", sa.String(255), nullable=True))
    op.create_index("ix_instance_extra_move_claim_host", "instance_extra", ["move_claim_host"])
    extra = sa.table("instance_extra", sa.column("id"), sa.column("migration_context"),
                     sa.column("move_claim_host"))
    conn = op.get_bind()
    for row in conn.execute(sa.select(extra.c.id, extra.c.migration_context).where(
            extra.c.migration_context.is_not(None))).all():
        mc = json.loads(row.migration_context) if row.migration_context else {}
        host = mc.get("source_compute") if mc.get("applied") else mc.get("dest_compute")
        if host:
            conn.execute(sa.update(extra).where(extra.c.id == row.id)
                         .values(move_claim_host=host))


def downgrade():
    op.drop_index("ix_instance_extra_move_claim_host", "instance_extra")
    for table in ("shadow_instance_extra", "instance_extra"):
        with op.batch_alter_table(table) as batch:
            batch.drop_column("move_claim_host")
