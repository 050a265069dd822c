"""Shadow tables of a cell database: where archived rows go.

`novella manage db archive_deleted_rows` moves soft-deleted rows (and the
rows hanging off a deleted instance) from a cell table into
``shadow_<table>``, a copy of its columns with the same primary key and no
other constraint or index; `novella manage db purge` deletes them from there.
"""
import sqlalchemy as sa

PREFIX = "shadow_"

# Every table of the cell schema that archiving moves rows out of.
ARCHIVED_TABLES = (
    "instances", "instance_metadata", "instance_extra", "instance_info_caches", "tags",
    "instance_system_metadata", "migrations", "block_device_mapping", "instance_actions",
    "instance_actions_events", "instance_faults", "services", "compute_nodes",
    "host_operations",
)


def shadow_name(table_name):
    return PREFIX + table_name


def shadow_columns(columns):
    """Columns for a shadow table from (name, type, nullable, primary_key) tuples."""
    return [sa.Column(name, type_, nullable=nullable, primary_key=pk, autoincrement=False)
            for name, type_, nullable, pk in columns]


def add_shadow_tables(metadata):
    """Define the shadow of every archived table in ``metadata``; -> {name: shadow Table}."""
    out = {}
    for name in ARCHIVED_TABLES:
        table = metadata.tables[name]
        cols = [(c.name, c.type, c.nullable, c.primary_key) for c in table.columns]
        out[name] = sa.Table(shadow_name(name), metadata, *shadow_columns(cols))
    return out
