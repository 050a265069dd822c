"""Tempest's compute API tests, run against a fresh `novella up`.

Tempest is a test-only dependency (``tempest`` from PyPI); its tests are
loaded from the installed package and nothing of it is copied here.

One run: `novella up` starts as a subprocess on free ports (one cell of
three simulated hosts, the embedded identity, image, network and volume
services); ``tempest.conf`` is generated in a temporary directory;
``python -m stestr`` runs ``tempest.api.compute`` with tempest's own test
discovery and class grouping; the subunit stream is parsed into one outcome
per test (or per class, where a class's setup failed or skipped it).

Credentials are tempest's default, dynamic ones: a project and users per
test class, made and removed through the embedded identity's admin API with
the all-in-one's ``admin`` user.

A test may fail or be skipped only if ``docs/conformance.md`` lists it in
the "Tempest (compute API)" section with a reason. The pytest test fails on
an unlisted failure or skip, and on a listed test that no longer exists;
a listed test that now passes is reported (and should leave the list).

The main cloud has the shared network ``private`` that most tests boot
servers on. ``AutoAllocateNetworkTest`` needs a cloud where a new project sees
no network at all (it skips itself otherwise) and where a network can be
auto-allocated; its tests run in a second, short run against a second
`novella up` started with ``[network_service] shared_network = false`` and a
``default_subnet_pool`` (``ISOLATED``); the outcomes of both runs are judged
together.

``python3 -m tests.conformance.test_tempest [REGEX]`` runs the same thing
outside pytest and prints the outcomes grouped by reason, to maintain the
list.
"""
import collections
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time
import warnings

import pytest

from novella.api.volume import app as volume_app  # the embedded volume service's range
from tests.e2e import processes

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
STATUS_DOC = REPO_ROOT / "docs" / "conformance.md"
SECTION = "## Tempest (compute API)"

EXPECTED_TEMPEST_VERSION = "47.0.0"
TEST_REGEX = r"^tempest\.api\.compute\."
CONCURRENCY = 2          # tempest workers (2 cores: novella up is the third process)
CELLS, HOSTS_PER_CELL = 1, 3
SCHEDULER_FILTERS = ("ComputeFilter", "AvailabilityZoneFilter", "ComputeCapabilitiesFilter",
                     "ImagePropertiesFilter", "ServerGroupAntiAffinityFilter",
                     "ServerGroupAffinityFilter", "SameHostFilter", "DifferentHostFilter")
N_PORTS = 7              # identity, compute, placement, image, network, volume, optimize
RUN_TIMEOUT = 40 * 60    # the whole tempest run, seconds (a hang must not hold CI)
START_TIMEOUT = 120
# Test classes that need a cloud of their own: {class: `novella up` configuration}.
ISOLATED = {
    "tempest.api.compute.admin.test_auto_allocate_network.AutoAllocateNetworkTest":
        "[network_service]\nshared_network = false\ndefault_subnet_pool = 10.128.0.0/16\n",
}


class TempestSummary(UserWarning):
    """Carries the one-line summary of the tempest run."""


# ---------------------------------------------------------------------------
# The installed suite
# ---------------------------------------------------------------------------

def tempest_dir():
    try:
        import tempest
    except ImportError:
        return None
    return pathlib.Path(tempest.__file__).resolve().parent


def tempest_version():
    from importlib import metadata
    try:
        return metadata.version("tempest")
    except metadata.PackageNotFoundError:
        return None


def write_stestr_conf(workdir):
    """A .stestr.conf that discovers the installed tempest's tests, grouped by class."""
    tdir = tempest_dir()
    conf = workdir / ".stestr.conf"
    conf.write_text("[DEFAULT]\n"
                    f"test_path={tdir / 'test_discover'}\n"
                    f"top_dir={tdir.parent}\n"
                    "group_regex=([^\\.]*\\.)*\n")
    if not (workdir / ".stestr").exists():
        subprocess.run([sys.executable, "-m", "stestr", "init"], cwd=workdir, check=True,
                       capture_output=True, timeout=120)
    return conf


def _tempest_env(workdir):
    env = dict(os.environ, TEMPEST_CONFIG_DIR=str(workdir), TEMPEST_CONFIG="tempest.conf",
               PYTHONUNBUFFERED="1")
    for key in [k for k in env if k.startswith("OS_")]:
        del env[key]
    return env


def list_tests(workdir, regex=TEST_REGEX):
    """Every test id tempest has for ``regex`` (attributes stripped)."""
    write_stestr_conf(workdir)
    res = subprocess.run([sys.executable, "-m", "stestr", "list", regex], cwd=workdir,
                         env=_tempest_env(workdir), capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0, f"stestr list failed:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    return {strip_id(line) for line in res.stdout.split() if line.startswith("tempest.")}


# ---------------------------------------------------------------------------
# Test ids and the status document
# ---------------------------------------------------------------------------

_CLASS_LEVEL = re.compile(r"^(?:setUpClass|tearDownClass) \((?P<cls>[\w.]+)\)$")


def strip_id(test_id):
    """``a.b.C.test_x[id-...,smoke]`` -> ``a.b.C.test_x``; ``setUpClass (a.b.C)`` -> ``a.b.C``."""
    test_id = test_id.strip()
    match = _CLASS_LEVEL.match(test_id)
    if match:
        return match.group("cls")
    return test_id.split("[", 1)[0]


def known_entries(doc=STATUS_DOC):
    """Parse the Tempest section of docs/conformance.md.

    Under ``## Tempest (compute API)``, ``### Known failures`` and
    ``### Known skips`` hold ``#### <reason>`` headings, each followed by
    bullet lines naming a test (or a whole class) in backquotes.
    Returns {test id: ("failure" | "skip", reason)}.
    """
    known = {}
    if not doc.exists():
        return known
    in_section = False
    kind = reason = None
    for line in doc.read_text().splitlines():
        if line.startswith(("# ", "## ")):
            in_section = line.strip() == SECTION
            kind = reason = None
            continue
        if not in_section:
            continue
        if line.startswith("### "):
            title = line[4:].strip().lower()
            kind = ("failure" if title == "known failures"
                    else "skip" if title == "known skips" else None)
            reason = None
            continue
        if line.startswith("#### "):
            reason = line[5:].strip()
            continue
        match = re.match(r"^\s*[-*]\s+`([^`]+)`", line)
        if match and kind and reason:
            known[match.group(1).strip()] = (kind, reason)
    return known


def exists(test_id, all_ids):
    return test_id in all_ids or any(t.startswith(test_id + ".") for t in all_ids)


# ---------------------------------------------------------------------------
# The cloud under test
# ---------------------------------------------------------------------------



class Cloud:
    """A running `novella up`."""

    def __init__(self, data_dir, extra_config=""):
        self.data_dir = pathlib.Path(data_dir)
        self.extra_config = extra_config  # more of novella-tempest.conf
        self.port_base = processes.free_port_base(N_PORTS)
        self.proc = None
        self.log_path = self.data_dir / "novella-up.log"
        self.identity = f"http://127.0.0.1:{self.port_base}"
        self.compute = f"http://127.0.0.1:{self.port_base + 1}"

    def start(self):
        import requests
        # An image upload takes a second, as with a real hypervisor: tempest watches
        # images being saved (SAVING) and a second createImage refused meanwhile.
        conf = self.data_dir / "novella-tempest.conf"
        conf.write_text("[simulated]\nsnapshot_seconds = 1\n"
                        # the hints tempest's multinode tests give (as devstack enables them)
                        f"[filter_scheduler]\nenabled_filters = {', '.join(SCHEDULER_FILTERS)}\n"
                        + self.extra_config)
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "novella.cmd.main", "up", "--data-dir", str(self.data_dir),
             "--config-file", str(conf),
             "--port-base", str(self.port_base), "--host", "127.0.0.1",
             "--cells", str(CELLS), "--hosts-per-cell", str(HOSTS_PER_CELL)],
            stdout=self._log, stderr=subprocess.STDOUT, cwd=REPO_ROOT)
        end = time.monotonic() + START_TIMEOUT
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError("novella up exited:\n" + self.log_path.read_text()[-3000:])
            if (self.data_dir / "clouds.yaml").exists():
                try:
                    if requests.get(f"http://127.0.0.1:{self.port_base + 5}/",
                                    timeout=2).status_code:
                        return self
                except requests.RequestException:
                    pass
            time.sleep(0.3)
        raise RuntimeError("novella up did not start:\n" + self.log_path.read_text()[-3000:])

    def stop(self):
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self._log.close()

    def admin_password(self):
        return json.loads((self.data_dir / "passwords.json").read_text())["admin"]

    def admin_session(self):
        """(requests session with an admin token, {service type: url})."""
        import requests
        body = {"auth": {"identity": {"methods": ["password"], "password": {"user": {
            "name": "admin", "password": self.admin_password(), "domain": {"id": "default"}}}},
            "scope": {"project": {"name": "admin", "domain": {"id": "default"}}}}}
        resp = requests.post(self.identity + "/v3/auth/tokens", json=body, timeout=30)
        assert resp.status_code == 201, resp.text
        catalog = {svc["type"]: next(e["url"] for e in svc["endpoints"]
                                     if e["interface"] == "public")
                   for svc in resp.json()["token"]["catalog"]}
        session = requests.Session()
        session.headers["X-Auth-Token"] = resp.headers["X-Subject-Token"]
        return session, catalog


def discover(cloud):
    """What tempest.conf must name: images, flavors, network, the microversion range."""
    session, catalog = cloud.admin_session()

    def get(url, **kw):
        resp = session.get(url, timeout=30, **kw)
        assert resp.status_code == 200, f"GET {url}: {resp.status_code} {resp.text}"
        return resp.json()

    images = get(catalog["image"] + "/v2/images")["images"]
    flavors = get(catalog["compute"] + "/flavors/detail")["flavors"]
    networks = get(catalog["network"] + "/v2.0/networks")["networks"]
    version = get(catalog["compute"] + "/")["version"]
    flavors.sort(key=lambda f: (f["ram"], f["vcpus"], f["disk"]))
    image = next(i for i in images if i["status"] == "active")
    shared = next((n for n in networks if n.get("shared")), None)  # none: ISOLATED clouds
    public = next(n for n in networks if n.get("router:external"))
    # A second image, as tempest's rebuild tests want one different from the first.
    alt = session.post(catalog["image"] + "/v2/images", timeout=30, json={
        "name": "cirros-alt", "disk_format": "qcow2", "container_format": "bare",
        "visibility": "public"})
    assert alt.status_code == 201, alt.text
    alt_id = alt.json()["id"]
    put = session.put(catalog["image"] + f"/v2/images/{alt_id}/file", timeout=30,
                      data=b"\0" * 1024,
                      headers={"Content-Type": "application/octet-stream"})
    assert put.status_code == 204, put.text
    return {"image": image["id"], "image_alt": alt_id,
            "flavor": flavors[0]["id"], "flavor_alt": flavors[1]["id"],
            "network": shared and shared["name"], "public_network": public,
            "min_microversion": version["min_version"],
            "max_microversion": version["version"], "catalog": catalog}


def write_config(workdir, cloud, found):
    """tempest.conf in ``workdir``."""
    (workdir / "locks").mkdir(exist_ok=True)
    conf = f"""[DEFAULT]
log_file = {workdir / 'tempest.log'}
use_stderr = false
debug = false

[oslo_concurrency]
lock_path = {workdir / 'locks'}

[auth]
use_dynamic_credentials = true
admin_username = admin
admin_password = {cloud.admin_password()}
admin_project_name = admin
admin_domain_name = Default
default_credentials_domain_name = Default
create_isolated_networks = false
tempest_roles =

[identity]
uri_v3 = {cloud.identity}/v3
auth_version = v3
region = RegionOne
admin_role = admin
default_domain_id = default

[identity-feature-enabled]
api_v2 = false
api_v2_admin = false
api_v3 = true

[compute]
image_ref = {found['image']}
image_ref_alt = {found['image_alt']}
flavor_ref = {found['flavor']}
flavor_ref_alt = {found['flavor_alt']}
{f"fixed_network_name = {found['network']}" if found['network'] else ""}
min_compute_nodes = {CELLS * HOSTS_PER_CELL}
min_microversion = {found['min_microversion']}
max_microversion = {found['max_microversion']}
build_interval = 1
build_timeout = 60
endpoint_type = publicURL
region = RegionOne

[compute-feature-enabled]
resize = true
change_password = true
vnc_console = false
spice_console = false
serial_console = false
metadata_service = false
block_migration_for_live_migration = true
volume_backed_live_migration = true
swap_volume = true
volume_multiattach = true
scheduler_enabled_filters = {', '.join(SCHEDULER_FILTERS)}
hostname_fqdn_sanitization = true
personality = true
stable_rescue = true
nova_policy_roles = admin, manager, member, reader

[validation]
run_validation = false

[image]
build_interval = 1
build_timeout = 60

[network]
build_interval = 1
build_timeout = 60
project_networks_reachable = false
public_network_id = {found['public_network']['id']}
floating_network_name = {found['public_network']['name']}

[volume]
catalog_type = volumev3
min_microversion = {'.'.join(map(str, volume_app.MIN_VERSION))}
max_microversion = {'.'.join(map(str, volume_app.MAX_VERSION))}
volume_type_multiattach = {volume_app.MULTIATTACH_TYPE['name']}
build_interval = 1
build_timeout = 60

[enforce_scope]
nova = true

[service_available]
nova = true
glance = true
neutron = true
cinder = true
swift = false
horizon = false
placement = true
"""
    (workdir / "tempest.conf").write_text(conf)


# ---------------------------------------------------------------------------
# Running and reading the results
# ---------------------------------------------------------------------------

def run_tempest(workdir, regex=TEST_REGEX, concurrency=CONCURRENCY, timeout=RUN_TIMEOUT,
                exclude=None):
    """Run the tests (those matching ``exclude`` aside); return the path of the subunit v2
    stream."""
    write_stestr_conf(workdir)
    stream = workdir / "results.subunit"
    with open(stream, "wb") as out, open(workdir / "stestr.err", "w") as err:
        proc = subprocess.run(
            [sys.executable, "-m", "stestr", "run", "--concurrency", str(concurrency),
             "--subunit"] + (["--exclude-regex", exclude] if exclude else []) + [regex],
            cwd=workdir, env=_tempest_env(workdir), stdout=out, stderr=err, timeout=timeout)
    # stestr exits non-zero when a test failed: that is for the comparison to judge.
    assert stream.stat().st_size > 0, (
        f"stestr produced no results (exit {proc.returncode}):\n"
        + (workdir / "stestr.err").read_text()[-3000:])
    return stream


_STATUS = {"success": "passed", "fail": "failed", "skip": "skipped",
           "xfail": "passed", "uxsuccess": "failed"}


def parse_subunit(path):
    """{stripped test id: (outcome, detail)} from a subunit v2 stream."""
    import subunit
    import testtools

    results = {}

    def on_test(test):
        outcome = _STATUS.get(test["status"])
        if outcome is None:
            return
        detail = ""
        details = test.get("details") or {}
        for name in ("reason", "traceback"):
            if name in details:
                detail = details[name].as_text()
                break
        key = strip_id(test["id"])
        # A class-level entry and its tests, or a test run twice: failure wins.
        if key in results and results[key][0] == "failed" and outcome != "failed":
            return
        results[key] = (outcome, detail)

    with open(path, "rb") as stream:
        case = subunit.ByteStreamToStreamResult(stream, non_subunit_name="stdout")
        result = testtools.StreamToDict(on_test)
        result.startTestRun()
        try:
            case.run(result)
        finally:
            result.stopTestRun()
    return results


def compare(results, known, all_ids):
    """The verdict: counts, and the lists that fail the run or are reported."""
    counts = collections.Counter(passed=0, failed=0, skipped=0)
    unexpected_failures, unexpected_skips, now_passing = [], [], []
    for test_id, (outcome, detail) in sorted(results.items()):
        counts[outcome] += 1
        listed = known.get(test_id)
        if outcome == "failed" and (listed is None or listed[0] != "failure"):
            unexpected_failures.append((test_id, detail))
        elif outcome == "skipped" and listed is None:
            unexpected_skips.append((test_id, detail))
        elif outcome == "passed" and listed is not None:
            now_passing.append(test_id)
    stale = sorted(t for t in known if not exists(t, all_ids))
    not_run = sorted(t for t, (kind, _) in known.items()
                     if t not in results and exists(t, all_ids)
                     and not any(r.startswith(t + ".") for r in results))
    return {"counts": counts, "unexpected_failures": unexpected_failures,
            "unexpected_skips": unexpected_skips, "now_passing": now_passing,
            "stale": stale, "not_run": not_run}


def summary_line(verdict, elapsed, regex=TEST_REGEX):
    c = verdict["counts"]
    return ("tempest %s compute API [%s]: %d passed, %d failed, %d skipped"
            " (%d unlisted failures, %d unlisted skips, %d listed now passing) in %.0f s"
            % (tempest_version(), regex, c["passed"], c["failed"], c["skipped"],
               len(verdict["unexpected_failures"]), len(verdict["unexpected_skips"]),
               len(verdict["now_passing"]), elapsed))


def _short(detail, limit=1200):
    lines = [line for line in detail.strip().splitlines() if line.strip()]
    text = "\n".join(lines[-12:])
    return text if len(text) <= limit else "..." + text[-limit:]


def _class_regex(test_class):
    return "^" + re.escape(test_class) + r"\."


def run_on_cloud(workdir, regex, concurrency, extra_config="", exclude=None):
    """Start a cloud (``extra_config`` added to its configuration), configure and run
    tempest in ``workdir``; the results."""
    data_dir = workdir / "novella-data"
    data_dir.mkdir(parents=True, exist_ok=True)
    cloud = Cloud(data_dir, extra_config)
    try:
        cloud.start()
        write_config(workdir, cloud, discover(cloud))
        return parse_subunit(run_tempest(workdir, regex, concurrency, exclude=exclude))
    finally:
        cloud.stop()


def run_all(workdir, regex=TEST_REGEX, concurrency=CONCURRENCY, all_ids=None):
    """The tests of ``regex`` (``all_ids``: their ids, listed if not given) on the main
    cloud, and those of each ``ISOLATED`` class on a cloud of its own; (results, elapsed
    seconds)."""
    all_ids = list_tests(workdir, regex) if all_ids is None else all_ids
    started = time.monotonic()
    isolated = {c: conf for c, conf in ISOLATED.items() if exists(c, all_ids)}
    results = {}
    if any(not any(t.startswith(c + ".") for c in isolated) for t in all_ids):
        results.update(run_on_cloud(workdir, regex, concurrency, exclude="|".join(
            _class_regex(c) for c in isolated) or None))
    for n, (test_class, extra_config) in enumerate(sorted(isolated.items())):
        results.update({k: v for k, v in run_on_cloud(
            workdir / f"isolated-{n}", _class_regex(test_class), 1, extra_config).items()
            if exists(k, all_ids)})
    return results, time.monotonic() - started


# ---------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------

def test_known_entries_parser(tmp_path):
    doc = tmp_path / "conformance.md"
    doc.write_text(
        "# Conformance\n\n## Known failures\n\n- `tempest.api.x.A.test_no` not here\n\n"
        f"{SECTION}\n\nprose\n\n### Known failures\n\n#### No rebuild action\n\n"
        "- `tempest.api.compute.a.A.test_rebuild`\n- `tempest.api.compute.a.B`\n\n"
        "#### No locks\n\n* `tempest.api.compute.b.C.test_lock` (with a note)\n\n"
        "### Known skips\n\n#### Needs SSH into the guest\n\n"
        "- `tempest.api.compute.c.D.test_ssh`\n\n# Other\n\n### Known skips\n\n#### r\n\n"
        "- `tempest.api.compute.z.Z`\n")
    assert known_entries(doc) == {
        "tempest.api.compute.a.A.test_rebuild": ("failure", "No rebuild action"),
        "tempest.api.compute.a.B": ("failure", "No rebuild action"),
        "tempest.api.compute.b.C.test_lock": ("failure", "No locks"),
        "tempest.api.compute.c.D.test_ssh": ("skip", "Needs SSH into the guest"),
    }


def test_ids_and_comparison():
    assert strip_id("tempest.api.compute.a.A.test_x[id-1234,smoke]") == \
        "tempest.api.compute.a.A.test_x"
    assert strip_id("setUpClass (tempest.api.compute.a.B)") == "tempest.api.compute.a.B"
    all_ids = {"tempest.api.compute.a.A.test_x", "tempest.api.compute.a.A.test_y",
               "tempest.api.compute.a.B.test_z", "tempest.api.compute.a.C.test_w"}
    known = {"tempest.api.compute.a.A.test_y": ("failure", "r1"),
             "tempest.api.compute.a.B": ("skip", "r2"),
             "tempest.api.compute.a.C.test_w": ("failure", "r3"),
             "tempest.api.compute.gone.G.test_g": ("failure", "r4")}
    results = {"tempest.api.compute.a.A.test_x": ("failed", "boom"),
               "tempest.api.compute.a.A.test_y": ("failed", "known"),
               "tempest.api.compute.a.B": ("skipped", "no feature"),
               "tempest.api.compute.a.C.test_w": ("passed", "")}
    verdict = compare(results, known, all_ids)
    assert verdict["counts"] == {"passed": 1, "failed": 2, "skipped": 1}
    assert [t for t, _ in verdict["unexpected_failures"]] == ["tempest.api.compute.a.A.test_x"]
    assert verdict["unexpected_skips"] == []
    assert verdict["now_passing"] == ["tempest.api.compute.a.C.test_w"]
    assert verdict["stale"] == ["tempest.api.compute.gone.G.test_g"]


def test_parse_subunit(tmp_path):
    """Outcomes, attributes stripped, class-level entries, from a real v2 stream."""
    import subunit
    path = tmp_path / "r.subunit"
    with open(path, "wb") as f:
        out = subunit.StreamResultToBytes(f)
        for test_id, status in (("tempest.api.compute.a.A.test_x[id-1,smoke]", "success"),
                                ("tempest.api.compute.a.A.test_y[id-2]", "fail"),
                                ("setUpClass (tempest.api.compute.a.B)", "skip")):
            out.status(test_id=test_id, test_status="inprogress")
            out.status(test_id=test_id, test_status=status)
    assert {k: v[0] for k, v in parse_subunit(path).items()} == {
        "tempest.api.compute.a.A.test_x": "passed",
        "tempest.api.compute.a.A.test_y": "failed",
        "tempest.api.compute.a.B": "skipped"}


def test_tempest_compute_api(tmp_path):
    """The whole tempest.api.compute suite; unlisted failures and skips fail it."""
    if tempest_dir() is None:
        pytest.fail("tempest is not installed; `pip install -e .[test]`")
    known = known_entries()
    assert known, f"{STATUS_DOC} has no {SECTION!r} entries"
    empty = sorted(t for t, (_, reason) in known.items() if not reason)
    assert not empty, f"entries without a reason: {empty}"

    all_ids = list_tests(tmp_path)
    assert len(all_ids) > 400, f"only {len(all_ids)} compute API tests found"
    results, elapsed = run_all(tmp_path, all_ids=all_ids)
    verdict = compare(results, known, all_ids)
    # The run really ran: every test id reported exists in the suite.
    assert all(exists(t, all_ids) for t in results)
    assert verdict["counts"]["passed"] > 0

    line = summary_line(verdict, elapsed)
    print(line)
    for test_id in verdict["now_passing"]:
        print(f"listed in {STATUS_DOC.name} but passes now: {test_id}")
    warnings.warn(TempestSummary(line), stacklevel=1)

    problems = []
    if verdict["stale"]:
        problems.append("listed tests that no longer exist:\n  " + "\n  ".join(verdict["stale"]))
    for title, rows in (("failures", verdict["unexpected_failures"]),
                        ("skips", verdict["unexpected_skips"])):
        if rows:
            problems.append(f"{len(rows)} unlisted {title}:\n" + "\n".join(
                f"--- {t}\n{_short(d)}" for t, d in rows))
    if problems:
        pytest.fail(line + "\n" + "\n".join(problems), pytrace=False)


# ---------------------------------------------------------------------------
# Command line: outcomes grouped by reason, to maintain docs/conformance.md
# ---------------------------------------------------------------------------

def _headline(detail):
    lines = [line.strip() for line in detail.strip().splitlines() if line.strip()]
    for line in reversed(lines):
        if re.match(r"^[\w.]+(Error|Exception|Failure|Conflict|NotFound|BadRequest|"
                    r"Forbidden|Unauthorized|TimeoutException|ServerFault|"
                    r"InvalidHTTPResponseBody|UnexpectedResponseCode|"
                    r"Skip\w*)\b", line) or "Error:" in line:
            return line[:240]
    return lines[-1][:240] if lines else ""


def main(argv=None):
    """``python3 -m tests.conformance.test_tempest [-j N] [--keep DIR] [REGEX]``"""
    import argparse
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("-j", "--concurrency", type=int, default=CONCURRENCY)
    parser.add_argument("--keep", help="work directory to use and keep")
    parser.add_argument("--json", help="write {test id: [outcome, detail]} here")
    parser.add_argument("regex", nargs="?", default=TEST_REGEX)
    args = parser.parse_args(argv)
    workdir = pathlib.Path(args.keep or tempfile.mkdtemp(prefix="tempest-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        all_ids = list_tests(workdir, args.regex)
        results, elapsed = run_all(workdir, args.regex, args.concurrency, all_ids)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(results, indent=1, sort_keys=True))
    known = known_entries()
    verdict = compare(results, known, all_ids)
    groups = collections.defaultdict(list)
    for test_id, (outcome, detail) in sorted(results.items()):
        if outcome != "passed":
            mark = "" if test_id in known else "  <- not listed"
            groups[(outcome, _headline(detail))].append(test_id + mark)
    for (outcome, headline), ids in sorted(groups.items()):
        print(f"\n[{outcome}] {headline}")
        for test_id in ids:
            print(f"- `{test_id}`")
    for test_id in verdict["now_passing"]:
        print(f"listed but passes now: {test_id}")
    if args.regex == TEST_REGEX:  # a part of the suite says nothing of the rest
        for test_id in verdict["stale"]:
            print(f"listed but no longer exists: {test_id}")
    print(summary_line(verdict, elapsed, args.regex))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
