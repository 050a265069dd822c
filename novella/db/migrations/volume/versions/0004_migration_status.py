"""A volume's migration status (Cinder's ``migration_status``): ``migrating`` on the
volume being moved, ``target:<id>`` on its destination; ``success`` or ``error``
once the move ended.

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
    op.add_column("volumes", sa.Column("migration_status", sa.String(255), nullable=True))


def downgrade():
    op.drop_column("volumes", "migration_status")
