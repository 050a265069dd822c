"""Tables of the placement database (SQLAlchemy Core).

Resource classes, traits and aggregates are stored by name/UUID directly in
the rows that use them: standard classes and traits come from os-resource-classes
and os-traits and need no rows; only custom ones are recorded.
"""
import sqlalchemy as sa

metadata = sa.MetaData()

ledger = sa.Table(
    "placement_ledger", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("version", sa.BigInteger, nullable=False),
)

# One row per committed write: which providers/consumers it touched, so other
# processes can refresh their read model incrementally.
changes = sa.Table(
    "placement_changes", metadata,
    sa.Column("version", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("providers", sa.Text, nullable=False, default=""),
    sa.Column("consumers", sa.Text, nullable=False, default=""),
    sa.Column("catalog", sa.Boolean, nullable=False, default=False),
)

resource_classes = sa.Table(
    "resource_classes", metadata,
    sa.Column("name", sa.String(255), primary_key=True),
    sa.Column("created_at", sa.DateTime, nullable=False),
    sa.Column("updated_at", sa.DateTime),
)

traits = sa.Table(
    "traits", metadata,
    sa.Column("name", sa.String(255), primary_key=True),
    sa.Column("created_at", sa.DateTime, nullable=False),
)

providers = sa.Table(
    "resource_providers", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("uuid", sa.String(36), nullable=False, unique=True),
    sa.Column("name", sa.String(200), nullable=False, unique=True),
    sa.Column("generation", sa.Integer, nullable=False),
    sa.Column("parent_id", sa.Integer, sa.ForeignKey("resource_providers.id")),
    sa.Column("root_id", sa.Integer, nullable=False, index=True),
    sa.Column("created_at", sa.DateTime, nullable=False),
    sa.Column("updated_at", sa.DateTime),
)

inventories = sa.Table(
    "inventories", metadata,
    sa.Column("provider_id", sa.Integer, sa.ForeignKey("resource_providers.id"),
              primary_key=True),
    sa.Column("resource_class", sa.String(255), primary_key=True),
    sa.Column("total", sa.Integer, nullable=False),
    sa.Column("reserved", sa.Integer, nullable=False),
    sa.Column("min_unit", sa.Integer, nullable=False),
    sa.Column("max_unit", sa.Integer, nullable=False),
    sa.Column("step_size", sa.Integer, nullable=False),
    sa.Column("allocation_ratio", sa.Float, nullable=False),
)

provider_traits = sa.Table(
    "provider_traits", metadata,
    sa.Column("provider_id", sa.Integer, sa.ForeignKey("resource_providers.id"),
              primary_key=True),
    sa.Column("trait", sa.String(255), primary_key=True, index=True),
)

provider_aggregates = sa.Table(
    "provider_aggregates", metadata,
    sa.Column("provider_id", sa.Integer, sa.ForeignKey("resource_providers.id"),
              primary_key=True),
    sa.Column("aggregate", sa.String(36), primary_key=True, index=True),
)

consumers = sa.Table(
    "consumers", metadata,
    sa.Column("uuid", sa.String(36), primary_key=True),
    sa.Column("project_id", sa.String(255), nullable=False, index=True),
    sa.Column("user_id", sa.String(255), nullable=False),
    sa.Column("consumer_type", sa.String(255)),
    sa.Column("generation", sa.Integer, nullable=False),
    sa.Column("created_at", sa.DateTime, nullable=False),
    sa.Column("updated_at", sa.DateTime),
)

allocations = sa.Table(
    "allocations", metadata,
    sa.Column("consumer", sa.String(36), primary_key=True),
    sa.Column("provider_id", sa.Integer, sa.ForeignKey("resource_providers.id"),
              primary_key=True, index=True),
    sa.Column("resource_class", sa.String(255), primary_key=True),
    sa.Column("used", sa.Integer, nullable=False),
    sa.Column("created_at", sa.DateTime, nullable=False),
)
