"""The clock and the timestamp columns the models of every database share."""
import datetime

import sqlalchemy as sa
from sqlalchemy import orm


def utcnow():
    """Now in UTC, without a zone (as every table stores it)."""
    return datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)


class Timestamps:
    """``created_at`` set on insert, ``updated_at`` on every update."""
    created_at: orm.Mapped[datetime.datetime] = orm.mapped_column(sa.DateTime, default=utcnow)
    updated_at: orm.Mapped[datetime.datetime | None] = orm.mapped_column(sa.DateTime,
                                                                         onupdate=utcnow)
