"""Initial schema of the embedded image service: images.

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
    op.create_table('images',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('name', sa.String(length=255), nullable=True),
    sa.Column('status', sa.String(length=30), nullable=False),
    sa.Column('visibility', sa.String(length=20), nullable=False),
    sa.Column('owner', sa.String(length=255), nullable=True),
    sa.Column('disk_format', sa.String(length=20), nullable=True),
    sa.Column('container_format', sa.String(length=20), nullable=True),
    sa.Column('size', sa.BigInteger(), nullable=True),
    sa.Column('checksum', sa.String(length=32), nullable=True),
    sa.Column('os_hash_algo', sa.String(length=64), nullable=True),
    sa.Column('os_hash_value', sa.String(length=128), nullable=True),
    sa.Column('min_disk', sa.Integer(), nullable=False),
    sa.Column('min_ram', sa.Integer(), nullable=False),
    sa.Column('protected', sa.Boolean(), nullable=False),
    sa.Column('properties', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=True),
    sa.Column('deleted_at', sa.DateTime(), nullable=True),
    sa.Column('deleted', sa.Boolean(), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index(op.f('ix_images_owner'), 'images', ['owner'], unique=False)
