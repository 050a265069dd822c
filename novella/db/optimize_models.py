"""The drain's tables in the API database: audit templates, audits, action
plans and their actions (the Infrastructure Optimization API's resources).

Goals and strategies are not stored: they are the code's
(``novella/optimize/strategies.py``). JSON documents are text columns.
An action's ``progress`` is the applier's record of where its move stands
(written before each step acts: ``novella/optimize/applier.py``).
"""
import datetime

import sqlalchemy as sa
from sqlalchemy import orm

from novella.db.api_models import Base
from novella.db.timestamps import Timestamps


class AuditTemplate(Timestamps, Base):
    __tablename__ = "optimize_audit_templates"
    id: orm.Mapped[int] = orm.mapped_column(primary_key=True)
    uuid: orm.Mapped[str] = orm.mapped_column(sa.String(36), unique=True)
    name: orm.Mapped[str] = orm.mapped_column(sa.String(63), unique=True)
    description: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    goal: orm.Mapped[str] = orm.mapped_column(sa.String(63))
    strategy: orm.Mapped[str | None] = orm.mapped_column(sa.String(63))
    scope: orm.Mapped[str] = orm.mapped_column(sa.Text)


class Audit(Timestamps, Base):
    __tablename__ = "optimize_audits"
    id: orm.Mapped[int] = orm.mapped_column(primary_key=True)
    uuid: orm.Mapped[str] = orm.mapped_column(sa.String(36), unique=True)
    name: orm.Mapped[str] = orm.mapped_column(sa.String(63))
    audit_type: orm.Mapped[str] = orm.mapped_column(sa.String(20))
    state: orm.Mapped[str] = orm.mapped_column(sa.String(20))
    goal: orm.Mapped[str] = orm.mapped_column(sa.String(63))
    strategy: orm.Mapped[str | None] = orm.mapped_column(sa.String(63))
    parameters: orm.Mapped[str] = orm.mapped_column(sa.Text)
    scope: orm.Mapped[str] = orm.mapped_column(sa.Text)
    auto_trigger: orm.Mapped[bool] = orm.mapped_column(sa.Boolean, default=False)
    status_message: orm.Mapped[str | None] = orm.mapped_column(sa.Text)
    hostname: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    context: orm.Mapped[str] = orm.mapped_column(sa.Text)  # who asked: user, project, roles


class ActionPlan(Timestamps, Base):
    __tablename__ = "optimize_action_plans"
    id: orm.Mapped[int] = orm.mapped_column(primary_key=True)
    uuid: orm.Mapped[str] = orm.mapped_column(sa.String(36), unique=True)
    audit_uuid: orm.Mapped[str] = orm.mapped_column(sa.String(36), index=True)
    strategy: orm.Mapped[str] = orm.mapped_column(sa.String(63))
    state: orm.Mapped[str] = orm.mapped_column(sa.String(20), index=True)
    efficacy_indicators: orm.Mapped[str] = orm.mapped_column(sa.Text)
    global_efficacy: orm.Mapped[str] = orm.mapped_column(sa.Text)
    status_message: orm.Mapped[str | None] = orm.mapped_column(sa.Text)
    # the applier running it, until its lease runs out (then another takes it over)
    hostname: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    lease_until: orm.Mapped[datetime.datetime | None] = orm.mapped_column(sa.DateTime)
    parameters: orm.Mapped[str] = orm.mapped_column(sa.Text)  # parallelism, failure policy
    context: orm.Mapped[str] = orm.mapped_column(sa.Text)


class Action(Timestamps, Base):
    __tablename__ = "optimize_actions"
    id: orm.Mapped[int] = orm.mapped_column(primary_key=True)
    uuid: orm.Mapped[str] = orm.mapped_column(sa.String(36), unique=True)
    action_plan_uuid: orm.Mapped[str] = orm.mapped_column(sa.String(36), index=True)
    position: orm.Mapped[int] = orm.mapped_column(sa.Integer)
    action_type: orm.Mapped[str] = orm.mapped_column(sa.String(63))
    state: orm.Mapped[str] = orm.mapped_column(sa.String(20))
    input_parameters: orm.Mapped[str] = orm.mapped_column(sa.Text)
    parents: orm.Mapped[str] = orm.mapped_column(sa.Text)
    description: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    status_message: orm.Mapped[str | None] = orm.mapped_column(sa.Text)
    progress: orm.Mapped[str] = orm.mapped_column(sa.Text)
