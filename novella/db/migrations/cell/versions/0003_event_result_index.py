"""Index for the latest failed build of a cell.

The scheduler keeps each cell's host states until they change; a new
failed build is one such change, found through this index without
scanning the cell's build events.

Revision ID: 0003
Revises: 0002
"""
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade():
    op.create_index("ix_instance_actions_events_event_result", "instance_actions_events",
                    ["event", "result"])


def downgrade():
    op.drop_index("ix_instance_actions_events_event_result", "instance_actions_events")
