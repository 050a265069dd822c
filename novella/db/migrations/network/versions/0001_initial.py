"""Initial schema of the embedded network service: networks, subnets, ports, IP allocations, port bindings and QoS policies.

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
    op.create_table('qos_policies',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('name', sa.String(length=255), nullable=True),
    sa.Column('project_id', sa.String(length=255), nullable=True),
    sa.Column('rules', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=True),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_table('networks',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('name', sa.String(length=255), nullable=True),
    sa.Column('project_id', sa.String(length=255), nullable=True),
    sa.Column('shared', sa.Boolean(), nullable=False),
    sa.Column('admin_state_up', sa.Boolean(), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('mtu', sa.Integer(), nullable=False),
    sa.Column('network_type', sa.String(length=32), nullable=False),
    sa.Column('physical_network', sa.String(length=64), nullable=True),
    sa.Column('qos_policy_id', sa.String(length=36), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=True),
    sa.ForeignKeyConstraint(['qos_policy_id'], ['qos_policies.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_table('ports',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('network_id', sa.String(length=36), nullable=False),
    sa.Column('name', sa.String(length=255), nullable=True),
    sa.Column('project_id', sa.String(length=255), nullable=True),
    sa.Column('mac_address', sa.String(length=32), nullable=False),
    sa.Column('admin_state_up', sa.Boolean(), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('device_id', sa.String(length=255), nullable=False),
    sa.Column('device_owner', sa.String(length=255), nullable=False),
    sa.Column('vnic_type', sa.String(length=64), nullable=False),
    sa.Column('qos_policy_id', sa.String(length=36), nullable=True),
    sa.Column('resource_request', sa.JSON(), nullable=True),
    sa.Column('created_for_instance', sa.Boolean(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=True),
    sa.ForeignKeyConstraint(['network_id'], ['networks.id'], ),
    sa.ForeignKeyConstraint(['qos_policy_id'], ['qos_policies.id'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('network_id', 'mac_address')
    )
    op.create_index(op.f('ix_ports_device_id'), 'ports', ['device_id'], unique=False)
    op.create_index(op.f('ix_ports_network_id'), 'ports', ['network_id'], unique=False)
    op.create_index(op.f('ix_ports_project_id'), 'ports', ['project_id'], unique=False)
    op.create_table('subnets',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('network_id', sa.String(length=36), nullable=False),
    sa.Column('name', sa.String(length=255), nullable=True),
    sa.Column('project_id', sa.String(length=255), nullable=True),
    sa.Column('cidr', sa.String(length=64), nullable=False),
    sa.Column('ip_version', sa.Integer(), nullable=False),
    sa.Column('gateway_ip', sa.String(length=64), nullable=True),
    sa.Column('enable_dhcp', sa.Boolean(), nullable=False),
    sa.Column('allocation_pools', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=True),
    sa.ForeignKeyConstraint(['network_id'], ['networks.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index(op.f('ix_subnets_network_id'), 'subnets', ['network_id'], unique=False)
    op.create_table('ipallocations',
    sa.Column('subnet_id', sa.String(length=36), nullable=False),
    sa.Column('ip_address', sa.String(length=64), nullable=False),
    sa.Column('port_id', sa.String(length=36), nullable=False),
    sa.Column('network_id', sa.String(length=36), nullable=False),
    sa.ForeignKeyConstraint(['port_id'], ['ports.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['subnet_id'], ['subnets.id'], ),
    sa.PrimaryKeyConstraint('subnet_id', 'ip_address')
    )
    op.create_index(op.f('ix_ipallocations_port_id'), 'ipallocations', ['port_id'], unique=False)
    op.create_table('ml2_port_bindings',
    sa.Column('port_id', sa.String(length=36), nullable=False),
    sa.Column('host', sa.String(length=255), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('vif_type', sa.String(length=64), nullable=False),
    sa.Column('vif_details', sa.JSON(), nullable=False),
    sa.Column('vnic_type', sa.String(length=64), nullable=False),
    sa.Column('profile', sa.JSON(), nullable=False),
    sa.ForeignKeyConstraint(['port_id'], ['ports.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('port_id', 'host')
    )
