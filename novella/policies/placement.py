"""Default policy rules of the Placement API (names as in the reference)."""
from oslo_policy import policy

_DEPRECATED_ADMIN = policy.DeprecatedRule(
    name="rule:admin_api", check_str="role:admin",
    deprecated_reason="Placement policies use new default roles with scope types.",
    deprecated_since="W")

ADMIN_OR_SERVICE = "rule:admin_or_service_api"

_BASE = [
    policy.RuleDefault("admin_api", "role:admin", scope_types=["project"]),
    policy.RuleDefault("service_api", "role:service", scope_types=["project"],
                       deprecated_rule=_DEPRECATED_ADMIN),
    policy.RuleDefault("admin_or_service_api", "role:admin or role:service",
                       scope_types=["project"], deprecated_rule=_DEPRECATED_ADMIN),
    policy.RuleDefault("project_reader_api",
                       "role:reader and project_id:%(project_id)s",
                       deprecated_rule=_DEPRECATED_ADMIN),
    policy.RuleDefault("admin_or_project_reader_or_service_api",
                       "role:admin or rule:project_reader_api or role:service",
                       scope_types=["project"], deprecated_rule=_DEPRECATED_ADMIN),
]

_ACTIONS = {
    "resource_providers": ("list", "create", "show", "update", "delete"),
    "resource_classes": ("list", "create", "show", "update", "delete"),
    "resource_providers:inventories": ("list", "create", "show", "update", "delete"),
    "resource_providers:aggregates": ("list", "update"),
    "resource_providers:usages": (None,),
    "traits": ("list", "show", "update", "delete"),
    "resource_providers:traits": ("list", "update", "delete"),
    "allocations": ("manage", "list", "update", "delete"),
    "resource_providers:allocations": ("list",),
    "allocation_candidates": ("list",),
}


def _rule(name, check=ADMIN_OR_SERVICE):
    return policy.RuleDefault(name, check, scope_types=["project"])


def list_rules():
    rules = list(_BASE)
    for prefix, actions in _ACTIONS.items():
        for action in actions:
            rules.append(_rule("placement:%s%s" % (prefix, ":" + action if action else "")))
    rules.append(_rule("placement:usages", "rule:admin_or_project_reader_or_service_api"))
    rules.append(_rule("placement:reshaper:reshape", "rule:service_api"))
    return rules
