"""Default policy rules of the Infrastructure Optimization API: the reference's
rule names, every operation for administrators (its ``admin_api`` default)."""
from oslo_policy import policy

from novella.policies import compute

ADMIN = "rule:admin_api"

_OPERATIONS = {
    "goal": ("get_all", "detail", "get"),
    "strategy": ("get_all", "detail", "get"),
    "audit_template": ("get_all", "detail", "get", "create", "update", "delete"),
    "audit": ("get_all", "detail", "get", "create", "update", "delete"),
    "action_plan": ("get_all", "detail", "get", "start", "update", "delete"),
    "action": ("get_all", "detail", "get", "update"),
}


def list_rules():
    rules = [policy.RuleDefault("admin_api", "role:admin or role:administrator",
                                description="Administrators of the cloud.")]
    # One policy file may serve every API (the all-in-one): the base rules its Compute
    # rules name are known here too, so they are not reported as undefined.
    rules += [policy.RuleDefault(name, check, description=description)
              for name, check, description, _old in compute.BASE if name != "admin_api"]
    for resource, operations in _OPERATIONS.items():
        for op in operations:
            rules.append(policy.RuleDefault(f"{resource}:{op}", ADMIN,
                                            description=f"{op} of {resource} resources."))
    return rules
