"""oslo.policy defaults of Novella's APIs, with the reference's rule names.

``compute.list_rules()`` feeds the Compute API's enforcer,
``placement.list_rules()`` the Placement API's. Operators override any rule
in a policy file exactly as they would for the reference.
"""
from oslo_policy import policy


def make_enforcer(conf, rules):
    """An Enforcer over ``conf`` with ``rules`` registered as defaults."""
    enforcer = policy.Enforcer(conf)
    enforcer.register_defaults(rules)
    return enforcer
