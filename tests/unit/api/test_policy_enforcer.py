"""The Compute API's enforcer looks for policy file changes at most once a second."""
from oslo_config import cfg
from oslo_policy import opts as policy_opts
from oslo_policy import policy as oslo_policy

from novella import policies

RULE = oslo_policy.RuleDefault("demo:thing", "role:admin")


def _enforcer(tmp_path, monkeypatch):
    conf = cfg.ConfigOpts()
    conf([], default_config_files=[])
    policy_file = tmp_path / "policy.yaml"
    policy_opts.set_defaults(conf, policy_file=str(policy_file))
    clock = [1000.0]
    monkeypatch.setattr(policies.time, "monotonic", lambda: clock[0])
    return policies.make_enforcer(conf, [RULE]), policy_file, clock


def test_policy_file_change_takes_effect_after_the_check_interval(tmp_path, monkeypatch):
    enforcer, policy_file, clock = _enforcer(tmp_path, monkeypatch)
    member = {"roles": ["member"], "project_id": "p"}
    assert enforcer.enforce("demo:thing", {}, member) is False
    policy_file.write_text('"demo:thing": "role:member"\n')
    clock[0] += 0.5   # within the interval: the file is not looked at yet
    assert enforcer.enforce("demo:thing", {}, member) is False
    clock[0] += 0.6   # past it: the new rule applies
    assert enforcer.enforce("demo:thing", {}, member) is True


def test_files_are_not_searched_on_every_check(tmp_path, monkeypatch):
    enforcer, _policy_file, clock = _enforcer(tmp_path, monkeypatch)
    looked = []
    real = oslo_policy.Enforcer.load_rules
    monkeypatch.setattr(oslo_policy.Enforcer, "load_rules",
                        lambda self, force_reload=False: (looked.append(1), real(self, force_reload)))
    for _ in range(50):
        enforcer.enforce("demo:thing", {}, {"roles": ["admin"], "project_id": "p"})
    assert len(looked) == 1
    clock[0] += 1.0
    enforcer.enforce("demo:thing", {}, {"roles": ["admin"], "project_id": "p"})
    assert len(looked) == 2
