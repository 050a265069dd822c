import pytest

from novella.context import RequestContext
from tests.schemas import synced


@pytest.fixture
def ctxt():
    return RequestContext(user_id="u1", project_id="p1", roles=["member"])


@pytest.fixture
def admin():
    return RequestContext(user_id="admin", project_id="admin", roles=["admin"], is_admin=True)


@pytest.fixture
def db_url(tmp_path):
    return synced(f"sqlite:///{tmp_path}/service.db")
