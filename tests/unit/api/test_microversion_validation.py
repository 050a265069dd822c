"""Version negotiation, schema errors, auth header parsing, merge order."""
import datetime

import pytest

from novella.api import auth
from novella.api.compute import errors, instances, microversion, validation
from novella.api.compute.schemas import servers as server_schemas
from novella.policies import compute as compute_policies


@pytest.mark.parametrize("headers, expected", [
    ({}, (2, 1)),
    ({"OpenStack-API-Version": "compute 2.53"}, (2, 53)),
    ({"OpenStack-API-Version": "compute latest"}, (2, 104)),
    ({"X-OpenStack-Nova-API-Version": "2.10"}, (2, 10)),
    ({"OpenStack-API-Version": "placement 1.30"}, (2, 1)),
    ({"OpenStack-API-Version": "compute 2.60", "X-OpenStack-Nova-API-Version": "2.2"}, (2, 60)),
])
def test_negotiate(headers, expected):
    assert microversion.negotiate(headers) == expected


@pytest.mark.parametrize("value, error", [("2.105", errors.NotAcceptable), ("1.1", errors.NotAcceptable),
                                          ("2.0", errors.NotAcceptable), ("two", errors.BadRequest),
                                          ("2.03", errors.BadRequest)])
def test_negotiate_refuses(value, error):
    with pytest.raises(error):
        microversion.negotiate({"OpenStack-API-Version": f"compute {value}"})


def test_fault_body_names():
    assert errors.BadRequest("x").body() == b'{"badRequest": {"code": 400, "message": "x"}}'
    assert b"itemNotFound" in errors.NotFound("x").body()
    assert b"conflictingRequest" in errors.Conflict("x").body()
    assert b"computeFault" in errors.NotAcceptable("x").body()


def test_schema_per_version():
    body = {"server": {"name": "a", "flavorRef": "1", "imageRef": "", "description": "d"}}
    validation.validate(server_schemas.create, body, (2, 19))
    with pytest.raises(errors.BadRequest) as exc:
        validation.validate(server_schemas.create, body, (2, 18))
    assert "'description' was unexpected" in exc.value.message
    with pytest.raises(errors.BadRequest) as exc:
        validation.validate(server_schemas.create, {"server": {"name": "", "flavorRef": "1"}}, (2, 1))
    assert exc.value.message.startswith("Invalid input for field/attribute name.")


def test_noauth_tokens():
    ctx = auth.context_from_noauth_token({"HTTP_X_AUTH_TOKEN": "alice:proj"})
    assert (ctx.user_id, ctx.project_id, ctx.is_admin) == ("alice", "proj", False)
    assert "member" in ctx.roles
    ctx = auth.context_from_noauth_token({"HTTP_X_AUTH_TOKEN": "admin"})
    assert (ctx.user_id, ctx.project_id, ctx.is_admin) == ("admin", "admin", True)
    ctx = auth.context_from_noauth_token({"HTTP_X_AUTH_TOKEN": "u:p", "HTTP_X_ROLES": "reader"})
    assert ctx.roles == ["reader"]
    assert auth.context_from_noauth_token({}) is None


def test_keystone_headers():
    ctx = auth.context_from_headers({"HTTP_X_USER_ID": "u1", "HTTP_X_PROJECT_ID": "p1",
                                     "HTTP_X_ROLES": "member,reader", "HTTP_X_AUTH_TOKEN": "tok"})
    assert (ctx.user_id, ctx.project_id, ctx.roles, ctx.is_admin) == ("u1", "p1", ["member", "reader"], False)
    assert auth.context_from_headers({"HTTP_X_IDENTITY_STATUS": "Invalid", "HTTP_X_USER_ID": "u"}) is None


def test_policy_defaults_carry_reference_names():
    rules = {r.name: r.check_str for r in compute_policies.list_rules()}
    assert rules["compute:servers:resize:cross_cell"] == "!"
    assert rules["os_compute_api:os-migrate-server:migrate"] == "rule:project_manager_or_admin"
    assert rules["os_compute_api:servers:resize"] == "rule:project_member_or_admin"
    assert rules["project_reader_api"] == "role:reader and project_id:%(project_id)s"


def test_merge_order_matches_sql_null_handling():
    t = datetime.datetime(2024, 1, 1)
    recs = [{"uuid": "b", "display_name": None, "created_at": t},
            {"uuid": "a", "display_name": "x", "created_at": t},
            {"uuid": "c", "display_name": "x", "created_at": t}]
    sort = [("display_name", "asc"), ("uuid", "desc")]
    import functools
    ordered = sorted(recs, key=functools.cmp_to_key(lambda a, b: instances._compare(sort, a, b)))
    assert [r["uuid"] for r in ordered] == ["b", "c", "a"]
