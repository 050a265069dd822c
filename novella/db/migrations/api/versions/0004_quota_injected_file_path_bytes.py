"""Quotas: the injected file path quota is the resource ``injected_file_path_bytes``
(the reference's name; it was stored under the option's name,
``injected_file_path_length``).

Revision ID: 0004
Revises: 0003
"""
import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_TABLES = ("quotas", "project_user_quotas", "quota_classes")


def _rename(old, new):
    for name in _TABLES:
        table = sa.table(name, sa.column("resource", sa.String))
        op.execute(table.update().where(table.c.resource == old).values(resource=new))


def upgrade():
    _rename("injected_file_path_length", "injected_file_path_bytes")
