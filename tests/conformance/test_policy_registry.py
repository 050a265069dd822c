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


_QUOTA_REQUESTS = {
    "os_compute_api:os-quota-sets:show": ("get", "/os-quota-sets/project-a", None),
    "os_compute_api:os-quota-sets:detail": ("get", "/os-quota-sets/project-a/detail", None),
    "os_compute_api:os-quota-sets:defaults": ("get", "/os-quota-sets/project-a/defaults", None),
    "os_compute_api:os-quota-sets:update": ("put", "/os-quota-sets/project-a",
                                            {"quota_set": {"instances": 3}}),
    "os_compute_api:os-quota-sets:delete": ("delete", "/os-quota-sets/project-a", None),
    "os_compute_api:os-quota-class-sets:show": ("get", "/os-quota-class-sets/default", None),
    "os_compute_api:os-quota-class-sets:update": ("put", "/os-quota-class-sets/default",
                                                  {"quota_class_set": {"instances": 3}}),
}


def test_every_quota_rule_is_registered_and_checked(tmp_path):
    """An operator's override of each quota rule decides its operation."""
    from oslo_policy import policy
    from tests.functional.api.conftest import Cloud

    assert set(_QUOTA_REQUESTS) == {r.name for r in compute.list_rules() if "quota" in r.name}
    cloud = Cloud(tmp_path)
    enforcer = cloud.app.wrapped.app.api.enforcer
    assert set(_QUOTA_REQUESTS) <= set(enforcer.registered_rules)

    def send(client, rule):
        method, path, body = _QUOTA_REQUESTS[rule]
        args = (path, body) if method == "put" else (path,)
        return getattr(client, method)(*args).status_int

    # The defaults: a project reader sees its quotas; only an admin changes them.
    assert send(cloud.reader, "os_compute_api:os-quota-sets:show") == 200
    assert send(cloud.reader, "os_compute_api:os-quota-sets:detail") == 200
    assert send(cloud.other, "os_compute_api:os-quota-sets:show") == 403
    assert send(cloud.user, "os_compute_api:os-quota-sets:update") == 403
    assert send(cloud.user, "os_compute_api:os-quota-class-sets:show") == 403
    enforcer.load_rules()
    for rule in _QUOTA_REQUESTS:
        enforcer.set_rules(policy.Rules.from_dict({rule: "!"}), overwrite=False,
                           use_conf=False)
        assert send(cloud.admin, rule) == 403, rule
        enforcer.set_rules(policy.Rules.from_dict({rule: "@"}), overwrite=False,
                           use_conf=False)
        assert send(cloud.user, rule) in (200, 202), rule
    # Refused while forbidden, done once allowed: the last update stood.
    shown = cloud.admin.get("/os-quota-class-sets/default").json["quota_class_set"]
    assert shown["instances"] == 3


def test_host_status_unknown_only_shows_only_unknown(tmp_path):
    """show:host_status:unknown-only: the field only where it is UNKNOWN, in a
    server and in a list, for whom show:host_status does not allow it all."""
    from oslo_policy import policy
    from tests.functional.api.conftest import Cloud

    cloud = Cloud(tmp_path)
    cloud.compute_host("cell1", "h1")
    up = cloud.instance("cell1", host="h1")
    lost = cloud.instance("cell1", host="gone-host")
    enforcer = cloud.app.wrapped.app.api.enforcer

    def shown():
        one = {sid: cloud.user.get("/servers/" + sid, version="2.16").json["server"].get(
            "host_status") for sid in (up, lost)}
        listed = {s["id"]: s.get("host_status") for s in cloud.user.get(
            "/servers/detail", version="2.16").json["servers"]}
        assert one == listed
        return one

    assert shown() == {up: None, lost: None}  # the defaults: admins only
    enforcer.load_rules()
    enforcer.set_rules(policy.Rules.from_dict(
        {"os_compute_api:servers:show:host_status:unknown-only": "@"}), overwrite=False,
        use_conf=False)
    assert shown() == {up: None, lost: "UNKNOWN"}
    enforcer.set_rules(policy.Rules.from_dict(
        {"os_compute_api:servers:show:host_status": "@"}), overwrite=False, use_conf=False)
    assert shown() == {up: "UP", lost: "UNKNOWN"}


# Reference rules whose operation Novella serves, of a part of it Novella does
# not have (docs/conformance.md, "Policy rules: compute", says which).
_PART_NOT_SERVED = {"network:attach_external_network",
                    "os_compute_api:servers:create:trusted_certs"}


def _served():
    """(method, path) of every operation the Compute API serves, path
    parameters as ``{}``; a server action as its path and ``(name)``."""
    import re
    from novella.api.compute import actions, wsgi
    from novella.api.compute.handlers import removed
    served = {(method, re.sub(r"\{[^}]*\}", "{}", template))
              for module in wsgi.HANDLER_MODULES if module is not removed
              for method, template, _fn in module.ROUTES}
    served |= {("POST", f"/servers/{{}}/action ({name})") for name in actions.ACTIONS}
    return served


def unregistered_but_served(ours, reference, served):
    """Reference rules Novella does not register although it serves one of
    their operations (a server action by name; another action by its path)."""
    import re
    names = {r.name for r in ours}
    out = []
    for rule in reference:
        if rule.name in names or rule.name in _PART_NOT_SERVED:
            continue
        for op in getattr(rule, "operations", None) or []:
            path = re.sub(r"\{[^}]*\}", "{}", op["path"])
            if not path.startswith("/servers/{}/action"):
                path = path.split(" (")[0]
            if (op["method"], path) in served:
                out.append(rule.name)
                break
    return out


def test_every_rule_of_a_served_api_is_registered():
    assert unregistered_but_served(compute.list_rules(), nova_policies.list_rules(),
                                   _served()) == []


def test_an_unregistered_rule_of_a_served_api_is_found():
    from oslo_policy import policy
    ref = [policy.DocumentedRuleDefault("a:lock", "@", "d", [
        {"method": "POST", "path": "/servers/{server_id}/action (lock)"}]),
        policy.DocumentedRuleDefault("a:list", "@", "d", [
            {"method": "GET", "path": "/os-things"}]),
        policy.DocumentedRuleDefault("a:pause", "@", "d", [
            {"method": "POST", "path": "/servers/{server_id}/action (pause)"}])]
    served = {("POST", "/servers/{}/action (lock)"), ("GET", "/os-things")}
    assert unregistered_but_served([], ref, served) == ["a:lock", "a:list"]
    assert unregistered_but_served(ref[:1], ref, served) == ["a:list"]
