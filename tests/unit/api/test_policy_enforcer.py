"""The enforcer looks for policy file changes at most once a second and remembers decisions."""
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


def _counting_checks(monkeypatch):
    from oslo_policy import _checks
    calls = []
    real = _checks._check
    monkeypatch.setattr(_checks, "_check", lambda *a, **kw: (calls.append(1), real(*a, **kw))[1])
    return calls


def test_decisions_are_remembered_per_credentials_and_target(tmp_path, monkeypatch):
    enforcer, _policy_file, _clock = _enforcer(tmp_path, monkeypatch)
    enforcer.register_default(oslo_policy.RuleDefault("demo:own", "project_id:%(project_id)s"))
    calls = _counting_checks(monkeypatch)
    admin = {"roles": ["admin"], "project_id": "p"}
    member = {"roles": ["member"], "project_id": "p"}
    for _ in range(3):
        assert enforcer.enforce("demo:thing", {}, admin) is True
        assert enforcer.enforce("demo:thing", {}, member) is False
        assert enforcer.enforce("demo:own", {"project_id": "p"}, member) is True
        assert enforcer.enforce("demo:own", {"project_id": "q"}, member) is False
    assert len(calls) == 4  # each distinct question evaluated once
    # A remembered denial still raises when asked to.
    try:
        enforcer.enforce("demo:thing", {}, member, do_raise=True)
    except oslo_policy.PolicyNotAuthorized:
        pass
    else:
        raise AssertionError("a denied check did not raise")


def test_changed_rules_forget_the_decisions(tmp_path, monkeypatch):
    # (A changed policy file is the first test: its decision was remembered too.)
    enforcer, _policy_file, _clock = _enforcer(tmp_path, monkeypatch)
    member = {"roles": ["member"], "project_id": "p"}
    assert enforcer.enforce("demo:thing", {}, member) is False
    enforcer.set_rules(oslo_policy.Rules.from_dict({"demo:thing": "role:member"}), overwrite=False)
    assert enforcer.enforce("demo:thing", {}, member) is True
    enforcer.set_rules(oslo_policy.Rules.from_dict({"demo:thing": "!"}), overwrite=False)
    assert enforcer.enforce("demo:thing", {}, member) is False


def test_rules_that_call_out_are_asked_every_time(tmp_path, monkeypatch):
    enforcer, _policy_file, _clock = _enforcer(tmp_path, monkeypatch)
    enforcer.set_rules(oslo_policy.Rules.from_dict(
        {"demo:thing": "role:admin or http://127.0.0.1:9/decide"}), overwrite=False)
    calls = _counting_checks(monkeypatch)
    admin = {"roles": ["admin"], "project_id": "p"}
    assert enforcer.enforce("demo:thing", {}, admin) is True
    once = len(calls)
    for _ in range(2):
        assert enforcer.enforce("demo:thing", {}, admin) is True
    assert once > 0 and len(calls) == 3 * once
