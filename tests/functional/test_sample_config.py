"""The sample configuration and policy files in etc/novella/ are what the
oslo generators make from the package's entry points, and they hold every
option and every policy rule."""
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
ETC = ROOT / "etc" / "novella"
BIN = pathlib.Path(sys.executable).parent

CONFIGS = {"nova": "nova.conf.sample", "placement": "placement.conf.sample"}
POLICIES = {"nova": "policy.yaml.sample", "placement": "placement-policy.yaml.sample"}


def _generate(tool, generator_conf, out):
    exe = BIN / tool
    cmd = [str(exe)] if exe.exists() else [tool]
    ran = subprocess.run(cmd + ["--config-file", str(generator_conf), "--output-file", str(out)],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr[-3000:]
    return out.read_text()


def _options_by_group(sample):
    """{group: {option names}} of a sample configuration file."""
    groups, group = {}, None
    for line in sample.splitlines():
        header = re.fullmatch(r"\[(\w+)\]", line)
        if header:
            group = header.group(1)
            continue
        option = re.fullmatch(r"#(\w+) =.*", line)
        if option and group:
            groups.setdefault(group, set()).add(option.group(1))
    return groups


@pytest.mark.parametrize("service", sorted(CONFIGS))
def test_sample_configuration_is_generated_and_current(tmp_path, service):
    sample = _generate("oslo-config-generator", ETC / f"{service}-config-generator.conf",
                       tmp_path / CONFIGS[service])
    committed = (ETC / CONFIGS[service]).read_text()
    assert sample == committed, (
        f"etc/novella/{CONFIGS[service]} is out of date: run `oslo-config-generator "
        f"--config-file etc/novella/{service}-config-generator.conf`")

    if service == "nova":
        from novella.conf.opts import list_opts
    else:
        from novella.placement.conf import list_opts
    found = _options_by_group(sample)
    missing = sorted(f"[{group}] {opt.dest}" for group, opts in list_opts() for opt in opts
                     if opt.dest not in found.get(group, set()))
    assert missing == []
    # The service's authentication options are in it too.
    assert {"www_authenticate_uri", "auth_type"} <= found["keystone_authtoken"]
    assert {"policy_file", "enforce_new_defaults"} <= found["oslo_policy"]


@pytest.mark.parametrize("service", sorted(POLICIES))
def test_sample_policy_is_generated_and_current(tmp_path, service):
    sample = _generate("oslopolicy-sample-generator", ETC / f"{service}-policy-generator.conf",
                       tmp_path / POLICIES[service])
    committed = (ETC / POLICIES[service]).read_text()
    assert sample == committed, (
        f"etc/novella/{POLICIES[service]} is out of date: run `oslopolicy-sample-generator "
        f"--config-file etc/novella/{service}-policy-generator.conf`")
    if service == "nova":
        from novella.policies.compute import list_rules
    else:
        from novella.policies.placement import list_rules
    rules = set(re.findall(r'^#"([^"]+)":', sample, re.M))
    assert rules == {rule.name for rule in list_rules()}
