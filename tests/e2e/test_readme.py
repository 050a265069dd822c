"""README.md's "Five minutes with Novella", run: its indented commands, in order,
as one bash script with ``set -euo pipefail``.

The walk-through starts `novella up --data-dir /tmp/novella &`; here the data
directory is the test's own and ``--port-base`` puts the APIs on free ports
(the only two changes), and the script runs in a session of its own that is
stopped afterwards. Each command must succeed as written: no placeholder to
fill in, no command that races the one before it. Then the last command's
output shows the server's allocation.
"""
import os
import re
import shutil
import signal
import subprocess
import sys

import pytest

from tests.e2e import processes

README = os.path.join(os.path.dirname(__file__), "..", "..", "README.md")
SECTION = "## Five minutes with Novella"
DATA_DIR = "/tmp/novella"
SCRIPT_TIMEOUT = 600


def walkthrough(text):
    """The indented command lines of the README's walk-through section, in order."""
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    return [line[4:] for line in section.splitlines() if re.match(r"    \S", line)]


def test_the_walkthrough_has_no_placeholder():
    for line in walkthrough(open(README).read()):
        command = line.split("#", 1)[0]
        if not command.startswith(("openstack ", "novella ")):
            continue
        for word in re.findall(r"(?<![$\w{-])[A-Z][A-Z0-9_]{2,}(?![\w=])", command):
            pytest.fail(f"{word} in {line!r} is a placeholder, not a command's argument")


def test_the_walkthrough_runs(tmp_path):
    if not (shutil.which("openstack")
            or os.path.exists(os.path.join(os.path.dirname(sys.executable), "openstack"))):
        pytest.skip("the openstack command (python-openstackclient) is not installed")
    lines = walkthrough(open(README).read())
    assert lines[0] == f"novella up --data-dir {DATA_DIR} &", lines[0]
    data_dir = tmp_path / "novella"
    base = processes.free_port_base(9)
    lines[0] = f"novella up --data-dir {data_dir} --port-base {base} > {tmp_path}/up.log 2>&1 &"
    script = tmp_path / "readme.sh"
    script.write_text("set -euo pipefail\nPS4='+ ${SECONDS}s '\nset -x\n"
                      + "\n".join(line.replace(DATA_DIR, str(data_dir)) for line in lines)
                      + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OS_")}
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    log = tmp_path / "readme.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(["bash", str(script)], cwd=tmp_path, env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        try:
            code = proc.wait(SCRIPT_TIMEOUT)
        except subprocess.TimeoutExpired:
            code = "timed out"
        output = log.read_text()
        up_log = (tmp_path / "up.log").read_text() if (tmp_path / "up.log").exists() else ""
        assert code == 0, f"README.md failed ({code}):\n{output[-5000:]}\n--- novella up\n" \
                          f"{up_log[-2000:]}"
        # The allocation of vm1, unshelved: its flavor's resources on one provider.
        shown = output.rsplit("openstack resource provider allocation show", 1)[1]
        assert "MEMORY_MB" in shown and "2048" in shown, shown
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        proc.wait()
