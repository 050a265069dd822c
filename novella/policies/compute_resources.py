"""Policy rules of the Compute API's smaller resources: a server's addresses and
metadata, hosts, usage reports, diagnostics, passwords, external events, the
extensions list and the proxies to the network and volume services.

Same form as ``compute._RULES``: (name, default, description, operations,
deprecated rule or None); ``compute.list_rules()`` registers them.
"""
from novella.policies.checks import ADMIN, ANYONE, MEMBER, READER, SERVICE, deprecated

_SRV = "/servers/{server_id}"
_SG = "os_compute_api:os-security-groups:"
_VOL = "os_compute_api:os-volumes:"
_MD = "os_compute_api:server-metadata:"
_VOL_OLD = deprecated("os_compute_api:os-volumes", "rule:admin_or_owner", "22.0.0",
                       "The rule was split into one rule per operation.")
_HOSTS_OLD = deprecated("os_compute_api:os-hosts", "rule:admin_api", "22.0.0",
                         "The rule was split into one rule per operation.")
_AUDIT_OLD = deprecated("os_compute_api:os-instance-usage-audit-log", "rule:admin_api",
                         "21.0.0", "The rule was split into one rule per operation.")
_PASSWORD_OLD = deprecated("os_compute_api:os-server-password", "rule:admin_or_owner",
                            "21.0.0", "The rule was split into one rule per operation.")
_HYP_OLD = deprecated("os_compute_api:os-hypervisors", "rule:admin_api", "21.0.0",
                       "The rule was split into one rule per operation.")
_FIP_OLD = deprecated("os_compute_api:os-floating-ips", "rule:admin_or_owner", "22.0.0",
                       "The rule was split into one rule per operation.")
_NET_OLD = deprecated("os_compute_api:os-networks:view", "rule:admin_or_owner", "22.0.0",
                       "The rule was split into one rule per operation.")
_TENANT_NET_OLD = deprecated("os_compute_api:os-tenant-networks", "rule:admin_or_owner",
                              "22.0.0", "The rule was split into one rule per operation.")
_SG_OLD = deprecated("os_compute_api:os-security-groups", "rule:admin_or_owner", "22.0.0",
                      "The rule was split into one rule per operation.")

RULES = [
    # a server's addresses and metadata
    ("os_compute_api:ips:index", READER, "List a server's addresses by network.",
     [("GET", _SRV + "/ips")], None),
    ("os_compute_api:ips:show", READER, "List a server's addresses on one network.",
     [("GET", _SRV + "/ips/{network_label}")], None),
    (_MD + "index", READER, "List a server's metadata.", [("GET", _SRV + "/metadata")], None),
    (_MD + "show", READER, "Show one metadata item of a server.",
     [("GET", _SRV + "/metadata/{key}")], None),
    (_MD + "create", MEMBER, "Add or change metadata items of a server.",
     [("POST", _SRV + "/metadata")], None),
    (_MD + "update_all", MEMBER, "Replace all the metadata of a server.",
     [("PUT", _SRV + "/metadata")], None),
    (_MD + "update", MEMBER, "Set one metadata item of a server.",
     [("PUT", _SRV + "/metadata/{key}")], None),
    (_MD + "delete", MEMBER, "Delete one metadata item of a server.",
     [("DELETE", _SRV + "/metadata/{key}")], None),
    # security groups: the proxies to the network service (before 2.36) and a server's
    (_SG + "get", READER, "List security groups.", [("GET", "/os-security-groups")], _SG_OLD),
    (_SG + "show", READER, "Show a security group.",
     [("GET", "/os-security-groups/{security_group_id}")], _SG_OLD),
    (_SG + "create", MEMBER, "Create a security group.", [("POST", "/os-security-groups")],
     _SG_OLD),
    (_SG + "update", MEMBER, "Update a security group.",
     [("PUT", "/os-security-groups/{security_group_id}")], _SG_OLD),
    (_SG + "delete", MEMBER, "Delete a security group.",
     [("DELETE", "/os-security-groups/{security_group_id}")], _SG_OLD),
    (_SG + "rule:create", MEMBER, "Create a security group rule.",
     [("POST", "/os-security-group-rules")], _SG_OLD),
    (_SG + "rule:delete", MEMBER, "Delete a security group rule.",
     [("DELETE", "/os-security-group-rules/{security_group_id}")], _SG_OLD),
    (_SG + "list", READER, "List a server's security groups.",
     [("GET", _SRV + "/os-security-groups")], _SG_OLD),
    (_SG + "add", MEMBER, "Add a security group to a server's ports.",
     [("POST", _SRV + "/action (addSecurityGroup)")], _SG_OLD),
    (_SG + "remove", MEMBER, "Remove a security group from a server's ports.",
     [("POST", _SRV + "/action (removeSecurityGroup)")], _SG_OLD),
    # volumes: the proxy to the volume service (before 2.36)
    (_VOL + "list", READER, "List volumes.", [("GET", "/os-volumes")], _VOL_OLD),
    (_VOL + "create", MEMBER, "Create a volume.", [("POST", "/os-volumes")], _VOL_OLD),
    (_VOL + "detail", READER, "List volumes with details.", [("GET", "/os-volumes/detail")],
     _VOL_OLD),
    (_VOL + "show", READER, "Show a volume.", [("GET", "/os-volumes/{volume_id}")], _VOL_OLD),
    (_VOL + "delete", MEMBER, "Delete a volume.", [("DELETE", "/os-volumes/{volume_id}")],
     _VOL_OLD),
    (_VOL + "snapshots:list", READER, "List volume snapshots.", [("GET", "/os-snapshots")],
     _VOL_OLD),
    (_VOL + "snapshots:create", MEMBER, "Create a volume snapshot.",
     [("POST", "/os-snapshots")], _VOL_OLD),
    (_VOL + "snapshots:detail", READER, "List volume snapshots with details.",
     [("GET", "/os-snapshots/detail")], _VOL_OLD),
    (_VOL + "snapshots:show", READER, "Show a volume snapshot.",
     [("GET", "/os-snapshots/{snapshot_id}")], _VOL_OLD),
    (_VOL + "snapshots:delete", MEMBER, "Delete a volume snapshot.",
     [("DELETE", "/os-snapshots/{snapshot_id}")], _VOL_OLD),
    # a server's diagnostics and password; events about servers
    ("os_compute_api:os-server-diagnostics", ADMIN, "Show a server's diagnostics.",
     [("GET", _SRV + "/diagnostics")], None),
    ("os_compute_api:os-server-password:show", READER, "Show a server's encrypted password.",
     [("GET", _SRV + "/os-server-password")], _PASSWORD_OLD),
    ("os_compute_api:os-server-password:clear", MEMBER, "Clear a server's encrypted password.",
     [("DELETE", _SRV + "/os-server-password")], _PASSWORD_OLD),
    ("os_compute_api:os-server-external-events:create", SERVICE,
     "Tell the compute service of another service's event about a server.",
     [("POST", "/os-server-external-events")], None),
    # infrastructure and usage
    ("os_compute_api:extensions", ANYONE, "List the API extensions.",
     [("GET", "/extensions"), ("GET", "/extensions/{alias}")], None),
    ("os_compute_api:os-hypervisors:uptime", ADMIN, "Show a hypervisor's uptime.",
     [("GET", "/os-hypervisors/{hypervisor_id}/uptime")], _HYP_OLD),
    ("os_compute_api:os-hosts:list", ADMIN, "List the hosts.", [("GET", "/os-hosts")],
     _HOSTS_OLD),
    ("os_compute_api:os-hosts:show", ADMIN, "Show a host's resources.",
     [("GET", "/os-hosts/{host_name}")], _HOSTS_OLD),
    ("os_compute_api:os-hosts:update", ADMIN, "Enable or disable a host.",
     [("PUT", "/os-hosts/{host_name}")], _HOSTS_OLD),
    ("os_compute_api:os-hosts:reboot", ADMIN, "Reboot a host.",
     [("GET", "/os-hosts/{host_name}/reboot")], _HOSTS_OLD),
    ("os_compute_api:os-hosts:shutdown", ADMIN, "Shut a host down.",
     [("GET", "/os-hosts/{host_name}/shutdown")], _HOSTS_OLD),
    ("os_compute_api:os-hosts:start", ADMIN, "Start a host.",
     [("GET", "/os-hosts/{host_name}/startup")], _HOSTS_OLD),
    ("os_compute_api:os-simple-tenant-usage:show", READER, "Show a project's usage.",
     [("GET", "/os-simple-tenant-usage/{tenant_id}")], None),
    ("os_compute_api:os-simple-tenant-usage:list", ADMIN, "List the usage of every project.",
     [("GET", "/os-simple-tenant-usage")], None),
    ("os_compute_api:os-instance-usage-audit-log:list", ADMIN,
     "Show the usage audit of the last period.", [("GET", "/os-instance_usage_audit_log")],
     _AUDIT_OLD),
    ("os_compute_api:os-instance-usage-audit-log:show", ADMIN,
     "Show the usage audit of the period before a time.",
     [("GET", "/os-instance_usage_audit_log/{before_timestamp}")], _AUDIT_OLD),
    # floating IPs: the proxies to the network service (before 2.36) and the actions
    ("os_compute_api:os-floating-ip-pools", ANYONE, "List the floating IP pools.",
     [("GET", "/os-floating-ip-pools")], None),
    ("os_compute_api:os-floating-ips:add", MEMBER, "Associate a floating IP with a server.",
     [("POST", _SRV + "/action (addFloatingIp)")], _FIP_OLD),
    ("os_compute_api:os-floating-ips:remove", MEMBER,
     "Disassociate a floating IP from a server.",
     [("POST", _SRV + "/action (removeFloatingIp)")], _FIP_OLD),
    ("os_compute_api:os-floating-ips:list", READER, "List floating IPs.",
     [("GET", "/os-floating-ips")], _FIP_OLD),
    ("os_compute_api:os-floating-ips:create", MEMBER, "Allocate a floating IP.",
     [("POST", "/os-floating-ips")], _FIP_OLD),
    ("os_compute_api:os-floating-ips:show", READER, "Show a floating IP.",
     [("GET", "/os-floating-ips/{floating_ip_id}")], _FIP_OLD),
    ("os_compute_api:os-floating-ips:delete", MEMBER, "Release a floating IP.",
     [("DELETE", "/os-floating-ips/{floating_ip_id}")], _FIP_OLD),
    # networks: the nova-network shaped proxies to the network service (before 2.36)
    ("os_compute_api:os-networks:list", READER, "List networks.", [("GET", "/os-networks")],
     _NET_OLD),
    ("os_compute_api:os-networks:show", READER, "Show a network.",
     [("GET", "/os-networks/{network_id}")], _NET_OLD),
    ("os_compute_api:os-tenant-networks:list", READER, "List the project's networks.",
     [("GET", "/os-tenant-networks")], _TENANT_NET_OLD),
    ("os_compute_api:os-tenant-networks:show", READER, "Show a network of the project.",
     [("GET", "/os-tenant-networks/{network_id}")], _TENANT_NET_OLD),
]
