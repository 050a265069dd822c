"""The check strings every Compute API rule is made of, and deprecated rules.

The role-based defaults (reader, member, manager, admin, service) as rules of
the base set (``compute.BASE``), so an operator can redefine one in a policy
file and every rule built on it follows.
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


def deprecated(name, check, since, reason):
    """A rule's name and check string before ``since`` (a release), and why it changed."""
    return policy.DeprecatedRule(name=name, check_str=check,
                                 deprecated_reason=reason, deprecated_since=since)
