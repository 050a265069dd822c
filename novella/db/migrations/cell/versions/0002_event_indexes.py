"""Indexes for reading instance action events by action and by build host.

Loading an action's events and the scheduler's build-failure count per
host scanned the whole events table, which grows with every operation.

Revision ID: 0002
Revises: 0001
"""
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade():
    op.create_index("ix_instance_actions_events_action_id", "instance_actions_events",
                    ["action_id"])
    op.create_index("ix_instance_actions_events_event_host", "instance_actions_events",
                    ["event", "host"])


def downgrade():
    op.drop_index("ix_instance_actions_events_event_host", "instance_actions_events")
    op.drop_index("ix_instance_actions_events_action_id", "instance_actions_events")
