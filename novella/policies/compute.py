"""Default policy rules of the Compute API: the reference's names, defaults,
scope types, operations and deprecated aliases, for the APIs Novella serves.

Base rules: ``context_is_admin`` (the admin role), ``project_*_api`` (a role
on the target's own project), and the ``*_or_admin`` combinations that most
operations use. ``admin_api`` and ``admin_or_owner`` are the legacy rules the
deprecated aliases name; nothing uses them by default.

Rules of APIs Novella does not serve are not registered
(docs/conformance.md, "Policy rules").
"""
from oslo_policy import policy

ADMIN = "rule:context_is_admin"
READER = "rule:project_reader_or_admin"
MEMBER = "rule:project_member_or_admin"
MANAGER = "rule:project_manager_or_admin"
SERVICE = "rule:service_or_admin"
OWNER_USER = "(rule:context_is_admin) or user_id:%(user_id)s"
NOBODY = "!"
ANYONE = "@"

_LEGACY_ADMIN = ("rule:admin_api", "is_admin:True")
_LEGACY_OWNER = ("rule:admin_or_owner", "is_admin:True or project_id:%(project_id)s")

_ROLES_REASON = ("The default roles (reader, member, manager, admin, service) replace "
                 "the legacy is_admin flag and project ownership checks.")
_SPLIT_REASON = "The rule was split into one rule per operation."
_HOST_REASON = ("Seeing or choosing hosts became a rule of its own, so that the "
                "operation may be granted without exposing the infrastructure.")


def _deprecated(name, check, since, reason):
    return policy.DeprecatedRule(name=name, check_str=check,
                                 deprecated_reason=reason, deprecated_since=since)


_BASE = [
    ("context_is_admin", "role:admin", "Administrators of the cloud.",
     _deprecated(*_LEGACY_ADMIN, "21.0.0", _ROLES_REASON)),
    ("admin_or_owner", "is_admin:True or project_id:%(project_id)s",
     "Legacy: an administrator or anyone of the target's project.", None),
    ("admin_api", "is_admin:True", "Legacy: a context flagged as administrator.", None),
    ("project_manager_api", "role:manager and project_id:%(project_id)s",
     "The manager role on the target's project.",
     _deprecated(*_LEGACY_ADMIN, "21.0.0", _ROLES_REASON)),
    ("project_member_api", "role:member and project_id:%(project_id)s",
     "The member role on the target's project.",
     _deprecated(*_LEGACY_OWNER, "21.0.0", _ROLES_REASON)),
    ("project_reader_api", "role:reader and project_id:%(project_id)s",
     "The reader role on the target's project.",
     _deprecated(*_LEGACY_OWNER, "21.0.0", _ROLES_REASON)),
    ("service_api", "role:service", "Other OpenStack services acting on their own behalf.",
     _deprecated(*_LEGACY_ADMIN, "21.0.0", _ROLES_REASON)),
    ("project_manager_or_admin", "rule:project_manager_api or rule:context_is_admin",
     "A manager of the target's project, or an administrator.",
     _deprecated(*_LEGACY_ADMIN, "21.0.0", _ROLES_REASON)),
    ("project_member_or_admin", "rule:project_member_api or rule:context_is_admin",
     "A member of the target's project, or an administrator.",
     _deprecated(*_LEGACY_OWNER, "21.0.0", _ROLES_REASON)),
    ("project_reader_or_admin", "rule:project_reader_api or rule:context_is_admin",
     "A reader of the target's project, or an administrator.",
     _deprecated(*_LEGACY_OWNER, "21.0.0", _ROLES_REASON)),
    ("service_or_admin", "rule:service_api or rule:context_is_admin",
     "Another service, or an administrator.",
     _deprecated(*_LEGACY_ADMIN, "21.0.0", _ROLES_REASON)),
]

_S = "os_compute_api:servers:"
_SRV = "/servers/{server_id}"
_ACT = _SRV + "/action (%s)"
_SHOWN = [("GET", _SRV), ("GET", "/servers/detail"), ("PUT", _SRV), ("POST", _ACT % "rebuild")]
_AGG = "/os-aggregates/{aggregate_id}"
_FLAVOR = "/flavors/{flavor_id}"
_SPEC = _FLAVOR + "/os-extra_specs/{flavor_extra_spec_key}"
_HYP = "os_compute_api:os-hypervisors"
_HYP_OLD = _deprecated(_HYP, "rule:admin_api", "21.0.0", _SPLIT_REASON)
_SERVICES_OLD = _deprecated("os_compute_api:os-services", "rule:admin_api", "21.0.0",
                            _SPLIT_REASON)
_ACTIONS_OLD = _deprecated("os_compute_api:os-instance-actions", "rule:admin_or_owner",
                           "21.0.0", _SPLIT_REASON)
_MIGRATIONS_OLD = _deprecated("os_compute_api:os-migrations:index", ADMIN, "32.0.0",
                              _HOST_REASON)

# (name, default, description, operations, deprecated rule or None)
_RULES = [
    # servers
    (_S + "index", READER, "List the servers of a project.", [("GET", "/servers")], None),
    (_S + "detail", READER, "List the servers of a project, with details.",
     [("GET", "/servers/detail")], None),
    (_S + "index:get_all_tenants", ADMIN, "List the servers of every project.",
     [("GET", "/servers")], None),
    (_S + "detail:get_all_tenants", ADMIN, "List the servers of every project, with details.",
     [("GET", "/servers/detail")], None),
    (_S + "allow_all_filters", ADMIN,
     "Filter server lists by any field, not only the few open to everyone.",
     [("GET", "/servers"), ("GET", "/servers/detail")], None),
    (_S + "show", READER, "Show a server.", [("GET", _SRV)], None),
    (_S + "show:flavor-extra-specs", READER,
     "See the extra specs of a server's flavor in the server's description (2.47).",
     [("GET", "/servers/detail"), ("GET", _SRV), ("PUT", _SRV), ("POST", _ACT % "rebuild")],
     _deprecated("os_compute_api:os-flavor-extra-specs:index", "rule:admin_or_owner", None,
                 "The server's flavor extra specs have a rule of their own.")),
    (_S + "show:host_status", ADMIN,
     "See the state of a server's host (host_status, 2.16).", _SHOWN, None),
    (_S + "show:host_status:unknown-only", ADMIN,
     "See a server's host_status only when it is UNKNOWN; the full value still needs "
     "show:host_status.", _SHOWN, None),
    (_S + "create", MEMBER, "Create a server.", [("POST", "/servers")], None),
    (_S + "create:forced_host", ADMIN,
     "Create a server on a host named in the availability zone (zone:host:node), "
     "bypassing the scheduler.", [("POST", "/servers")], None),
    ("compute:servers:create:requested_destination", ADMIN,
     "Create a server on a host or node named in the request body (2.74); the scheduler "
     "still checks it.", [("POST", "/servers")], None),
    (_S + "create:attach_volume", MEMBER, "Create a server with volumes attached.",
     [("POST", "/servers")], None),
    (_S + "create:attach_network", MEMBER, "Create a server attached to given networks or ports.",
     [("POST", "/servers")], None),
    (_S + "create:zero_disk_flavor", ADMIN,
     "Boot an image-backed server from a flavor with a zero-size root disk.",
     [("POST", "/servers")], None),
    (_S + "delete", MEMBER, "Delete a server.", [("DELETE", _SRV)], None),
    (_S + "update", MEMBER, "Update a server's name or description.", [("PUT", _SRV)], None),
    (_S + "confirm_resize", MEMBER, "Confirm a resize or cold migration.",
     [("POST", _ACT % "confirmResize")], None),
    (_S + "revert_resize", MEMBER, "Revert a resize or cold migration.",
     [("POST", _ACT % "revertResize")], None),
    (_S + "reboot", MEMBER, "Reboot a server.", [("POST", _ACT % "reboot")], None),
    (_S + "resize", MEMBER, "Resize a server to another flavor.",
     [("POST", _ACT % "resize")], None),
    ("compute:servers:resize:cross_cell", NOBODY,
     "Let a resize move the server to another cell.", [("POST", _ACT % "resize")], None),
    (_S + "start", MEMBER, "Start a stopped server.", [("POST", _ACT % "os-start")], None),
    (_S + "stop", MEMBER, "Stop a running server.", [("POST", _ACT % "os-stop")], None),
    ("os_compute_api:os-extended-server-attributes", ADMIN,
     "See a server's OS-EXT-SRV-ATTR fields (host, node, instance name, ...).",
     [("GET", "/servers/{id}"), ("GET", "/servers/detail"), ("PUT", _SRV),
      ("POST", _ACT % "rebuild")], None),
    # moves
    ("os_compute_api:os-migrate-server:migrate", MANAGER, "Cold migrate a server.",
     [("POST", _ACT % "migrate")], None),
    ("os_compute_api:os-migrate-server:migrate:host", ADMIN,
     "Cold migrate a server to a host named in the request (2.56).",
     [("POST", _ACT % "migrate")], None),
    ("os_compute_api:os-migrate-server:migrate_live", MANAGER,
     "Live migrate a server to a host the scheduler picks.",
     [("POST", _ACT % "os-migrateLive")], None),
    ("os_compute_api:os-migrate-server:migrate_live:host", ADMIN,
     "Live migrate a server to a host named in the request.",
     [("POST", _ACT % "os-migrateLive")],
     _deprecated("os_compute_api:os-migrate-server:migrate_live", ADMIN, "32.0.0",
                 _HOST_REASON)),
    ("os_compute_api:os-evacuate", ADMIN, "Rebuild a server of a failed host on another host.",
     [("POST", _ACT % "evacuate")], None),
    ("os_compute_api:os-shelve:shelve", MEMBER, "Shelve a server.",
     [("POST", _ACT % "shelve")], None),
    ("os_compute_api:os-shelve:unshelve", MEMBER, "Unshelve a shelved server.",
     [("POST", _ACT % "unshelve")], None),
    ("os_compute_api:os-shelve:unshelve_to_host", ADMIN,
     "Unshelve a shelved-offloaded server to a host named in the request (2.91).",
     [("POST", _ACT % "unshelve")], None),
    ("os_compute_api:os-shelve:shelve_offload", ADMIN,
     "Offload a shelved server from its host at once.",
     [("POST", _ACT % "shelveOffload")], None),
    ("os_compute_api:os-admin-actions:reset_state", ADMIN,
     "Reset the state of a server to active or error, clearing its task state.",
     [("POST", _ACT % "os-resetState")], None),
    # server records
    ("os_compute_api:os-instance-actions:events:details", ADMIN,
     "See the details of an action's events (host, hostId, details: 2.62, 2.84).",
     [("GET", _SRV + "/os-instance-actions/{request_id}")], None),
    ("os_compute_api:os-instance-actions:events", ADMIN,
     "See the events of a server action.",
     [("GET", _SRV + "/os-instance-actions/{request_id}")], None),
    ("os_compute_api:os-instance-actions:list", READER, "List the actions taken on a server.",
     [("GET", _SRV + "/os-instance-actions")], _ACTIONS_OLD),
    ("os_compute_api:os-instance-actions:show", READER, "Show one action taken on a server.",
     [("GET", _SRV + "/os-instance-actions/{request_id}")], _ACTIONS_OLD),
    ("os_compute_api:os-migrations:index", MANAGER, "List migrations.",
     [("GET", "/os-migrations")], None),
    ("os_compute_api:os-migrations:index:all_projects", ADMIN,
     "List migrations of every project, or of a project other than one's own.",
     [("GET", "/os-migrations")], _MIGRATIONS_OLD),
    ("os_compute_api:os-migrations:index:host", ADMIN,
     "See the source and destination hosts and nodes of listed migrations.",
     [("GET", "/os-migrations")], _MIGRATIONS_OLD),
    (_S + "migrations:show", ADMIN, "Show an in-progress live migration of a server.",
     [("GET", _SRV + "/migrations/{migration_id}")], None),
    (_S + "migrations:index", MANAGER, "List the in-progress live migrations of a server.",
     [("GET", _SRV + "/migrations")], None),
    (_S + "migrations:index:host", ADMIN,
     "See the hosts and nodes of a server's in-progress live migrations.",
     [("GET", _SRV + "/migrations")],
     _deprecated(_S + "migrations:index", ADMIN, "32.0.0", _HOST_REASON)),
    (_S + "migrations:force_complete", MANAGER,
     "Force a running live migration of a server to complete at once.",
     [("POST", _SRV + "/migrations/{migration_id}/action (force_complete)")], None),
    (_S + "migrations:delete", MANAGER, "Abort an in-progress live migration of a server.",
     [("DELETE", _SRV + "/migrations/{migration_id}")], None),
    ("os_compute_api:os-server-tags:delete_all", MEMBER, "Remove every tag of a server.",
     [("DELETE", _SRV + "/tags")], None),
    ("os_compute_api:os-server-tags:index", READER, "List the tags of a server.",
     [("GET", _SRV + "/tags")], None),
    ("os_compute_api:os-server-tags:update_all", MEMBER, "Replace the tags of a server.",
     [("PUT", _SRV + "/tags")], None),
    ("os_compute_api:os-server-tags:delete", MEMBER, "Remove one tag of a server.",
     [("DELETE", _SRV + "/tags/{tag}")], None),
    ("os_compute_api:os-server-tags:update", MEMBER, "Add one tag to a server.",
     [("PUT", _SRV + "/tags/{tag}")], None),
    ("os_compute_api:os-server-tags:show", READER, "Check whether a server has a tag.",
     [("GET", _SRV + "/tags/{tag}")], None),
    # volume attachments
    ("os_compute_api:os-volumes-attachments:index", READER,
     "List the volumes attached to a server.", [("GET", _SRV + "/os-volume_attachments")], None),
    ("os_compute_api:os-volumes-attachments:create", MEMBER, "Attach a volume to a server.",
     [("POST", _SRV + "/os-volume_attachments")], None),
    ("os_compute_api:os-volumes-attachments:show", READER,
     "Show one volume attachment of a server.",
     [("GET", _SRV + "/os-volume_attachments/{volume_id}")], None),
    ("os_compute_api:os-volumes-attachments:delete", MEMBER, "Detach a volume from a server.",
     [("DELETE", _SRV + "/os-volume_attachments/{volume_id}")], None),
    # flavors
    ("os_compute_api:os-flavor-access:add_tenant_access", ADMIN,
     "Give a project access to a private flavor.",
     [("POST", _FLAVOR + "/action (addTenantAccess)")], None),
    ("os_compute_api:os-flavor-access:remove_tenant_access", ADMIN,
     "Take a project's access to a private flavor away.",
     [("POST", _FLAVOR + "/action (removeTenantAccess)")], None),
    ("os_compute_api:os-flavor-access", ADMIN, "List the projects that may use a private flavor.",
     [("GET", _FLAVOR + "/os-flavor-access")],
     _deprecated("os_compute_api:os-flavor-access", "rule:admin_or_owner", "21.0.0",
                 _ROLES_REASON)),
    ("os_compute_api:os-flavor-extra-specs:show", READER, "Show one extra spec of a flavor.",
     [("GET", _SPEC)], None),
    ("os_compute_api:os-flavor-extra-specs:create", ADMIN, "Add extra specs to a flavor.",
     [("POST", _FLAVOR + "/os-extra_specs/")], None),
    ("os_compute_api:os-flavor-extra-specs:update", ADMIN, "Change one extra spec of a flavor.",
     [("PUT", _SPEC)], None),
    ("os_compute_api:os-flavor-extra-specs:delete", ADMIN, "Remove one extra spec of a flavor.",
     [("DELETE", _SPEC)], None),
    ("os_compute_api:os-flavor-extra-specs:index", READER,
     "List a flavor's extra specs, also within flavor descriptions (2.61).",
     [("GET", _FLAVOR + "/os-extra_specs/"), ("POST", "/flavors"), ("GET", "/flavors/detail"),
      ("GET", _FLAVOR), ("PUT", _FLAVOR)], None),
    ("os_compute_api:os-flavor-manage:create", ADMIN, "Create a flavor.",
     [("POST", "/flavors")], None),
    ("os_compute_api:os-flavor-manage:update", ADMIN, "Change a flavor's description.",
     [("PUT", _FLAVOR)], None),
    ("os_compute_api:os-flavor-manage:delete", ADMIN, "Delete a flavor.",
     [("DELETE", _FLAVOR)], None),
    # key pairs
    ("os_compute_api:os-keypairs:index", OWNER_USER, "List a user's key pairs.",
     [("GET", "/os-keypairs")], None),
    ("os_compute_api:os-keypairs:create", OWNER_USER, "Create or import a key pair.",
     [("POST", "/os-keypairs")], None),
    ("os_compute_api:os-keypairs:delete", OWNER_USER, "Delete a key pair.",
     [("DELETE", "/os-keypairs/{keypair_name}")], None),
    ("os_compute_api:os-keypairs:show", OWNER_USER, "Show a key pair.",
     [("GET", "/os-keypairs/{keypair_name}")], None),
    # limits
    ("os_compute_api:limits", ANYONE, "Show the limits and usage of one's project.",
     [("GET", "/limits")], None),
    ("os_compute_api:limits:other_project", ADMIN,
     "Show the limits and usage of another project (tenant_id).", [("GET", "/limits")],
     _deprecated("os_compute_api:os-used-limits", "rule:admin_api", "21.0.0", _SPLIT_REASON)),
    # server groups
    ("os_compute_api:os-server-groups:create", MEMBER, "Create a server group.",
     [("POST", "/os-server-groups")], None),
    ("os_compute_api:os-server-groups:delete", MEMBER, "Delete a server group.",
     [("DELETE", "/os-server-groups/{server_group_id}")], None),
    ("os_compute_api:os-server-groups:index", READER, "List the server groups of a project.",
     [("GET", "/os-server-groups")], None),
    ("os_compute_api:os-server-groups:index:all_projects", ADMIN,
     "List the server groups of every project.", [("GET", "/os-server-groups")], None),
    ("os_compute_api:os-server-groups:show", READER, "Show a server group.",
     [("GET", "/os-server-groups/{server_group_id}")], None),
    # infrastructure
    ("os_compute_api:os-services:list", ADMIN, "List the services and their state.",
     [("GET", "/os-services")], _SERVICES_OLD),
    ("os_compute_api:os-services:update", ADMIN,
     "Enable, disable or force down a service.", [("PUT", "/os-services/{service_id}")],
     _SERVICES_OLD),
    ("os_compute_api:os-services:delete", ADMIN, "Delete a service record.",
     [("DELETE", "/os-services/{service_id}")], _SERVICES_OLD),
    (_HYP + ":list", ADMIN, "List hypervisors.", [("GET", "/os-hypervisors")], _HYP_OLD),
    (_HYP + ":list-detail", ADMIN, "List hypervisors with details.",
     [("GET", "/os-hypervisors/details")], _HYP_OLD),
    (_HYP + ":statistics", ADMIN, "Show totals over every hypervisor.",
     [("GET", "/os-hypervisors/statistics")], _HYP_OLD),
    (_HYP + ":show", ADMIN, "Show a hypervisor.",
     [("GET", "/os-hypervisors/{hypervisor_id}")], _HYP_OLD),
    (_HYP + ":search", ADMIN, "Find hypervisors by host name.",
     [("GET", "/os-hypervisors/{hypervisor_hostname_pattern}/search")], _HYP_OLD),
    (_HYP + ":servers", ADMIN, "List the servers of the hypervisors matching a host name.",
     [("GET", "/os-hypervisors/{hypervisor_hostname_pattern}/servers")], _HYP_OLD),
    ("os_compute_api:os-availability-zone:list", ANYONE, "List the availability zones.",
     [("GET", "/os-availability-zone")], None),
    ("os_compute_api:os-availability-zone:detail", ADMIN,
     "List the availability zones with their hosts and services.",
     [("GET", "/os-availability-zone/detail")], None),
    ("os_compute_api:os-aggregates:set_metadata", ADMIN, "Set the metadata of a host aggregate.",
     [("POST", _AGG + "/action (set_metadata)")], None),
    ("os_compute_api:os-aggregates:add_host", ADMIN, "Add a host to a host aggregate.",
     [("POST", _AGG + "/action (add_host)")], None),
    ("os_compute_api:os-aggregates:create", ADMIN, "Create a host aggregate.",
     [("POST", "/os-aggregates")], None),
    ("os_compute_api:os-aggregates:remove_host", ADMIN, "Remove a host from a host aggregate.",
     [("POST", _AGG + "/action (remove_host)")], None),
    ("os_compute_api:os-aggregates:update", ADMIN,
     "Rename a host aggregate or change its availability zone.", [("PUT", _AGG)], None),
    ("os_compute_api:os-aggregates:index", ADMIN, "List host aggregates.",
     [("GET", "/os-aggregates")], None),
    ("os_compute_api:os-aggregates:delete", ADMIN, "Delete a host aggregate.",
     [("DELETE", _AGG)], None),
    ("os_compute_api:os-aggregates:show", ADMIN, "Show a host aggregate.",
     [("GET", _AGG)], None),
]


def list_rules():
    rules = [policy.RuleDefault(name, check, description=description, deprecated_rule=old)
             for name, check, description, old in _BASE]
    rules += [policy.DocumentedRuleDefault(
        name=name, check_str=check, description=description,
        operations=[{"method": method, "path": path} for method, path in operations],
        scope_types=["project"], deprecated_rule=old)
        for name, check, description, operations, old in _RULES]
    return rules
