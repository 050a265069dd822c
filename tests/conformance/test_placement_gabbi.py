"""Placement's own gabbi HTTP suite, run against our Placement service.

The YAML files are loaded from the installed ``openstack-placement`` package
(a test-only dependency); nothing is copied into this repository.  Each
pytest test runs one YAML file: the tests inside a file depend on each other
and run in order, in one process, against a fresh service and database
built by the fixtures in :mod:`tests.conformance.placement_fixtures`.

A gabbi test may fail only if it is listed, with a reason, in
``docs/conformance.md``; any other failure fails the pytest test of its
file.  ``NOVELLA_GABBI_TARGET=reference`` runs the very same suite against
the reference implementation, where everything passes.

Every file also runs through a real socket to ``novella serve placement``
under gunicorn, a server of its own with a fresh database
(``test_gabbi_file_through_gunicorn``). ``NOVELLA_GABBI_SERVER`` says how
``test_gabbi_file`` reaches the service: ``intercept`` (in process, the
default), ``threaded`` (the all-in-one's threaded HTTP/1.1 server) or
``gunicorn`` (see :mod:`tests.conformance.placement_fixtures`). Through a
socket, the tests listed under "Known failures through a socket" in
``docs/conformance.md`` may fail too.
"""
import collections
import contextlib
import copy
import functools
import importlib.util
import json
import os
import pathlib
import re
import tempfile
import unittest
import uuid
import warnings

import pytest

from tests.conformance import placement_fixtures

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
STATUS_DOC = REPO_ROOT / "docs" / "conformance.md"

# What openstack-placement 16.0.0 ships.
EXPECTED_PACKAGE_VERSION = "16.0.0"
EXPECTED_FILES = 79
EXPECTED_TESTS = 1316

KNOWN_SECTION = "## Known failures"
SOCKET_SECTION = "## Known failures through a socket"


class ConformanceSummary(UserWarning):
    """Carries the one-line summary of the whole gabbi run."""


# ---------------------------------------------------------------------------
# Locating and reading the suite
# ---------------------------------------------------------------------------

def gabbits_dir():
    spec = importlib.util.find_spec("placement")
    if spec is None or not spec.submodule_search_locations:
        return None
    for base in spec.submodule_search_locations:
        path = pathlib.Path(base) / "tests" / "functional" / "gabbits"
        if path.is_dir():
            return path
    return None


def placement_version():
    from importlib import metadata
    try:
        return metadata.version("openstack-placement")
    except metadata.PackageNotFoundError:
        return None


def yaml_files():
    directory = gabbits_dir()
    if directory is None:
        return []
    return sorted(directory.glob("*.yaml"))


def load_yaml(path):
    """The parsed file (a copy: gabbi may change what it is given)."""
    return copy.deepcopy(_parsed_yaml(str(path)))


@functools.lru_cache(maxsize=None)
def _parsed_yaml(path):
    from gabbi import utils
    return utils.load_yaml(yaml_file=path, safe=True)


def yaml_test_names(path):
    return [t["name"] for t in load_yaml(path)["tests"]]


def known_failures(doc=STATUS_DOC, section=KNOWN_SECTION):
    """Parse a known-failure table of docs/conformance.md.

    Rows look like ``| file.yaml | test name | reason |`` and must follow
    the ``section`` heading (until the next heading).
    Returns {(file, test name): reason}.
    """
    known = {}
    if not doc.exists():
        return known
    in_section = False
    for line in doc.read_text().splitlines():
        if line.startswith("#"):
            in_section = line.strip().lower() == section.lower()
            continue
        if not in_section or not line.lstrip().startswith("|"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or not cells[0].strip("`").endswith(".yaml"):
            continue  # header or separator row
        known[(cells[0].strip("`"), cells[1].strip("`"))] = cells[2]
    return known


def known_for_this_run(doc=STATUS_DOC, server=None):
    """The failures allowed in this run: through a socket, also those of
    the socket's own table."""
    known = known_failures(doc)
    if (server or placement_fixtures.current_server()) != "intercept":
        known.update(known_failures(doc, SOCKET_SECTION))
    return known


# ---------------------------------------------------------------------------
# Running one YAML file
# ---------------------------------------------------------------------------

class _Recorder(unittest.TestResult):
    """Records one outcome per gabbi test case."""

    def __init__(self):
        super().__init__()
        self.outcomes = {}

    def _set(self, test, outcome, detail=""):
        self.outcomes[id(test)] = (outcome, detail)

    def addSuccess(self, test):
        super().addSuccess(test)
        self._set(test, "passed")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._set(test, "failed", self._exc_info_to_string(err, test))

    def addError(self, test, err):
        super().addError(test, err)
        # A fixture error is reported against the first test; keep it.
        self._set(test, "failed", self._exc_info_to_string(err, test))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        if self.outcomes.get(id(test), ("",))[0] == "failed":
            return
        if reason == "fixture failure":
            # Gabbi skips a whole file whose fixture broke: none of its
            # tests was really exercised, so none counts as passing.
            self._set(test, "failed", "not run: the file's fixture failed")
        else:
            self._set(test, "skipped", reason)

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._set(test, "xfailed")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._set(test, "failed", "unexpected success of an xfail test")


class _CachedJsonPath:
    """Stands in for ``jsonpath_ng.ext`` inside gabbi's JSON handler.

    Building a JSONPath parser regenerates its parse tables each time, which
    costs more than the HTTP request being checked.  The suite uses a few
    hundred distinct paths, so parsed expressions are remembered.
    """

    def __init__(self, module):
        self._module = module
        self.parse = functools.lru_cache(maxsize=4096)(module.parse)

    def __getattr__(self, name):
        return getattr(self._module, name)


@contextlib.contextmanager
def _fast_jsonpath():
    from gabbi.handlers import jsonhandler

    original = jsonhandler.json_parser
    if not isinstance(original, _CachedJsonPath):
        jsonhandler.json_parser = _CACHED_JSONPATH.setdefault(
            "parser", _CachedJsonPath(original))
    try:
        yield
    finally:
        jsonhandler.json_parser = original


_CACHED_JSONPATH = {}


@contextlib.contextmanager
def _fast_http_clients():
    """Gabbi builds an HTTP client per test; by default each loads the CA
    bundle into an SSL context of its own (tens of milliseconds, more than
    the request), although the suite speaks plain HTTP. The context is
    built once per kind while the file's tests are built."""
    from httpx._transports import default

    original = default.create_ssl_context
    default.create_ssl_context = _CACHED_SSL.setdefault(
        "create", functools.lru_cache(maxsize=16)(original))
    try:
        yield
    finally:
        default.create_ssl_context = original


_CACHED_SSL = {}


@contextlib.contextmanager
def _endpoint(path):
    """(host, port, intercept) gabbi sends this file's requests to."""
    server = placement_fixtures.current_server()
    if server == "intercept":
        yield str(uuid.uuid4()), None, placement_fixtures.setup_app
    elif server == "threaded":
        from novella.service import HTTPServer
        http = HTTPServer(placement_fixtures.setup_app(), "127.0.0.1", 0,
                          "placement").start()
        try:
            yield http.host, http.port, None
        finally:
            http.stop()
    else:  # gunicorn: a server of the file's own, its fixture's configuration
        names = load_yaml(path).get("fixtures") or []
        classes = {getattr(placement_fixtures, name) for name in names}
        assert len(classes) == 1, "%s: one fixture expected, not %s" % (
            path.name, names)
        gunicorn = placement_fixtures.acquire_server(classes.pop())
        try:
            yield "127.0.0.1", gunicorn.port, None
        finally:
            placement_fixtures.release_server(gunicorn)


def run_yaml_file(path):
    """Run one gabbi YAML file; return [(test name, outcome, detail)]."""
    from gabbi import handlers
    from gabbi import suitemaker

    handler_objects = [handler() for handler in handlers.RESPONSE_HANDLERS]
    loader = unittest.TestLoader()
    result = _Recorder()
    with _endpoint(path) as (host, port, intercept):
        with _fast_http_clients():
            suite = suitemaker.test_suite_from_dict(
                loader, "placement_" + path.stem.replace("-", "_").replace(".", "_"),
                load_yaml(path), str(path.parent), host, port,
                placement_fixtures, intercept, prefix="",
                handlers=handler_objects, test_loader_name=__name__)
        cases = list(suite)  # a suite forgets its tests once they have run
        try:
            with _fast_jsonpath():
                suite.run(result)
        finally:
            for case in cases:  # their kept-alive connections
                case.http.client.close()
    rows = []
    for case in cases:
        outcome, detail = result.outcomes.get(
            id(case), ("not run", "no outcome recorded"))
        rows.append((case.test_data["name"], outcome, detail))
    return rows


def _short(detail, limit=1500):
    """The exception part of a traceback (the frames are gabbi's own)."""
    lines = detail.strip().splitlines()
    start = 0
    for index, line in enumerate(lines):
        if line.startswith("Traceback"):
            start = index + 1
            while start < len(lines) and lines[start].startswith(" "):
                start += 1
    text = "\n".join(lines[start:]).strip() or detail.strip()
    if len(text) > limit:
        text = text[:limit] + " ..."
    return text


# ---------------------------------------------------------------------------
# Cross-process summary (pytest-xdist runs files in several workers)
# ---------------------------------------------------------------------------

def _run_id(config):
    workerinput = getattr(config, "workerinput", None)
    if workerinput and "testrunuid" in workerinput:
        return workerinput["testrunuid"]
    if not hasattr(config, "_placement_gabbi_run_id"):
        config._placement_gabbi_run_id = uuid.uuid4().hex
    return config._placement_gabbi_run_id


def _selected_files(session, test_name):
    files = set()
    for item in session.items:
        callspec = getattr(item, "callspec", None)
        if (getattr(item, "originalname", None) == test_name
                and callspec is not None):
            files.add(callspec.id)
    return files


def _record_and_maybe_summarise(request, yaml_name, counts, server):
    """Store this file's counts; the last file of the run emits the summary
    (one per test function, e.g. in process and through gunicorn)."""
    test_name = request.node.originalname
    results_dir = (pathlib.Path(tempfile.gettempdir())
                   / ("placement-gabbi-%s-%s" % (_run_id(request.config),
                                                 test_name)))
    results_dir.mkdir(exist_ok=True)
    tmp = results_dir / (yaml_name + ".tmp")
    tmp.write_text(json.dumps(counts))
    tmp.replace(results_dir / (yaml_name + ".json"))

    expected = _selected_files(request.session, test_name)
    done = {p.stem for p in results_dir.glob("*.json")}
    if not expected or not expected <= done:
        return
    try:
        fd = os.open(results_dir / "summary.lock",
                     os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return
    os.close(fd)
    total = collections.Counter()
    for name in expected:
        total.update(json.loads((results_dir / (name + ".json")).read_text()))
    for name in expected:
        (results_dir / (name + ".json")).unlink(missing_ok=True)
    line = summary_line(total, len(expected), server)
    print(line)
    warnings.warn(ConformanceSummary(line), stacklevel=1)


def summary_line(counts, files, server=None):
    return ("placement gabbi conformance [target=%s, server=%s]: %d tests in"
            " %d files: %d passed, %d failed (%d known, %d unexpected),"
            " %d known-failing now passing, %d skipped, %d xfailed"
            % (placement_fixtures.current_target(),
               server or placement_fixtures.current_server(), counts["tests"], files,
               counts["passed"], counts["failed"], counts["known_failed"],
               counts["unexpected_failed"], counts["known_passed"],
               counts["skipped"], counts["xfailed"]))


# ---------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------

_FILES = yaml_files()


def test_suite_is_installed_and_complete():
    """The suite is really there: 79 files, 1316 tests (placement 16.0.0)."""
    assert gabbits_dir() is not None, (
        "openstack-placement is not installed; `pip install -e .[test]`")
    total = sum(len(yaml_test_names(p)) for p in _FILES)
    assert _FILES and total > 0
    if placement_version() == EXPECTED_PACKAGE_VERSION:
        assert (len(_FILES), total) == (EXPECTED_FILES, EXPECTED_TESTS)


def test_known_failures_name_real_tests():
    """Every entry of docs/conformance.md names an existing test."""
    known = dict(known_failures())
    known.update(known_failures(section=SOCKET_SECTION))
    existing = {(p.name, name) for p in _FILES for name in yaml_test_names(p)}
    stale = sorted(set(known) - existing)
    assert not stale, "docs/conformance.md lists unknown tests: %s" % stale
    empty = sorted(k for k, reason in known.items() if not reason)
    assert not empty, "known failures without a reason: %s" % empty


@pytest.fixture(scope="module", autouse=True)
def _gunicorn_servers():
    yield
    placement_fixtures.stop_servers()


def _check_file(yaml_path, request, server):
    names = yaml_test_names(yaml_path)
    known = known_for_this_run(server=server)
    rows = run_yaml_file(yaml_path)

    # The harness must really have run every test of the file.
    assert len(rows) == len(names) > 0, (
        "%s: %d tests in the YAML, %d run" % (yaml_path.name, len(names),
                                              len(rows)))
    assert [r[0] for r in rows] == names
    not_run = [name for name, outcome, _ in rows if outcome == "not run"]
    assert not not_run, "%s: tests never executed: %s" % (yaml_path.name,
                                                          not_run)

    counts = collections.Counter(tests=len(rows), passed=0, failed=0,
                                 known_failed=0, unexpected_failed=0,
                                 known_passed=0, skipped=0, xfailed=0)
    unexpected = []
    for name, outcome, detail in rows:
        counts[outcome] += 1
        is_known = (yaml_path.name, name) in known
        if outcome == "failed":
            if is_known:
                counts["known_failed"] += 1
            else:
                counts["unexpected_failed"] += 1
                unexpected.append((name, detail))
        elif is_known:
            counts["known_passed"] += 1
    assert sum(counts[k] for k in ("passed", "failed", "skipped",
                                   "xfailed")) == len(rows)

    print("%s: %d tests, %d passed, %d failed (%d known), %d skipped"
          % (yaml_path.name, counts["tests"], counts["passed"],
             counts["failed"], counts["known_failed"], counts["skipped"]))
    _record_and_maybe_summarise(request, yaml_path.stem, dict(counts), server)

    if unexpected:
        lines = ["%s: %d of %d tests failed and are not listed in %s:"
                 % (yaml_path.name, len(unexpected), len(rows),
                    STATUS_DOC.relative_to(REPO_ROOT))]
        for name, detail in unexpected:
            lines.append("--- %s\n%s" % (name, _short(detail)))
        pytest.fail("\n".join(lines), pytrace=False)


@pytest.mark.parametrize("yaml_path", _FILES, ids=[p.stem for p in _FILES])
def test_gabbi_file(yaml_path, request):
    """The file in the way NOVELLA_GABBI_SERVER says (default: in process)."""
    _check_file(yaml_path, request, placement_fixtures.current_server())


@pytest.mark.parametrize("yaml_path", _FILES, ids=[p.stem for p in _FILES])
def test_gabbi_file_through_gunicorn(yaml_path, request, monkeypatch):
    """The file through a real socket to `novella serve placement` under
    gunicorn, a server of its own with a fresh database."""
    if placement_fixtures.current_target() != "novella":
        pytest.skip("serves Novella's own `serve placement`")
    if placement_fixtures.current_server() == "gunicorn":
        pytest.skip("test_gabbi_file runs it through gunicorn already")
    monkeypatch.setenv(placement_fixtures.SERVER_ENV, "gunicorn")
    _check_file(yaml_path, request, "gunicorn")


def test_status_table_parser(tmp_path):
    """The known-failure table format of docs/conformance.md is understood."""
    doc = tmp_path / "conformance.md"
    doc.write_text(
        "# Status\n\n| file | test | reason |\n|---|---|---|\n"
        "| `x.yaml` | ignored | not in section |\n\n"
        "## Known failures\n\n"
        "| File | Test | Reason |\n|------|------|--------|\n"
        "| `a.yaml` | get a thing | not implemented |\n"
        "| b.yaml | `post: it` | wrong code |\n\n"
        "## Other\n| `c.yaml` | t | r |\n")
    assert known_failures(doc) == {("a.yaml", "get a thing"): "not implemented",
                                   ("b.yaml", "post: it"): "wrong code"}


def test_recorder_counts_every_outcome():
    """The result recorder sees passes, failures, errors and skips."""
    class Case(unittest.TestCase):
        def test_pass(self):
            pass

        def test_fail(self):
            self.fail("no")

        def test_error(self):
            raise RuntimeError("boom")

        def test_skip(self):
            self.skipTest("later")

    suite = unittest.TestLoader().loadTestsFromTestCase(Case)
    result = _Recorder()
    suite.run(result)
    got = sorted(outcome for outcome, _ in result.outcomes.values())
    assert got == ["failed", "failed", "passed", "skipped"]



# ---------------------------------------------------------------------------
# Command line: list the current failures (to maintain docs/conformance.md)
# ---------------------------------------------------------------------------

def _failure_headline(detail):
    """The most telling line of a gabbi failure traceback."""
    lines = [line.strip() for line in detail.strip().splitlines()
             if line.strip()]
    for line in reversed(lines):
        if line.startswith(("AssertionError", "testtools", "gabbi",
                            "ValueError", "TypeError", "KeyError",
                            "RuntimeError")) or "Error:" in line:
            return line[:300]
    return lines[-1][:300] if lines else ""


_REASON_PATTERNS = [
    (re.compile(r"AssertionError: (.*?) != (.*?) : Unable to match (\S+) as"),
     lambda m: "%s is %s, expected %s" % (m.group(3), m.group(2),
                                           m.group(1))),
    (re.compile(r"AssertionError: '(\d+)' not found in \[(.*)\]"),
     lambda m: "answers %s, expected %s" % (m.group(1),
                                             m.group(2).replace("'", ""))),
    (re.compile(r"AssertionError: (.*) not found in <html>"),
     lambda m: "error body is HTML, expected JSON containing %s"
     % m.group(1)[:80]),
    (re.compile(r"AssertionError: (.*) not found in \{"),
     lambda m: "error detail lacks %s" % m.group(1)[:80]),
    (re.compile(r"AssertionError: '([^']*)' != '([^']*)'$"),
     lambda m: "header is '%s', expected '%s'" % (m.group(2), m.group(1))),
    (re.compile(r"(\w+Error: .*)"), lambda m: "500: %s" % m.group(1)[:100]),
]


def failure_reason(detail):
    """A short, table-friendly reason derived from a failure traceback."""
    headline = _failure_headline(detail)
    for pattern, render in _REASON_PATTERNS:
        match = pattern.search(headline)
        if match:
            return render(match)
    return headline


def _run_for_report(path):
    try:
        rows = run_yaml_file(pathlib.Path(path))
    finally:
        placement_fixtures.stop_servers()  # pool processes skip atexit
    return [(pathlib.Path(path).name, name, failure_reason(detail))
            for name, outcome, detail in rows if outcome == "failed"]


def main(argv=None):
    """``python3 -m tests.conformance.test_placement_gabbi [-j N] [FILE...]``

    Runs the suite outside pytest and prints the failing tests as rows of
    the known-failure table, with the assertion that failed.
    """
    import argparse
    import multiprocessing

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("-j", "--jobs", type=int, default=2)
    parser.add_argument("files", nargs="*",
                        help="YAML file stems to run (default: all)")
    args = parser.parse_args(argv)
    paths = [str(p) for p in _FILES if not args.files or p.stem in args.files]
    with multiprocessing.get_context("spawn").Pool(args.jobs) as pool:
        results = pool.map(_run_for_report, paths, chunksize=1)
    failures = [row for rows in results for row in rows]
    known = known_for_this_run()
    total = sum(len(yaml_test_names(pathlib.Path(p))) for p in paths)
    for file_name, name, headline in failures:
        mark = "" if (file_name, name) in known else "  <- not listed"
        print("| `%s` | %s | %s |%s" % (file_name, name,
                                        headline.replace("|", "/"), mark))
    stale = sorted(set(known) - {(f, n) for f, n, _ in failures})
    for file_name, name in stale:
        print("now passing (listed): %s: %s" % (file_name, name))
    print("%d tests in %d files, %d failed, %d listed entries now pass"
          % (total, len(paths), len(failures), len(stale)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
