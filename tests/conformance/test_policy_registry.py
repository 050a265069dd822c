"""Novella's policy rules against the reference's registries.

The reference's rules come from the installed packages (``nova`` 34.0.0 and
``openstack-placement`` 16.0.0, test dependencies): ``nova.policies`` and
``placement.policies``. A rule is compared by its default check string,
scope types, kind (documented or not), operations and deprecated alias
(name, check string, release). Descriptions are Novella's own: they must
exist, and are not compared. Every difference kept is a row of the tables
"Policy rules: compute" and "Policy rules: placement" of
docs/conformance.md.
"""
import pytest

from novella.policies import compute, placement as placement_rules
from tests.conformance import registry_diff

nova_policies = pytest.importorskip("nova.policies")
placement_policies = pytest.importorskip("placement.policies")


def _facts(rule):
    old = rule.deprecated_rule
    return {
        "check": rule.check_str,
        "scope": sorted(rule.scope_types or []),
        "kind": type(rule).__name__,
        "operations": sorted((o["method"], o["path"])
                             for o in getattr(rule, "operations", None) or []),
        "deprecated": (old.name, old.check_str, old.deprecated_since) if old else None,
    }


def differences(ours, reference):
    ours = {r.name: r for r in ours}
    reference = {r.name: r for r in reference}
    found = []
    for name in sorted(set(ours) | set(reference)):
        if name not in ours:
            found.append((name, "not registered"))
        elif name not in reference:
            found.append((name, "not in the reference"))
        else:
            mine, theirs = _facts(ours[name]), _facts(reference[name])
            found += [(name, key) for key in mine if mine[key] != theirs[key]]
    return found


def test_compute_rules_match_the_reference():
    registry_diff.check(differences(compute.list_rules(), nova_policies.list_rules()),
                        "Policy rules: compute")


def test_placement_rules_match_the_reference():
    registry_diff.check(differences(placement_rules.list_rules(),
                                    placement_policies.list_rules()),
                        "Policy rules: placement")


@pytest.mark.parametrize("rules", [compute.list_rules, placement_rules.list_rules])
def test_every_rule_is_described(rules):
    assert [r.name for r in rules() if not (r.description or "").strip()] == []


def test_comparison_sees_each_kind_of_difference():
    from oslo_policy import policy
    ref = [policy.DocumentedRuleDefault(
        "a", "rule:x", "d", [{"method": "GET", "path": "/a"}], scope_types=["project"],
        deprecated_rule=policy.DeprecatedRule("old", "rule:y", deprecated_reason="r",
                                              deprecated_since="1")),
        policy.RuleDefault("b", "@")]
    ours = [policy.RuleDefault("a", "rule:z", scope_types=["system"]),
            policy.RuleDefault("c", "@")]
    assert differences(ours, ref) == [
        ("a", "check"), ("a", "scope"), ("a", "kind"), ("a", "operations"),
        ("a", "deprecated"), ("b", "not registered"), ("c", "not in the reference")]



@pytest.mark.parametrize("namespace, rules", [
    ("novella", compute.list_rules), ("novella.placement", placement_rules.list_rules)])
def test_policy_sample_generator_writes_every_rule(namespace, rules):
    import subprocess
    import sys
    done = subprocess.run([sys.executable, "-c",
                           "import sys; from oslo_policy import generator; "
                           "sys.exit(generator.generate_sample())",
                           "--namespace", namespace], capture_output=True, text=True,
                          timeout=60, check=True)
    written = {line[2:].split('"', 1)[0] for line in done.stdout.splitlines()
               if line.startswith('#"')}
    assert {r.name for r in rules()} <= written
