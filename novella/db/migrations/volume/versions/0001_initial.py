"""Initial schema of the embedded volume service: volumes and volume attachments.

Revision ID: 0001
Revises:
"""
from alembic import op
import sqlalchemy as sa

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade():
    op.create_table('volumes',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('name', sa.String(length=255), nullable=True),
    sa.Column('description', sa.String(length=255), nullable=True),
    sa.Column('size', sa.Integer(), nullable=False),
    sa.Column('status', sa.String(length=255), nullable=False),
    sa.Column('attach_status', sa.String(length=255), nullable=False),
    sa.Column('availability_zone', sa.String(length=255), nullable=True),
    sa.Column('volume_type', sa.String(length=255), nullable=True),
    sa.Column('project_id', sa.String(length=255), nullable=True),
    sa.Column('user_id', sa.String(length=255), nullable=True),
    sa.Column('bootable', sa.Boolean(), nullable=False),
    sa.Column('multiattach', sa.Boolean(), nullable=False),
    sa.Column('volume_image_metadata', sa.JSON(), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=True),
    sa.Column('deleted_at', sa.DateTime(), nullable=True),
    sa.Column('deleted', sa.Boolean(), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index(op.f('ix_volumes_project_id'), 'volumes', ['project_id'], unique=False)
    op.create_table('volume_attachment',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('volume_id', sa.String(length=36), nullable=False),
    sa.Column('instance_uuid', sa.String(length=36), nullable=True),
    sa.Column('attached_host', sa.String(length=255), nullable=True),
    sa.Column('mountpoint', sa.String(length=255), nullable=True),
    sa.Column('attach_status', sa.String(length=255), nullable=False),
    sa.Column('attach_mode', sa.String(length=36), nullable=False),
    sa.Column('connector', sa.JSON(), nullable=True),
    sa.Column('connection_info', sa.JSON(), nullable=True),
    sa.Column('attach_time', sa.DateTime(), nullable=True),
    sa.Column('detach_time', sa.DateTime(), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=True),
    sa.Column('deleted', sa.Boolean(), nullable=False),
    sa.ForeignKeyConstraint(['volume_id'], ['volumes.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index(op.f('ix_volume_attachment_instance_uuid'), 'volume_attachment', ['instance_uuid'], unique=False)
    op.create_index(op.f('ix_volume_attachment_volume_id'), 'volume_attachment', ['volume_id'], unique=False)
