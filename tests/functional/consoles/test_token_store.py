"""The console_auth_tokens table on SQLite, PostgreSQL and MariaDB: its revision
builds what the model describes and goes back, and a token opens one connection."""
import concurrent.futures

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from novella.db import console_auth_tokens, migrate
from novella.db.engine import Database
from novella.virt.driver import console_address


@pytest.fixture(params=["sqlite", "postgresql", "mysql"])
def url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/cell.db"
    return request.getfixturevalue(f"{request.param}_url")


def test_revision_upgrades_and_downgrades(url):
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        command.upgrade(migrate._config("cell", conn), "0011")
        assert "console_auth_tokens" not in sa.inspect(conn).get_table_names()
        command.upgrade(migrate._config("cell", conn), "head")
    with engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"version_table": migrate.version_table("cell")})
        assert compare_metadata(ctx, migrate.metadata("cell")) == []
    with engine.begin() as conn:
        command.downgrade(migrate._config("cell", conn), "0011")
        assert "console_auth_tokens" not in sa.inspect(conn).get_table_names()
    engine.dispose()


def test_a_token_opens_one_connection(url):
    migrate.sync("cell", url)
    db = Database(url)
    token = console_auth_tokens.authorize(
        db, "6b5ba4a6-49c8-4cd4-b3f9-1d6ab1f4b0b8", "serial",
        console_address("127.0.0.1", 10000), ttl=600)
    sock = console_auth_tokens.authorize(
        db, "6b5ba4a6-49c8-4cd4-b3f9-1d6ab1f4b0b8", "novnc",
        console_address("cell1-host1", unix_socket="/run/vm/vnc.sock"), ttl=600)
    assert console_auth_tokens.show(db, sock)["unix_socket"] == "/run/vm/vnc.sock"
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda _: console_auth_tokens.consume(db, token), range(4)))
    assert [g for g in got if g] == [{
        "console_type": "serial", "instance_uuid": "6b5ba4a6-49c8-4cd4-b3f9-1d6ab1f4b0b8",
        "host": "127.0.0.1", "port": 10000, "unix_socket": None,
        "internal_access_path": None}]
    assert console_auth_tokens.show(db, token) is None
    expired = console_auth_tokens.authorize(db, "x", "serial", console_address("h", 1), ttl=0)
    assert console_auth_tokens.consume(db, expired) is None
