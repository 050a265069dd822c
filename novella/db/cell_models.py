"""A cell database (one per cell, plus cell0 for servers that never got a host).

Instances and everything that hangs off them, migrations, services and compute
nodes. Rows that the reference soft-deletes carry ``deleted`` (0 when live,
the row id once deleted) and ``deleted_at``; a cross-cell move hard-deletes
the copy it leaves behind.
"""
import datetime

import sqlalchemy as sa
from sqlalchemy import orm

from novella.db.timestamps import Timestamps



class Base(orm.DeclarativeBase):
    pass



class SoftDelete:
    deleted: orm.Mapped[int] = orm.mapped_column(default=0)
    deleted_at: orm.Mapped[datetime.datetime | None] = orm.mapped_column(sa.DateTime)


class Instance(Timestamps, SoftDelete, Base):
    __tablename__ = "instances"
    __table_args__ = (sa.Index("ix_instances_project_deleted", "project_id", "deleted"),
                      sa.Index("ix_instances_host_deleted", "host", "deleted"),
                      sa.Index("ix_instances_task_state", "task_state"))
    id: orm.Mapped[int] = orm.mapped_column(primary_key=True)
    uuid: orm.Mapped[str] = orm.mapped_column(sa.String(36), unique=True)
    display_name: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    display_description: orm.Mapped[str | None] = orm.mapped_column(sa.Text)
    hostname: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    project_id: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    user_id: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    host: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    node: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    launched_on: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    availability_zone: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    vm_state: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    task_state: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    power_state: orm.Mapped[int] = orm.mapped_column(default=0)
    memory_mb: orm.Mapped[int] = orm.mapped_column(default=0)
    vcpus: orm.Mapped[int] = orm.mapped_column(default=0)
    root_gb: orm.Mapped[int] = orm.mapped_column(default=0)
    ephemeral_gb: orm.Mapped[int] = orm.mapped_column(default=0)
    instance_type_id: orm.Mapped[int | None]  # the API database's flavors.id
    image_ref: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    key_name: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    key_data: orm.Mapped[str | None] = orm.mapped_column(sa.Text)
    user_data: orm.Mapped[str | None] = orm.mapped_column(sa.Text)
    config_drive: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    access_ip_v4: orm.Mapped[str | None] = orm.mapped_column(sa.String(39))
    access_ip_v6: orm.Mapped[str | None] = orm.mapped_column(sa.String(39))
    reservation_id: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    launch_index: orm.Mapped[int | None]
    progress: orm.Mapped[int | None]
    locked: orm.Mapped[bool] = orm.mapped_column(default=False)
    locked_by: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    launched_at: orm.Mapped[datetime.datetime | None] = orm.mapped_column(sa.DateTime)
    terminated_at: orm.Mapped[datetime.datetime | None] = orm.mapped_column(sa.DateTime)
    # A server being moved across cells has a copy in both; only one is shown.
    hidden: orm.Mapped[bool] = orm.mapped_column(default=False)
    # OS-DCF:diskConfig AUTO (true) or MANUAL (cell revision 0007).
    auto_disk_config: orm.Mapped[bool | None] = orm.mapped_column(default=False)
    # Metadata and tags are read only by the API views (which ask for them with
    # selectinload) and cross-cell copies: loading them on every compute-side
    # read cost two queries each time.
    metadata_items: orm.Mapped[list["InstanceMetadata"]] = orm.relationship(
        cascade="all, delete-orphan", lazy="select",
        primaryjoin="Instance.uuid == foreign(InstanceMetadata.instance_uuid)")
    # One-to-one rows come in the instance's own SELECT (a LEFT JOIN) instead of
    # one extra query each.
    extra: orm.Mapped["InstanceExtra | None"] = orm.relationship(
        cascade="all, delete-orphan", lazy="joined", uselist=False,
        primaryjoin="Instance.uuid == foreign(InstanceExtra.instance_uuid)")
    info_cache: orm.Mapped["InstanceInfoCache | None"] = orm.relationship(
        cascade="all, delete-orphan", lazy="joined", uselist=False,
        primaryjoin="Instance.uuid == foreign(InstanceInfoCache.instance_uuid)")
    tags: orm.Mapped[list["Tag"]] = orm.relationship(
        cascade="all, delete-orphan", lazy="select",
        primaryjoin="Instance.uuid == foreign(Tag.resource_id)")


class InstanceMetadata(Base):
    __tablename__ = "instance_metadata"
    __table_args__ = (sa.UniqueConstraint("instance_uuid", "key"),)
    id: orm.Mapped[int] = orm.mapped_column(primary_key=True)
    instance_uuid: orm.Mapped[str] = orm.mapped_column(sa.String(36))
    key: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    value: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))


class InstanceExtra(Base):
    """Large per-instance documents, JSON text: flavors, NUMA, PCI, contexts."""
    __tablename__ = "instance_extra"
    __table_args__ = (sa.Index("ix_instance_extra_move_claim_host", "move_claim_host"),)
    id: orm.Mapped[int] = orm.mapped_column(primary_key=True)
    instance_uuid: orm.Mapped[str] = orm.mapped_column(sa.String(36), unique=True)
    # {"cur": flavor, "old": flavor|None, "new": flavor|None}
    flavor: orm.Mapped[str | None] = orm.mapped_column(sa.Text)
    numa_topology: orm.Mapped[str | None] = orm.mapped_column(sa.Text)
    pci_requests: orm.Mapped[str | None] = orm.mapped_column(sa.Text)
    pci_devices: orm.Mapped[str | None] = orm.mapped_column(sa.Text)
    migration_context: orm.Mapped[str | None] = orm.mapped_column(sa.Text)
    # The host whose node counts the migration context's claim besides its own
    # instances (the move's destination until the claim is applied, then its
    # source), written with it: a host finds those moves by this index.
    move_claim_host: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))


class InstanceInfoCache(Base):
    __tablename__ = "instance_info_caches"
    id: orm.Mapped[int] = orm.mapped_column(primary_key=True)
    instance_uuid: orm.Mapped[str] = orm.mapped_column(sa.String(36), unique=True)
    network_info: orm.Mapped[str | None] = orm.mapped_column(sa.Text)  # JSON list of VIFs


class Tag(Base):
    __tablename__ = "tags"
    resource_id: orm.Mapped[str] = orm.mapped_column(sa.String(36), primary_key=True)
    tag: orm.Mapped[str] = orm.mapped_column(sa.String(80), primary_key=True)


class InstanceSystemMetadata(Base):
    """What the services note about an instance for themselves (``shelved_image_id``, ...)."""
    __tablename__ = "instance_system_metadata"
    instance_uuid: orm.Mapped[str] = orm.mapped_column(sa.String(36), primary_key=True)
    key: orm.Mapped[str] = orm.mapped_column(sa.String(255), primary_key=True)
    value: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))


class HostOperation(Timestamps, Base):
    """An operation a compute host runs on a server, from before it acts until it
    ends (novella/db/host_operations.py); at most one of each kind per server."""
    __tablename__ = "host_operations"
    __table_args__ = (sa.UniqueConstraint("instance_uuid", "kind",
                                          name="uniq_host_operations0instance_uuid0kind"),)
    id: orm.Mapped[int] = orm.mapped_column(primary_key=True)
    instance_uuid: orm.Mapped[str] = orm.mapped_column(sa.String(36))
    kind: orm.Mapped[str] = orm.mapped_column(sa.String(64))
    steps: orm.Mapped[str] = orm.mapped_column(sa.Text)  # JSON list of [name, status]
    state: orm.Mapped[str] = orm.mapped_column(sa.Text)  # JSON


class ConsoleAuthToken(Timestamps, Base):
    """A console's single-use token (novella/db/console_auth_tokens.py): only its
    hash is kept, with where the guest's console listens."""
    __tablename__ = "console_auth_tokens"
    __table_args__ = (sa.UniqueConstraint("token_hash",
                                          name="uniq_console_auth_tokens0token_hash"),
                      sa.Index("console_auth_tokens_instance_uuid_idx", "instance_uuid"),
                      sa.Index("console_auth_tokens_expires_idx", "expires"))
    id: orm.Mapped[int] = orm.mapped_column(primary_key=True)
    token_hash: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    console_type: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    instance_uuid: orm.Mapped[str] = orm.mapped_column(sa.String(36))
    host: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    port: orm.Mapped[int | None]
    unix_socket: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    internal_access_path: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    expires: orm.Mapped[int]  # seconds since the epoch


class Migration(Timestamps, SoftDelete, Base):
    __tablename__ = "migrations"
    __table_args__ = (sa.Index("ix_migrations_instance_status", "instance_uuid", "status"),
                      sa.Index("ix_migrations_status", "status"))
    id: orm.Mapped[int] = orm.mapped_column(primary_key=True)
    uuid: orm.Mapped[str] = orm.mapped_column(sa.String(36), unique=True)
    instance_uuid: orm.Mapped[str] = orm.mapped_column(sa.String(36))
    source_compute: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    dest_compute: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    source_node: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    dest_node: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    dest_host: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    old_instance_type_id: orm.Mapped[int | None]
    new_instance_type_id: orm.Mapped[int | None]
    status: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    # migration, resize, live-migration or evacuation
    migration_type: orm.Mapped[str] = orm.mapped_column(sa.String(32))
    hidden: orm.Mapped[bool] = orm.mapped_column(default=False)
    cross_cell_move: orm.Mapped[bool] = orm.mapped_column(default=False)
    user_id: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    project_id: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    # A live migration's copy as its hypervisor last reported it (bytes).
    memory_total: orm.Mapped[int | None] = orm.mapped_column(sa.BigInteger)
    memory_processed: orm.Mapped[int | None] = orm.mapped_column(sa.BigInteger)
    memory_remaining: orm.Mapped[int | None] = orm.mapped_column(sa.BigInteger)
    disk_total: orm.Mapped[int | None] = orm.mapped_column(sa.BigInteger)
    disk_processed: orm.Mapped[int | None] = orm.mapped_column(sa.BigInteger)
    disk_remaining: orm.Mapped[int | None] = orm.mapped_column(sa.BigInteger)


class BlockDeviceMapping(Timestamps, SoftDelete, Base):
    __tablename__ = "block_device_mapping"
    id: orm.Mapped[int] = orm.mapped_column(primary_key=True)
    uuid: orm.Mapped[str] = orm.mapped_column(sa.String(36), unique=True)
    instance_uuid: orm.Mapped[str] = orm.mapped_column(sa.String(36), index=True)
    source_type: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    destination_type: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    device_name: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    device_type: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    disk_bus: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    boot_index: orm.Mapped[int | None]
    volume_id: orm.Mapped[str | None] = orm.mapped_column(sa.String(36))
    image_id: orm.Mapped[str | None] = orm.mapped_column(sa.String(36))
    snapshot_id: orm.Mapped[str | None] = orm.mapped_column(sa.String(36))
    volume_size: orm.Mapped[int | None]
    delete_on_termination: orm.Mapped[bool] = orm.mapped_column(default=False)
    attachment_id: orm.Mapped[str | None] = orm.mapped_column(sa.String(36))
    connection_info: orm.Mapped[str | None] = orm.mapped_column(sa.Text)
    tag: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    volume_type: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))


class InstanceAction(Timestamps, SoftDelete, Base):
    __tablename__ = "instance_actions"
    __table_args__ = (sa.Index("ix_instance_actions_uuid_request", "instance_uuid", "request_id"),)
    id: orm.Mapped[int] = orm.mapped_column(primary_key=True)
    action: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    instance_uuid: orm.Mapped[str] = orm.mapped_column(sa.String(36))
    request_id: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    user_id: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    project_id: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    start_time: orm.Mapped[datetime.datetime | None] = orm.mapped_column(sa.DateTime)
    finish_time: orm.Mapped[datetime.datetime | None] = orm.mapped_column(sa.DateTime)
    message: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    events: orm.Mapped[list["InstanceActionEvent"]] = orm.relationship(
        cascade="all, delete-orphan", lazy="selectin", order_by="InstanceActionEvent.id")


class InstanceActionEvent(Timestamps, SoftDelete, Base):
    __tablename__ = "instance_actions_events"
    # By action (its events) and by (event, host) (the scheduler's build failures):
    # both were full scans of a table that grows with every operation.
    __table_args__ = (sa.Index("ix_instance_actions_events_action_id", "action_id"),
                      sa.Index("ix_instance_actions_events_event_host", "event", "host"),
                      sa.Index("ix_instance_actions_events_event_result", "event", "result"))
    id: orm.Mapped[int] = orm.mapped_column(primary_key=True)
    action_id: orm.Mapped[int] = orm.mapped_column(sa.ForeignKey("instance_actions.id", ondelete="CASCADE"))
    event: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    start_time: orm.Mapped[datetime.datetime | None] = orm.mapped_column(sa.DateTime)
    finish_time: orm.Mapped[datetime.datetime | None] = orm.mapped_column(sa.DateTime)
    result: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    traceback: orm.Mapped[str | None] = orm.mapped_column(sa.Text)
    host: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    details: orm.Mapped[str | None] = orm.mapped_column(sa.Text)


class InstanceFault(Timestamps, SoftDelete, Base):
    __tablename__ = "instance_faults"
    id: orm.Mapped[int] = orm.mapped_column(primary_key=True)
    instance_uuid: orm.Mapped[str] = orm.mapped_column(sa.String(36), index=True)
    code: orm.Mapped[int]
    message: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    details: orm.Mapped[str | None] = orm.mapped_column(sa.Text)
    host: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))


class Service(Timestamps, SoftDelete, Base):
    __tablename__ = "services"
    # updated_at: the scheduler's change check reads its latest (cell revision 0006).
    __table_args__ = (sa.UniqueConstraint("host", "binary", "deleted"),
                      sa.Index("ix_services_updated_at", "updated_at"))
    id: orm.Mapped[int] = orm.mapped_column(primary_key=True)
    uuid: orm.Mapped[str] = orm.mapped_column(sa.String(36), unique=True)
    host: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    binary: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    topic: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    report_count: orm.Mapped[int] = orm.mapped_column(default=0)
    disabled: orm.Mapped[bool] = orm.mapped_column(default=False)
    disabled_reason: orm.Mapped[str | None] = orm.mapped_column(sa.String(255))
    last_seen_up: orm.Mapped[datetime.datetime | None] = orm.mapped_column(sa.DateTime)
    forced_down: orm.Mapped[bool] = orm.mapped_column(default=False)
    version: orm.Mapped[int] = orm.mapped_column(default=0)


class ComputeNode(Timestamps, SoftDelete, Base):
    __tablename__ = "compute_nodes"
    # deleted_at: the scheduler's change check reads its latest (cell revision 0006).
    __table_args__ = (sa.Index("ix_compute_nodes_deleted_at", "deleted_at"),)
    id: orm.Mapped[int] = orm.mapped_column(primary_key=True)
    uuid: orm.Mapped[str] = orm.mapped_column(sa.String(36), unique=True)
    service_id: orm.Mapped[int | None]
    host: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    hypervisor_hostname: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    hypervisor_type: orm.Mapped[str] = orm.mapped_column(sa.String(255), default="fake")
    hypervisor_version: orm.Mapped[int] = orm.mapped_column(default=1)
    host_ip: orm.Mapped[str | None] = orm.mapped_column(sa.String(39))
    vcpus: orm.Mapped[int] = orm.mapped_column(default=0)
    memory_mb: orm.Mapped[int] = orm.mapped_column(default=0)
    local_gb: orm.Mapped[int] = orm.mapped_column(default=0)
    vcpus_used: orm.Mapped[int] = orm.mapped_column(default=0)
    memory_mb_used: orm.Mapped[int] = orm.mapped_column(default=0)
    local_gb_used: orm.Mapped[int] = orm.mapped_column(default=0)
    running_vms: orm.Mapped[int] = orm.mapped_column(default=0)
    cpu_allocation_ratio: orm.Mapped[float] = orm.mapped_column(default=16.0)
    ram_allocation_ratio: orm.Mapped[float] = orm.mapped_column(default=1.5)
    disk_allocation_ratio: orm.Mapped[float] = orm.mapped_column(default=1.0)
    cpu_info: orm.Mapped[str | None] = orm.mapped_column(sa.Text)
    pci_stats: orm.Mapped[str | None] = orm.mapped_column(sa.Text)      # JSON
    numa_topology: orm.Mapped[str | None] = orm.mapped_column(sa.Text)  # JSON
    mapped: orm.Mapped[int] = orm.mapped_column(default=0)

metadata = Base.metadata

# Where `novella manage db archive_deleted_rows` moves deleted rows (novella/db/shadow.py).
from novella.db.shadow import add_shadow_tables  # noqa: E402
SHADOW_TABLES = add_shadow_tables(metadata)
