"""docs/deploy.md, run: every block marked ``sh deploy``, in order, as one bash script.

The page builds Keystone, Placement, the Compute, image, network, volume and
Infrastructure Optimization APIs, the conductor, the scheduler and a compute
host in each of two cells on the machine's PostgreSQL and RabbitMQ; boots a
server in each cell, resizes one across cells and migrates the other across
cells, and stops every process it started. Its first block sets every port,
name, password and path (each kept when already in the environment) and no
later block spells one out: here the script runs with free ports and names
of its own (so it runs beside anything else on the machine), in an empty
directory, in a session of its own; the session is empty once the script
has ended (its "Stopping" block stopped everything), and then the databases
show where each server ended up. The run's databases and virtual hosts are
dropped before and after.
"""
import json
import os
import re
import signal
import subprocess
import sys

import pytest
import sqlalchemy as sa

from tests import backends
from tests.e2e import test_keystone
from tests.e2e.processes import free_port

pytestmark = [pytest.mark.postgresql, pytest.mark.rabbitmq]

PAGE = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "deploy.md")
MARKER = "sh deploy"
SCRIPT_TIMEOUT = 900
# The settings block's defaults: no other block may spell one out.
DEFAULTS = ("127.0.0.1", "5000", "8774", "8778", "9292", "9696", "8776", "9322", "5432", "5672",
            "postgres", "guest", "nova_", "RegionOne",
            "-secret")
PORTS = ("KEYSTONE_PORT", "COMPUTE_PORT", "PLACEMENT_PORT", "IMAGE_PORT", "NETWORK_PORT",
         "VOLUME_PORT", "OPTIMIZE_PORT")


def blocks(text):
    """The code of every fenced block whose info string is exactly MARKER, in order."""
    return [m.group(1) for m in re.finditer(r"^```" + re.escape(MARKER) + r"\n(.*?)^```$",
                                            text, re.S | re.M)]


def _server_url(db):
    return backends.PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{db}"


def _settings():
    """The page's settings for one run: free ports, and names no other run uses."""
    run = os.urandom(3).hex()
    return {**{name: str(free_port()) for name in PORTS},
            "NOVA_NAME": f"nova_doc{run}", "KEYSTONE_DB": f"keystone_doc{run}",
            "PLACEMENT_DB": f"placement_doc{run}"}


def _names(settings):
    nova = settings["NOVA_NAME"]
    databases = (settings["KEYSTONE_DB"], settings["PLACEMENT_DB"],
                 *(f"{nova}_{db}" for db in ("api", "cell0", "cell1", "cell2")))
    return databases, (nova, f"{nova}_cell1", f"{nova}_cell2")


def _clean(settings):
    from novella.db import engine as engine_mod
    from novella.rpc import rabbit
    databases, vhosts = _names(settings)
    engine_mod.dispose_all()
    admin = sa.create_engine(backends.PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        for db in databases:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
    admin.dispose()
    for vhost in vhosts:
        rabbit.delete_vhost(f"{backends.RABBIT_URL.rstrip('/')}/{vhost}")


def test_the_page_has_the_whole_walk():
    script = "\n".join(blocks(open(PAGE).read()))
    for step in ("keystone-manage --config-file keystone/keystone.conf bootstrap",
                 "cat > nova/nova.conf", "cat > placement/placement.conf",
                 "novella serve compute", "cell_v2 discover_hosts",
                 "openstack server resize --flavor m1.small", "openstack server migrate"):
        assert step in script, step
    # The compute side calls the network, volume and image services' HTTP APIs through
    # Keystone, with the service token: their groups are in nova.conf.
    nova_conf = script.split("cat > nova/nova.conf <<EOF\n", 1)[1].split("\nEOF\n", 1)[0]
    for group in ("[neutron]", "[cinder]", "[glance]", "[service_user]"):
        assert group in nova_conf, group
    assert "send_service_user_token = true" in nova_conf
    # Every HTTP API is started on its address, the optimize API among them.
    serve_lines = [line for line in script.replace("\\\n", " ").splitlines()
                   if line.lstrip().startswith("novella serve ")]
    http = [line for line in serve_lines
            if line.split()[2] in ("placement", "api", "image", "network", "volume", "optimize")]
    assert sorted(line.split()[2] for line in http) == sorted(
        ["placement", "api", "image", "network", "volume", "optimize"])
    for line in http:
        assert "--bind" in line, line


def test_only_the_settings_block_names_ports_names_and_passwords():
    settings, *rest = blocks(open(PAGE).read())
    for name in PORTS + ("NOVA_NAME", "KEYSTONE_DB", "PLACEMENT_DB", "DEPLOY_DIR"):
        assert f"${{{name}:=" in settings, name
    for block in rest:
        for value in DEFAULTS:
            assert value not in block, (value, block)


def _rows(db, sql):
    engine = sa.create_engine(_server_url(db))
    try:
        with engine.connect() as conn:
            return conn.execute(sa.text(sql)).all()
    finally:
        engine.dispose()


def test_deploy_doc_runs(tmp_path):
    test_keystone._require_tools()
    script = tmp_path / "deploy.sh"
    # Each command echoed with the seconds since the start, for the log of a failure.
    script.write_text("set -euo pipefail\nPS4='+ ${SECONDS}s '\nset -x\n"
                      + "\n".join(blocks(open(PAGE).read())))
    env = {k: v for k, v in os.environ.items() if not k.startswith("OS_")}
    # The page's commands (novella, keystone-manage, gunicorn, openstack) from this Python.
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    settings = _settings()
    env.update(settings)
    nova = settings["NOVA_NAME"]
    _clean(settings)
    log = tmp_path / "deploy.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(["bash", str(script)], cwd=tmp_path, env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        try:
            code = proc.wait(SCRIPT_TIMEOUT)
        except subprocess.TimeoutExpired:
            code = "timed out"
        logs = "".join(f"--- {p.name} ---\n{p.read_text()[-1500:]}\n"
                       for p in sorted((tmp_path / "logs").glob("*.log"))) \
            if (tmp_path / "logs").exists() else ""
        assert code == 0, f"docs/deploy.md failed ({code}):\n{log.read_text()[-5000:]}\n{logs}"
        # "Stopping" stopped every process the page started: none is left in its session.
        with pytest.raises(ProcessLookupError):
            os.killpg(proc.pid, 0)
        assert not list((tmp_path / "run").iterdir())
        # Keystone's keys are its owner's alone.
        for keys in ("fernet-keys", "credential-keys"):
            directory = tmp_path / "keystone" / keys
            assert directory.stat().st_mode & 0o777 == 0o700, keys
            assert {p.stat().st_mode & 0o777 for p in directory.iterdir()} == {0o600}, keys

        # Where the servers are: first resized to m1.small into cell2, second migrated
        # into cell1, both confirmed (no copy left behind, no migration-held allocation).
        mapped = dict(_rows(f"{nova}_api", "SELECT m.instance_uuid, c.name FROM instance_mappings m "
                                        "JOIN cell_mappings c ON c.id = m.cell_id"))
        servers = {}
        for cell in (f"{nova}_cell1", f"{nova}_cell2"):
            for uuid, name, host, state, ram in _rows(
                    cell, "SELECT uuid, display_name, host, vm_state, memory_mb FROM instances "
                          "WHERE deleted = 0 AND NOT hidden"):
                servers[name] = (uuid, cell, host, state, ram)
        assert {n: v[1:] for n, v in servers.items()} == {
            "first": (f"{nova}_cell2", "cell2-host", "active", 2048),
            "second": (f"{nova}_cell1", "cell1-host", "active", 512)}
        assert {mapped[v[0]] for v in servers.values()} == {"cell1", "cell2"}
        assert mapped[servers["first"][0]] == "cell2"
        allocations = _rows(settings["PLACEMENT_DB"], "SELECT a.consumer, p.name, a.resource_class, a.used "
                                         "FROM allocations a JOIN resource_providers p "
                                         "ON p.id = a.provider_id WHERE a.resource_class = "
                                         "'MEMORY_MB'")
        assert sorted((c, p, used) for c, p, _rc, used in allocations) == sorted([
            (servers["first"][0], "cell2-host", 2048), (servers["second"][0], "cell1-host", 512)])
        # Each server's port, made for it through the network API, is bound where the
        # server now runs: one binding, active (the other cell's host's is gone).
        bindings = _rows(f"{nova}_api", "SELECT p.device_id, b.host, b.status FROM ports p "
                                     "JOIN ml2_port_bindings b ON b.port_id = p.id "
                                     "WHERE p.device_owner LIKE 'compute:%'")
        assert sorted(bindings) == sorted([
            (servers["first"][0], "cell2-host", "ACTIVE"),
            (servers["second"][0], "cell1-host", "ACTIVE")])
        # Made for the server, so deleted with it: its info cache says so, in the cell
        # it is in now (the first moved there from the other cell).
        for uuid, cell_db, *_ in servers.values():
            (cache,), = _rows(cell_db, "SELECT network_info FROM instance_info_caches "
                                       f"WHERE instance_uuid = '{uuid}'")
            assert [vif["preserve_on_delete"] for vif in json.loads(cache)] == [False]
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        proc.wait()
        _clean(settings)
