"""Default policy rules of the Placement API (names as in the reference)."""
from oslo_policy import policy

_DEPRECATED_ADMIN = policy.DeprecatedRule(
    name="rule:admin_api", check_str="role:admin",
    deprecated_reason="Placement policies use new default roles with scope types.",
    deprecated_since="W")

ADMIN_OR_SERVICE = "rule:admin_or_service_api"

_BASE = [
    policy.RuleDefault("admin_api", "role:admin", description="Administrators.",
                       scope_types=["project"]),
    policy.RuleDefault("service_api", "role:service", description="Other services.",
                       scope_types=["project"],
                       deprecated_rule=_DEPRECATED_ADMIN),
    policy.RuleDefault("admin_or_service_api", "role:admin or role:service",
                       description="An administrator or another service.",
                       scope_types=["project"], deprecated_rule=_DEPRECATED_ADMIN),
    policy.RuleDefault("project_reader_api",
                       "role:reader and project_id:%(project_id)s",
                       description="The reader role on the target's project.",
                       deprecated_rule=_DEPRECATED_ADMIN),
    policy.RuleDefault("admin_or_project_reader_or_service_api",
                       "role:admin or rule:project_reader_api or role:service",
                       description="An administrator, a reader of the target's project, "
                                   "or another service.",
                       scope_types=["project"], deprecated_rule=_DEPRECATED_ADMIN),
]

_RP = "/resource_providers"
_ONE = _RP + "/{uuid}"
_INV = _ONE + "/inventories"
_CONSUMER = "/allocations/{consumer_uuid}"

# (name, default, description, operations)
_RULES = [
    ("resource_providers:list", ADMIN_OR_SERVICE, "List resource providers.", [("GET", _RP)]),
    ("resource_providers:create", ADMIN_OR_SERVICE, "Create a resource provider.",
     [("POST", _RP)]),
    ("resource_providers:show", ADMIN_OR_SERVICE, "Show a resource provider.", [("GET", _ONE)]),
    ("resource_providers:update", ADMIN_OR_SERVICE,
     "Rename a resource provider or change its parent.", [("PUT", _ONE)]),
    ("resource_providers:delete", ADMIN_OR_SERVICE, "Delete a resource provider.",
     [("DELETE", _ONE)]),
    ("resource_classes:list", ADMIN_OR_SERVICE, "List resource classes.",
     [("GET", "/resource_classes")]),
    ("resource_classes:create", ADMIN_OR_SERVICE, "Create a custom resource class.",
     [("POST", "/resource_classes")]),
    ("resource_classes:show", ADMIN_OR_SERVICE, "Show a resource class.",
     [("GET", "/resource_classes/{name}")]),
    ("resource_classes:update", ADMIN_OR_SERVICE, "Create or keep a custom resource class.",
     [("PUT", "/resource_classes/{name}")]),
    ("resource_classes:delete", ADMIN_OR_SERVICE, "Delete a custom resource class.",
     [("DELETE", "/resource_classes/{name}")]),
    ("resource_providers:inventories:list", ADMIN_OR_SERVICE,
     "List the inventories of a resource provider.", [("GET", _INV)]),
    ("resource_providers:inventories:create", ADMIN_OR_SERVICE,
     "Add one inventory to a resource provider.", [("POST", _INV)]),
    ("resource_providers:inventories:show", ADMIN_OR_SERVICE,
     "Show one inventory of a resource provider.", [("GET", _INV + "/{resource_class}")]),
    ("resource_providers:inventories:update", ADMIN_OR_SERVICE,
     "Replace the inventories of a resource provider, or change one.",
     [("PUT", _INV), ("PUT", _INV + "/{resource_class}")]),
    ("resource_providers:inventories:delete", ADMIN_OR_SERVICE,
     "Remove the inventories of a resource provider, or one of them.",
     [("DELETE", _INV), ("DELETE", _INV + "/{resource_class}")]),
    ("resource_providers:aggregates:list", ADMIN_OR_SERVICE,
     "List the aggregates a resource provider belongs to.", [("GET", _ONE + "/aggregates")]),
    ("resource_providers:aggregates:update", ADMIN_OR_SERVICE,
     "Replace the aggregates of a resource provider.", [("PUT", _ONE + "/aggregates")]),
    ("resource_providers:usages", ADMIN_OR_SERVICE,
     "Show what is consumed of each resource class of a provider.",
     [("GET", _ONE + "/usages")]),
    ("usages", "rule:admin_or_project_reader_or_service_api",
     "Show the usages of a project (and user), by resource class and consumer type.",
     [("GET", "/usages")]),
    ("traits:list", ADMIN_OR_SERVICE, "List traits.", [("GET", "/traits")]),
    ("traits:show", ADMIN_OR_SERVICE, "Check that a trait exists.", [("GET", "/traits/{name}")]),
    ("traits:update", ADMIN_OR_SERVICE, "Create a custom trait.", [("PUT", "/traits/{name}")]),
    ("traits:delete", ADMIN_OR_SERVICE, "Delete a custom trait.",
     [("DELETE", "/traits/{name}")]),
    ("resource_providers:traits:list", ADMIN_OR_SERVICE,
     "List the traits of a resource provider.", [("GET", _ONE + "/traits")]),
    ("resource_providers:traits:update", ADMIN_OR_SERVICE,
     "Replace the traits of a resource provider.", [("PUT", _ONE + "/traits")]),
    ("resource_providers:traits:delete", ADMIN_OR_SERVICE,
     "Remove every trait of a resource provider.", [("DELETE", _ONE + "/traits")]),
    ("allocations:manage", ADMIN_OR_SERVICE,
     "Write the allocations of several consumers at once.", [("POST", "/allocations")]),
    ("allocations:list", ADMIN_OR_SERVICE, "Show the allocations of a consumer.",
     [("GET", _CONSUMER)]),
    ("allocations:update", ADMIN_OR_SERVICE, "Replace the allocations of a consumer.",
     [("PUT", _CONSUMER)]),
    ("allocations:delete", ADMIN_OR_SERVICE, "Delete the allocations of a consumer.",
     [("DELETE", _CONSUMER)]),
    ("resource_providers:allocations:list", ADMIN_OR_SERVICE,
     "List the allocations made against a resource provider.",
     [("GET", _ONE + "/allocations")]),
    ("allocation_candidates:list", ADMIN_OR_SERVICE,
     "Ask which providers could satisfy a request for resources and traits.",
     [("GET", "/allocation_candidates")]),
    ("reshaper:reshape", "rule:service_api",
     "Move inventories and allocations between providers in one step.",
     [("POST", "/reshaper")]),
]


def list_rules():
    return list(_BASE) + [policy.DocumentedRuleDefault(
        name="placement:" + name, check_str=check, description=description,
        operations=[{"method": method, "path": path} for method, path in operations],
        scope_types=["project"])
        for name, check, description, operations in _RULES]
