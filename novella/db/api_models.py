"""The API database: what is global to the deployment (cells v2 model).

Cell mappings, host and instance mappings, flavors, request specs, build
requests, server groups, aggregates and key pairs. JSON documents (request
specs, build requests) are stored as text so every backend treats them alike.
"""

import datetime

import sqlalchemy as sa
from sqlalchemy import orm

from novella.db.timestamps import Timestamps



class Base(orm.DeclarativeBase):
    pass



class CellMapping(Timestamps, Base):
    __tablename__ = "cell_mappings"
    id: orm.Mapped[int] = orm.mapped_column(primary_key=True)
    uuid: orm.Mapped[str] = orm.mapped_column(sa.String(36), unique=True)
    name: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    transport_url: orm.Mapped[str] = orm.mapped_column(sa.Text)
    database_connection: orm.Mapped[str] = orm.mapped_column(sa.Text)
    disabled: orm.Mapped[bool] = orm.mapped_column(default=False)


class HostMapping(Timestamps, Base):
    __tablename__ = "host_mappings"
    id: orm.Mapped[int] = orm.mapped_column(primary_key=True)
    cell_id: orm.Mapped[int] = orm.mapped_column(sa.ForeignKey("cell_mappings.id"))
    host: orm.Mapped[str] = orm.mapped_column(sa.String(255), unique=True)


class InstanceMapping(Timestamps, Base):
    """Where a server lives: the authority for which cell holds it."""
    __tablename__ = "instance_mappings"
    id: orm.Mapped[int] = orm.mapped_column(primary_key=True)
    instance_uuid: orm.Mapped[str] = orm.mapped_column(sa.String(36), unique=True)
    cell_id: orm.Mapped[int | None] = orm.mapped_column(sa.ForeignKey("cell_mappings.id"))
    project_id: orm.Mapped[str] = orm.mapped_column(sa.String(255), index=True)
    user_id: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    queued_for_delete: orm.Mapped[bool] = orm.mapped_column(default=False)


class Flavor(Timestamps, Base):
    __tablename__ = "flavors"
    id: orm.Mapped[int] = orm.mapped_column(primary_key=True)
    flavorid: orm.Mapped[str] = orm.mapped_column(sa.String(255), unique=True)
    name: orm.Mapped[str] = orm.mapped_column(sa.String(255), unique=True)
    memory_mb: orm.Mapped[int]
    vcpus: orm.Mapped[int]
    root_gb: orm.Mapped[int] = orm.mapped_column(default=0)
    ephemeral_gb: orm.Mapped[int] = orm.mapped_column(default=0)
    swap: orm.Mapped[int] = orm.mapped_column(default=0)
    rxtx_factor: orm.Mapped[float] = orm.mapped_column(default=1.0)
    vcpu_weight: orm.Mapped[int | None]
    disabled: orm.Mapped[bool] = orm.mapped_column(default=False)
    is_public: orm.Mapped[bool] = orm.mapped_column(default=True)
    description: orm.Mapped[str | None] = orm.mapped_column(sa.Text)
    extra_specs: orm.Mapped[list["FlavorExtraSpec"]] = orm.relationship(
        cascade="all, delete-orphan", lazy="selectin")
    projects: orm.Mapped[list["FlavorProject"]] = orm.relationship(
        cascade="all, delete-orphan", lazy="selectin")


class FlavorExtraSpec(Base):
    __tablename__ = "flavor_extra_specs"
    __table_args__ = (sa.UniqueConstraint("flavor_id", "key"),)
    id: orm.Mapped[int] = orm.mapped_column(primary_key=True)
    flavor_id: orm.Mapped[int] = orm.mapped_column(sa.ForeignKey("flavors.id", ondelete="CASCADE"))
    key: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    value: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))


class FlavorProject(Base):
    __tablename__ = "flavor_projects"
    __table_args__ = (sa.UniqueConstraint("flavor_id", "project_id"),)
    id: orm.Mapped[int] = orm.mapped_column(primary_key=True)
    flavor_id: orm.Mapped[int] = orm.mapped_column(sa.ForeignKey("flavors.id", ondelete="CASCADE"))
    project_id: orm.Mapped[str] = orm.mapped_column(sa.String(255))


class RequestSpec(Timestamps, Base):
    """What the scheduler was asked for a server; kept for every later move."""
    __tablename__ = "request_specs"
    id: orm.Mapped[int] = orm.mapped_column(primary_key=True)
    instance_uuid: orm.Mapped[str] = orm.mapped_column(sa.String(36), unique=True)
    spec: orm.Mapped[str] = orm.mapped_column(sa.Text)  # JSON document


class Operation(Timestamps, Base):
    """One conductor operation in progress or ended: its steps, its state and its owner.

    ``steps`` is the JSON list ``[[step name, status], ...]`` (status
    started, done, undoing or undone), written before each step acts and
    after it; ``state`` what the steps handed each other, as of the last
    write; ``owner`` the conductor running it until ``lease_until``.
    """
    __tablename__ = "operations"
    __table_args__ = (sa.Index("operations_status_lease_idx", "status", "lease_until"),)
    id: orm.Mapped[int] = orm.mapped_column(primary_key=True)
    uuid: orm.Mapped[str] = orm.mapped_column(sa.String(36), unique=True)
    kind: orm.Mapped[str] = orm.mapped_column(sa.String(36))
    instance_uuid: orm.Mapped[str] = orm.mapped_column(sa.String(36), index=True)
    owner: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    lease_until: orm.Mapped[datetime.datetime | None] = orm.mapped_column(sa.DateTime)
    status: orm.Mapped[str] = orm.mapped_column(sa.String(16))  # running, done, failed, undone
    steps: orm.Mapped[str] = orm.mapped_column(sa.Text)
    state: orm.Mapped[str] = orm.mapped_column(sa.Text)
    context: orm.Mapped[str] = orm.mapped_column(sa.Text)


class Quota(Base):
    """A project's own limit of one resource (os-quota-sets)."""
    __tablename__ = "quotas"
    __table_args__ = (sa.UniqueConstraint("project_id", "resource",
                                          name="uniq_quotas0project_id0resource"),)
    id: orm.Mapped[int] = orm.mapped_column(primary_key=True)
    project_id: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    resource: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    hard_limit: orm.Mapped[int | None] = orm.mapped_column(sa.Integer)


class ProjectUserQuota(Base):
    """One user's limit of one resource within a project."""
    __tablename__ = "project_user_quotas"
    __table_args__ = (sa.UniqueConstraint(
        "user_id", "project_id", "resource",
        name="uniq_project_user_quotas0user_id0project_id0resource"),)
    id: orm.Mapped[int] = orm.mapped_column(primary_key=True)
    project_id: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    user_id: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    resource: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    hard_limit: orm.Mapped[int | None] = orm.mapped_column(sa.Integer)


class QuotaClass(Base):
    """A quota class's limit of one resource (os-quota-class-sets; 'default')."""
    __tablename__ = "quota_classes"
    __table_args__ = (sa.UniqueConstraint("class_name", "resource",
                                          name="uniq_quota_classes0class_name0resource"),)
    id: orm.Mapped[int] = orm.mapped_column(primary_key=True)
    class_name: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    resource: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    hard_limit: orm.Mapped[int | None] = orm.mapped_column(sa.Integer)


class BuildRequest(Timestamps, Base):
    """A server accepted by the API but not yet in a cell."""
    __tablename__ = "build_requests"
    id: orm.Mapped[int] = orm.mapped_column(primary_key=True)
    instance_uuid: orm.Mapped[str] = orm.mapped_column(sa.String(36), unique=True)
    project_id: orm.Mapped[str] = orm.mapped_column(sa.String(255), index=True)
    instance: orm.Mapped[str] = orm.mapped_column(sa.Text)  # JSON of the instance fields
    block_device_mappings: orm.Mapped[str | None] = orm.mapped_column(sa.Text)
    tags: orm.Mapped[str | None] = orm.mapped_column(sa.Text)


class InstanceGroup(Timestamps, Base):
    __tablename__ = "instance_groups"
    id: orm.Mapped[int] = orm.mapped_column(primary_key=True)
    uuid: orm.Mapped[str] = orm.mapped_column(sa.String(36), unique=True)
    name: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    project_id: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    user_id: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    policy: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    rules: orm.Mapped[str | None] = orm.mapped_column(sa.Text)  # JSON
    members: orm.Mapped[list["InstanceGroupMember"]] = orm.relationship(
        cascade="all, delete-orphan", lazy="selectin")


class InstanceGroupMember(Base):
    __tablename__ = "instance_group_member"
    __table_args__ = (sa.UniqueConstraint("group_id", "instance_uuid"),)
    id: orm.Mapped[int] = orm.mapped_column(primary_key=True)
    group_id: orm.Mapped[int] = orm.mapped_column(sa.ForeignKey("instance_groups.id", ondelete="CASCADE"))
    instance_uuid: orm.Mapped[str] = orm.mapped_column(sa.String(36), index=True)


class Aggregate(Timestamps, Base):
    __tablename__ = "aggregates"
    id: orm.Mapped[int] = orm.mapped_column(primary_key=True)
    uuid: orm.Mapped[str] = orm.mapped_column(sa.String(36), unique=True)
    name: orm.Mapped[str] = orm.mapped_column(sa.String(255), unique=True)
    hosts: orm.Mapped[list["AggregateHost"]] = orm.relationship(
        cascade="all, delete-orphan", lazy="selectin")
    metadata_items: orm.Mapped[list["AggregateMetadata"]] = orm.relationship(
        cascade="all, delete-orphan", lazy="selectin")


class AggregateHost(Base):
    __tablename__ = "aggregate_hosts"
    __table_args__ = (sa.UniqueConstraint("aggregate_id", "host"),)
    id: orm.Mapped[int] = orm.mapped_column(primary_key=True)
    aggregate_id: orm.Mapped[int] = orm.mapped_column(sa.ForeignKey("aggregates.id", ondelete="CASCADE"))
    host: orm.Mapped[str] = orm.mapped_column(sa.String(255))


class AggregateMetadata(Base):
    __tablename__ = "aggregate_metadata"
    __table_args__ = (sa.UniqueConstraint("aggregate_id", "key"),)
    id: orm.Mapped[int] = orm.mapped_column(primary_key=True)
    aggregate_id: orm.Mapped[int] = orm.mapped_column(sa.ForeignKey("aggregates.id", ondelete="CASCADE"))
    key: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    value: orm.Mapped[str] = orm.mapped_column(sa.String(255))


class KeyPair(Timestamps, Base):
    __tablename__ = "key_pairs"
    __table_args__ = (sa.UniqueConstraint("user_id", "name"),)
    id: orm.Mapped[int] = orm.mapped_column(primary_key=True)
    name: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    user_id: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    fingerprint: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    public_key: orm.Mapped[str | None] = orm.mapped_column(sa.Text)
    type: orm.Mapped[str] = orm.mapped_column(sa.String(10), default="ssh")

metadata = Base.metadata
