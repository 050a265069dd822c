"""The tokens of the guests' remote consoles.

A compute host records each console URL's token (its hash only) with where
the guest's console listens; the console proxies use each once, before it
expires (``[consoleauth] token_ttl``). Tokens are short-lived, so the table
has no shadow: archiving never sees it.

Revision ID: 0012
Revises: 0011
"""
import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "console_auth_tokens",
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.Column("updated_at", sa.DateTime, nullable=True),
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("token_hash", sa.String(255), nullable=False),
        sa.Column("console_type", sa.String(255), nullable=False),
        sa.Column("instance_uuid", sa.String(36), nullable=False),
        sa.Column("host", sa.String(255), nullable=True),
        sa.Column("port", sa.Integer, nullable=True),
        sa.Column("unix_socket", sa.String(255), nullable=True),
        sa.Column("internal_access_path", sa.String(255), nullable=True),
        sa.Column("expires", sa.Integer, nullable=False),
        sa.UniqueConstraint("token_hash", name="uniq_console_auth_tokens0token_hash"))
    op.create_index("console_auth_tokens_instance_uuid_idx", "console_auth_tokens",
                    ["instance_uuid"])
    op.create_index("console_auth_tokens_expires_idx", "console_auth_tokens", ["expires"])


def downgrade():
    op.drop_table("console_auth_tokens")
