"""A drain that needs the cross-cell policy, without it, says so at plan time
(the rule and how to grant it), and the rule docs/drain.md gives to grant it
is one every API's policy knows."""
import os
import re

import pytest
from oslo_config import cfg
from oslo_policy import opts as policy_opts

from novella.optimize.planner import CROSS_CELL_RULE
from novella.policies import compute, make_enforcer, optimize, placement

DRAIN_DOC = os.path.join(os.path.dirname(__file__), "..", "..", "..", "docs", "drain.md")


def _documented_rule():
    """The check string docs/drain.md grants the cross-cell policy with."""
    [check] = re.findall(r'^\s+"%s": "([^"]+)"$' % re.escape(CROSS_CELL_RULE),
                         open(DRAIN_DOC).read(), re.M)
    return check


def _on(cloud, host, name):
    return cloud.boot(name, flavor="1", availability_zone=f"nova:{host}")


def test_a_cell_drain_without_the_policy_names_the_rule(make_dcloud):
    cloud = make_dcloud()     # the cross-cell policy is left at its default: nobody
    servers = [_on(cloud, "cell1-host1", "a"), _on(cloud, "cell1-host2", "b")]
    audit = cloud.audit("cell_drain", source_cell="cell1")
    assert audit["state"] == "FAILED"
    message = audit["status_message"]
    assert message.startswith("2 of 2 servers cannot be moved; nothing was moved.")
    for sid in servers:
        assert sid in message
    assert "no allocation candidate" not in message
    assert message.count(f"policy rule {CROSS_CELL_RULE} does not let") == 2
    assert f'"{CROSS_CELL_RULE}": "rule:admin_api"' in message
    assert cloud.plan_of(audit) == []


def test_the_documented_rule_lets_an_administrator_drain_a_cell(make_dcloud):
    cloud = make_dcloud()
    cloud.allow_cross_cell(_documented_rule())
    sid = _on(cloud, "cell1-host1", "a")
    audit = cloud.audit("cell_drain", source_cell="cell1")
    assert audit["state"] == "SUCCEEDED", audit["status_message"]
    [plan] = cloud.plan_of(audit)
    [move] = [a for a in cloud.actions(plan["uuid"]) if a["action_type"] == "migrate"]
    assert move["input_parameters"]["resource_id"] == sid
    assert move["input_parameters"]["destination_cell"] == "cell2"


@pytest.mark.parametrize("rules", [compute.list_rules, optimize.list_rules,
                                   placement.list_rules], ids=["compute", "optimize", "placement"])
def test_the_documented_rule_is_defined_for_every_api(rules, tmp_path):
    """One policy file serves every API in the all-in-one: none may find the rule's
    reference undefined (oslo.policy logs it on every load)."""
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text(f'"{CROSS_CELL_RULE}": "{_documented_rule()}"\n')
    conf = cfg.ConfigOpts()
    conf([], default_config_files=[])
    policy_opts._register(conf)
    conf.set_override("policy_file", str(policy_file), group="oslo_policy")
    enforcer = make_enforcer(conf, rules())
    enforcer.load_rules(force_reload=True)
    assert str(enforcer.rules[CROSS_CELL_RULE]) == _documented_rule()
    assert enforcer.check_rules()
