import pytest

from tests import backends


@pytest.fixture
def postgresql_url():
    url, drop = backends.create_database("postgresql")
    yield url
    drop()


@pytest.fixture
def mysql_url():
    url, drop = backends.create_database("mysql")
    yield url
    drop()


@pytest.fixture
def rabbit_url():
    return backends.rabbit_url()
