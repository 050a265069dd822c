"""The embedded volume service's own database (Cinder's volumes and attachments)."""
import datetime

import sqlalchemy as sa
from sqlalchemy import orm

from novella.db.timestamps import Timestamps



class Base(orm.DeclarativeBase):
    pass


class Volume(Timestamps, Base):
    __tablename__ = "volumes"

    id: orm.Mapped[str] = orm.mapped_column(sa.String(36), primary_key=True)
    name: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    description: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    size: orm.Mapped[int] = orm.mapped_column()
    status: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    attach_status: orm.Mapped[str] = orm.mapped_column(sa.String(255), default="detached")
    availability_zone: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    volume_type: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    project_id: orm.Mapped[str | None] = orm.mapped_column(sa.String(255), index=True)
    user_id: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    bootable: orm.Mapped[bool] = orm.mapped_column(default=False)
    multiattach: orm.Mapped[bool] = orm.mapped_column(default=False)
    # The image a bootable volume was created from (its id and properties).
    volume_image_metadata: orm.Mapped[dict | None] = orm.mapped_column(sa.JSON)
    # The user's key/value pairs (Cinder's volume metadata).
    volume_metadata: orm.Mapped[dict | None] = orm.mapped_column(sa.JSON)
    # Cinder's migration status: "migrating" (the source of a move), "target:<source id>"
    # (its destination), "success" / "error" once it ended; None: never moved.
    migration_status: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    deleted_at: orm.Mapped[datetime.datetime | None] = orm.mapped_column(sa.DateTime)
    deleted: orm.Mapped[bool] = orm.mapped_column(default=False)


class VolumeAttachment(Timestamps, Base):
    __tablename__ = "volume_attachment"

    id: orm.Mapped[str] = orm.mapped_column(sa.String(36), primary_key=True)
    volume_id: orm.Mapped[str] = orm.mapped_column(sa.ForeignKey("volumes.id"), index=True)
    instance_uuid: orm.Mapped[str | None] = orm.mapped_column(sa.String(36), index=True)
    attached_host: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    mountpoint: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    # reserved -> attaching -> attached; detached once deleted.
    attach_status: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    attach_mode: orm.Mapped[str] = orm.mapped_column(sa.String(36), default="rw")
    connector: orm.Mapped[dict | None] = orm.mapped_column(sa.JSON)
    connection_info: orm.Mapped[dict | None] = orm.mapped_column(sa.JSON)
    attach_time: orm.Mapped[datetime.datetime | None] = orm.mapped_column(sa.DateTime)
    detach_time: orm.Mapped[datetime.datetime | None] = orm.mapped_column(sa.DateTime)
    deleted: orm.Mapped[bool] = orm.mapped_column(default=False)


class Snapshot(Timestamps, Base):
    """A point-in-time copy of a volume (the simulated service keeps no data)."""
    __tablename__ = "snapshots"

    id: orm.Mapped[str] = orm.mapped_column(sa.String(36), primary_key=True)
    volume_id: orm.Mapped[str] = orm.mapped_column(sa.ForeignKey("volumes.id"), index=True)
    name: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    description: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    size: orm.Mapped[int] = orm.mapped_column()
    status: orm.Mapped[str] = orm.mapped_column(sa.String(255), default="available")
    project_id: orm.Mapped[str | None] = orm.mapped_column(sa.String(255), index=True)
    deleted_at: orm.Mapped[datetime.datetime | None] = orm.mapped_column(sa.DateTime)
    deleted: orm.Mapped[bool] = orm.mapped_column(default=False)


class Transfer(Timestamps, Base):
    """A volume offered to another project: whoever shows the auth key (kept only as
    its salted hash) takes the volume and its snapshots into their project."""
    __tablename__ = "transfers"

    id: orm.Mapped[str] = orm.mapped_column(sa.String(36), primary_key=True)
    volume_id: orm.Mapped[str] = orm.mapped_column(sa.ForeignKey("volumes.id"), index=True)
    name: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    salt: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    crypt_hash: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    # The project offering the volume (who sees and may cancel the transfer).
    project_id: orm.Mapped[str | None] = orm.mapped_column(sa.String(255), index=True)
    deleted_at: orm.Mapped[datetime.datetime | None] = orm.mapped_column(sa.DateTime)
    deleted: orm.Mapped[bool] = orm.mapped_column(default=False)


class Backup(Timestamps, Base):
    """A copy of a volume's data kept apart from it (with a volumes directory, a file
    under its ``backups/``), from which a volume is restored."""
    __tablename__ = "backups"

    id: orm.Mapped[str] = orm.mapped_column(sa.String(36), primary_key=True)
    volume_id: orm.Mapped[str] = orm.mapped_column(sa.String(36), index=True)
    name: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    description: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    size: orm.Mapped[int] = orm.mapped_column()
    status: orm.Mapped[str] = orm.mapped_column(sa.String(255), default="available")
    container: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    project_id: orm.Mapped[str | None] = orm.mapped_column(sa.String(255), index=True)
    deleted_at: orm.Mapped[datetime.datetime | None] = orm.mapped_column(sa.DateTime)
    deleted: orm.Mapped[bool] = orm.mapped_column(default=False)
