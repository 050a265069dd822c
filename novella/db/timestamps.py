"""The clock and the timestamp columns the models of every database share."""
import datetime

import sqlalchemy as sa
from sqlalchemy import orm


def utcnow():
    """Now in UTC, without a zone (as every table stores it)."""
    return datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)


def isotime(value):
    """A stored timestamp as the image, network and volume APIs write it
    (``2026-11-25T18:38:15Z``); None stays None."""
    return value.isoformat(timespec="seconds") + "Z" if value else None


class Timestamps:
    """``created_at`` set on insert, ``updated_at`` on every update."""
    created_at: orm.Mapped[datetime.datetime] = orm.mapped_column(sa.DateTime, default=utcnow)
    updated_at: orm.Mapped[datetime.datetime | None] = orm.mapped_column(sa.DateTime,
                                                                         onupdate=utcnow)
