"""The embedded image service's own database (Glance's image records)."""
import datetime

import sqlalchemy as sa
from sqlalchemy import orm

from novella.db.timestamps import Timestamps



class Base(orm.DeclarativeBase):
    pass


class Image(Timestamps, Base):
    __tablename__ = "images"

    id: orm.Mapped[str] = orm.mapped_column(sa.String(36), primary_key=True)
    name: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    status: orm.Mapped[str] = orm.mapped_column(sa.String(30), default="queued")
    visibility: orm.Mapped[str] = orm.mapped_column(sa.String(20), default="shared")
    owner: orm.Mapped[str | None] = orm.mapped_column(sa.String(255), index=True)
    disk_format: orm.Mapped[str | None] = orm.mapped_column(sa.String(20))
    container_format: orm.Mapped[str | None] = orm.mapped_column(sa.String(20))
    size: orm.Mapped[int | None] = orm.mapped_column(sa.BigInteger)
    checksum: orm.Mapped[str | None] = orm.mapped_column(sa.String(32))
    os_hash_algo: orm.Mapped[str | None] = orm.mapped_column(sa.String(64))
    os_hash_value: orm.Mapped[str | None] = orm.mapped_column(sa.String(128))
    min_disk: orm.Mapped[int] = orm.mapped_column(default=0)
    min_ram: orm.Mapped[int] = orm.mapped_column(default=0)
    protected: orm.Mapped[bool] = orm.mapped_column(default=False)
    # Free-form image properties (hw_*, os_*, image_type, instance_uuid, ...).
    properties: orm.Mapped[dict] = orm.mapped_column(sa.JSON, default=dict)
    deleted_at: orm.Mapped[datetime.datetime | None] = orm.mapped_column(sa.DateTime)
    deleted: orm.Mapped[bool] = orm.mapped_column(default=False)
