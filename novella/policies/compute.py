"""Default policy rules of the Compute API (names as in the reference).

Base rules: ``admin_api`` (the admin role), ``project_reader_api`` /
``project_member_api`` (the role on the server's own project), and the
``*_or_admin`` combinations most server operations use.
"""
from oslo_policy import policy

ADMIN = "rule:admin_api"
READER = "rule:project_reader_or_admin"
MEMBER = "rule:project_member_or_admin"
OWNER_USER = "(rule:admin_api) or user_id:%(user_id)s"
NOBODY = "!"
ANYONE = "@"

_BASE = [
    ("context_is_admin", "role:admin"),
    ("admin_api", "role:admin"),
    ("project_member_api", "role:member and project_id:%(project_id)s"),
    ("project_reader_api", "role:reader and project_id:%(project_id)s"),
    ("project_member_or_admin", "rule:project_member_api or rule:context_is_admin"),
    ("project_reader_or_admin", "rule:project_reader_api or rule:context_is_admin"),
    ("service_api", "role:service"),
    ("service_or_admin", "rule:service_api or rule:context_is_admin"),
]

_SERVERS = "os_compute_api:servers:"
_RULES = {
    # servers
    _SERVERS + "index": READER,
    _SERVERS + "detail": READER,
    _SERVERS + "index:get_all_tenants": ADMIN,
    _SERVERS + "detail:get_all_tenants": ADMIN,
    _SERVERS + "allow_all_filters": ADMIN,
    _SERVERS + "show": READER,
    _SERVERS + "show:host_status": ADMIN,
    _SERVERS + "show:host_status:unknown-only": ADMIN,
    _SERVERS + "show:flavor-extra-specs": READER,
    _SERVERS + "create": MEMBER,
    _SERVERS + "create:forced_host": ADMIN,
    _SERVERS + "create:requested_destination": ADMIN,
    _SERVERS + "create:attach_volume": MEMBER,
    _SERVERS + "create:attach_network": MEMBER,
    _SERVERS + "create:zero_disk_flavor": ADMIN,
    _SERVERS + "update": MEMBER,
    _SERVERS + "delete": MEMBER,
    _SERVERS + "start": MEMBER,
    _SERVERS + "stop": MEMBER,
    _SERVERS + "reboot": MEMBER,
    # moves (the handlers arrive with the move operations)
    _SERVERS + "resize": MEMBER,
    _SERVERS + "confirm_resize": MEMBER,
    _SERVERS + "revert_resize": MEMBER,
    "os_compute_api:os-migrate-server:migrate": ADMIN,
    "os_compute_api:os-migrate-server:migrate:host": ADMIN,
    "os_compute_api:os-migrate-server:migrate_live": ADMIN,
    "os_compute_api:os-evacuate": ADMIN,
    "compute:servers:resize:cross_cell": NOBODY,
    "os_compute_api:os-shelve:shelve": MEMBER,
    "os_compute_api:os-shelve:shelve_offload": ADMIN,
    "os_compute_api:os-shelve:unshelve": MEMBER,
    "os_compute_api:os-shelve:unshelve_to_host": ADMIN,
    "os_compute_api:os-extended-server-attributes": ADMIN,
    # server records
    "os_compute_api:os-instance-actions:list": READER,
    "os_compute_api:os-instance-actions:show": READER,
    "os_compute_api:os-instance-actions:events": ADMIN,
    "os_compute_api:os-instance-actions:events:details": READER,
    "os_compute_api:os-migrations:index": ADMIN,
    _SERVERS + "migrations:index": ADMIN,
    _SERVERS + "migrations:show": ADMIN,
    "os_compute_api:os-server-tags:index": READER,
    "os_compute_api:os-server-tags:show": READER,
    "os_compute_api:os-server-tags:update": MEMBER,
    "os_compute_api:os-server-tags:update_all": MEMBER,
    "os_compute_api:os-server-tags:delete": MEMBER,
    "os_compute_api:os-server-tags:delete_all": MEMBER,
    # flavors
    "os_compute_api:os-flavor-manage:create": ADMIN,
    "os_compute_api:os-flavor-manage:update": ADMIN,
    "os_compute_api:os-flavor-manage:delete": ADMIN,
    "os_compute_api:os-flavor-extra-specs:index": READER,
    "os_compute_api:os-flavor-extra-specs:show": READER,
    "os_compute_api:os-flavor-extra-specs:create": ADMIN,
    "os_compute_api:os-flavor-extra-specs:update": ADMIN,
    "os_compute_api:os-flavor-extra-specs:delete": ADMIN,
    "os_compute_api:os-flavor-access": ADMIN,
    "os_compute_api:os-flavor-access:add_tenant_access": ADMIN,
    "os_compute_api:os-flavor-access:remove_tenant_access": ADMIN,
    # key pairs
    "os_compute_api:os-keypairs:index": OWNER_USER,
    "os_compute_api:os-keypairs:create": OWNER_USER,
    "os_compute_api:os-keypairs:show": OWNER_USER,
    "os_compute_api:os-keypairs:delete": OWNER_USER,
    # infrastructure
    "os_compute_api:os-services:list": ADMIN,
    "os_compute_api:os-services:update": ADMIN,
    "os_compute_api:os-services:delete": ADMIN,
    "os_compute_api:os-hypervisors:list": ADMIN,
    "os_compute_api:os-hypervisors:list-detail": ADMIN,
    "os_compute_api:os-hypervisors:show": ADMIN,
    "os_compute_api:os-hypervisors:statistics": ADMIN,
    "os_compute_api:os-hypervisors:search": ADMIN,
    "os_compute_api:os-hypervisors:servers": ADMIN,
    "os_compute_api:os-availability-zone:list": ANYONE,
    "os_compute_api:os-availability-zone:detail": ADMIN,
    "os_compute_api:os-aggregates:index": ADMIN,
    "os_compute_api:os-aggregates:create": ADMIN,
    "os_compute_api:os-aggregates:show": ADMIN,
    "os_compute_api:os-aggregates:update": ADMIN,
    "os_compute_api:os-aggregates:delete": ADMIN,
    "os_compute_api:os-aggregates:add_host": ADMIN,
    "os_compute_api:os-aggregates:remove_host": ADMIN,
    "os_compute_api:os-aggregates:set_metadata": ADMIN,
    # volume attachments
    "os_compute_api:os-volumes-attachments:index": READER,
    "os_compute_api:os-volumes-attachments:show": READER,
    "os_compute_api:os-volumes-attachments:create": MEMBER,
    "os_compute_api:os-volumes-attachments:delete": MEMBER,
    # server groups
    "os_compute_api:os-server-groups:create": MEMBER,
    "os_compute_api:os-server-groups:delete": MEMBER,
    "os_compute_api:os-server-groups:index": READER,
    "os_compute_api:os-server-groups:index:all_projects": ADMIN,
    "os_compute_api:os-server-groups:show": READER,
}


def list_rules():
    rules = [policy.RuleDefault(name, check) for name, check in _BASE]
    rules += [policy.RuleDefault(name, check, scope_types=["project"])
              for name, check in _RULES.items()]
    return rules
