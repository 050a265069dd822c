"""The machine's database and broker servers, for tests over real connections.

When ``CI=true`` a missing server is a failure, not a skip: CI must prove the
PostgreSQL, MariaDB and RabbitMQ paths. Elsewhere the test is skipped with the
reason printed by ``-ra``.
"""
import os
import socket
import uuid

import pytest
import sqlalchemy as sa

PG_ADMIN_URL = os.environ.get("NOVELLA_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
MYSQL_ADMIN_URL = os.environ.get("NOVELLA_TEST_MYSQL", "mysql+pymysql://root@127.0.0.1:3306/")
RABBIT_URL = os.environ.get("NOVELLA_TEST_RABBIT", "amqp://guest:guest@127.0.0.1:5672/")


def _unavailable(what, why):
    msg = f"{what} is not reachable ({why})"
    if os.environ.get("CI") == "true":
        pytest.fail(msg + "; CI=true requires it", pytrace=False)
    pytest.skip(msg)


def _port_open(host, port):
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def create_database(kind):
    """Create an empty database on the named server; return (url, drop)."""
    name = "novella_t_" + uuid.uuid4().hex[:12]
    if kind == "postgresql":
        if not _port_open("127.0.0.1", 5432):
            _unavailable("PostgreSQL at 127.0.0.1:5432", "port closed")
        admin = sa.create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
        base = PG_ADMIN_URL.rsplit("/", 1)[0]
        create = f'CREATE DATABASE "{name}"'
        drop = f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'
    elif kind == "mysql":
        if not _port_open("127.0.0.1", 3306):
            _unavailable("MariaDB at 127.0.0.1:3306", "port closed")
        admin = sa.create_engine(MYSQL_ADMIN_URL, isolation_level="AUTOCOMMIT")
        base = MYSQL_ADMIN_URL.rstrip("/")
        create = f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4"
        drop = f"DROP DATABASE IF EXISTS `{name}`"
    else:
        raise ValueError(kind)
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql(create)
    except Exception as exc:  # noqa: BLE001 - report any connection problem
        _unavailable(kind, exc)
    url = f"{base}/{name}" + ("?charset=utf8mb4" if kind == "mysql" else "")

    def _drop():
        from novella.db import engine as engine_mod
        engine_mod.dispose_all()
        with admin.connect() as conn:
            conn.exec_driver_sql(drop)
        admin.dispose()

    return url, _drop


def rabbit_url():
    if not _port_open("127.0.0.1", 5672):
        _unavailable("RabbitMQ at 127.0.0.1:5672", "port closed")
    return RABBIT_URL
