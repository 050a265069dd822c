"""The reference's Compute API samples, replayed against Novella.

One pytest test per sample test of the reference (``nova`` 34.0.0, a test
dependency): its ``api_sample_tests/test_*.py`` are executed against a fresh
Novella all-in-one by :mod:`tests.conformance.compute_samples`, and every
response is matched with its template (``api_samples/**/*.json.tpl``) as the
reference's sample test base matches it. Nothing is copied from the package.

docs/conformance.md, section "Compute API samples", holds two tables:

- "Resources not replayed": the reference's sample directories (or, for its
  tests of removed APIs, their module files) that Novella does not
  implement, each with its reason; their tests are skipped with it.
- "Known differences": ``| template | difference | reason |``, where the
  template is a template id (``servers/v2.47/server-get-resp``) or a test
  (``Class.method``) and the difference a name such as ``status``,
  ``missing server.locked_reason`` or ``value server.flavor.disk``; both
  may hold ``*`` wildcards. A difference not listed fails the test of its
  sample; a listed one that no run meets any more is reported in the
  summary (``ConformanceSummary``) as known-failing-now-passing.

``python3 -m tests.conformance.test_api_samples [-j N] [FILTER...]`` runs
them outside pytest and prints every difference found as a table row.
"""
import collections
import fnmatch
import json
import os
import pathlib
import re
import tempfile
import uuid
import warnings

import pytest

from tests.conformance import compute_samples as cs

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
STATUS_DOC = REPO_ROOT / "docs" / "conformance.md"
SECTION = "Compute API samples"
SKIP_TABLE = "Resources not replayed"
KNOWN_TABLE = "Known differences"

# What nova 34.0.0 ships.
EXPECTED_PACKAGE_VERSION = "34.0.0"
EXPECTED_TEMPLATES = 709
EXPECTED_TESTS = 745


class ConformanceSummary(UserWarning):
    """Carries the one-line summary of the whole replay."""


# ---------------------------------------------------------------------------
# docs/conformance.md
# ---------------------------------------------------------------------------

def doc_tables(doc=STATUS_DOC):
    """{table name: [row cells]} of the ``### `` tables inside the
    ``## Compute API samples`` section."""
    tables, section, table, header_seen = {}, False, None, False
    if not doc.exists():
        return tables
    for line in doc.read_text().splitlines():
        if line.startswith("## "):
            section, table = line[3:].strip() == SECTION, None
            continue
        if not section:
            continue
        if line.startswith("### "):
            table, header_seen = line[4:].strip(), False
            tables.setdefault(table, [])
            continue
        if table is None or not line.lstrip().startswith("|"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not header_seen:
            header_seen = True
            continue
        if all(set(c) <= {"-", ":", " "} for c in cells):
            continue
        tables[table].append([c.strip("`").strip() if i < len(cells) - 1 else c
                              for i, c in enumerate(cells)])
    return tables


def skipped_resources(doc=STATUS_DOC):
    return {row[0]: row[-1] for row in doc_tables(doc).get(SKIP_TABLE, []) if row}


def known_differences(doc=STATUS_DOC):
    """[(template pattern, difference pattern, reason)]"""
    return [(row[0], row[1], row[2]) for row in doc_tables(doc).get(KNOWN_TABLE, [])
            if len(row) >= 3]


def _glob(pattern, value):
    return fnmatch.fnmatchcase(value, pattern.replace("[", "[[]"))


def listed(known, sample, diff):
    """The known row covering a difference, or None."""
    for row in known:
        if _glob(row[0], sample) and _glob(row[1], diff):
            return row
    return None


# ---------------------------------------------------------------------------
# The reference's sample tests
# ---------------------------------------------------------------------------

def resource_of(module_name, cls):
    return cls.sample_dir or f"{module_name}.py"


def collect():
    """[(pytest id, module, class, method, resource, microversion)]"""
    if cs.tests_dir() is None:
        return []
    loader = cs.loader()
    cases = []
    for module_name in cs.test_modules():
        module, error = cs.load_module(loader, module_name)
        if module is None:
            cases.append((f"{module_name[5:]}:(module)", module_name, None, error,
                          f"{module_name}.py", None))
            continue
        for class_name, method in cs.test_cases(module):
            cls = getattr(module, class_name)
            _scenario, attrs = cs.pick_scenario(cls)
            cases.append((f"{module_name[5:]}:{class_name}.{method}", module_name,
                          class_name, method, resource_of(module_name, cls),
                          attrs.get("microversion", cls.microversion)))
    return cases


_CASES = collect()


def novella_max_version():
    from novella.api.compute import microversion
    return microversion.MAX_VERSION


def skip_reason(resource, microversion, skipped):
    if resource in skipped:
        return f"{resource}: {skipped[resource]}"
    if cs.version_tuple(microversion) > novella_max_version():
        return ("microversion %s is above Novella's maximum %d.%d"
                % ((microversion,) + novella_max_version()))
    return None


# ---------------------------------------------------------------------------
# Cross-process summary (pytest-xdist spreads the tests over workers)
# ---------------------------------------------------------------------------

def _run_id(config):
    workerinput = getattr(config, "workerinput", None)
    if workerinput and "testrunuid" in workerinput:
        return workerinput["testrunuid"]
    if not hasattr(config, "_api_samples_run_id"):
        config._api_samples_run_id = uuid.uuid4().hex
    return config._api_samples_run_id


def _selected(session):
    return {item.callspec.id for item in session.items
            if getattr(item, "originalname", None) == "test_sample"
            and getattr(item, "callspec", None) is not None}


def _record(request, test_id, outcome):
    results_dir = (pathlib.Path(tempfile.gettempdir())
                   / ("api-samples-" + _run_id(request.config)))
    results_dir.mkdir(exist_ok=True)
    name = test_id.replace("/", "_")
    tmp = results_dir / (name + ".tmp")
    tmp.write_text(json.dumps(outcome))
    tmp.replace(results_dir / (name + ".json"))
    expected = {t.replace("/", "_") for t in _selected(request.session)}
    done = {p.stem for p in results_dir.glob("*.json")}
    if not expected or not expected <= done:
        return
    try:
        fd = os.open(results_dir / "summary.lock", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return
    os.close(fd)
    outcomes = [json.loads((results_dir / (n + ".json")).read_text()) for n in expected]
    for n in expected:
        (results_dir / (n + ".json")).unlink(missing_ok=True)
    line, stale = summarise(outcomes, full_run=len(expected) == len(_CASES))
    now_passing = ["| %s | %s |" % row for row in stale]
    print(line)
    for row in now_passing:
        print("known-failing now passing: " + row)
    if now_passing:
        line += " (" + " ".join(now_passing) + ")"
    warnings.warn(ConformanceSummary(line), stacklevel=1)


def summarise(outcomes, full_run, known=None):
    """The summary line, and the known rows no run met (for a full run)."""
    known = known_differences() if known is None else known
    counts = collections.Counter()
    seen_rows, samples = set(), set()
    for out in outcomes:
        counts["tests"] += 1
        counts[out["outcome"]] += 1
        for check in out.get("checks", []):
            samples.add(check["sample"])
            counts["checks"] += 1
            diffs = check["diffs"]
            if not diffs:
                counts["checks_passed"] += 1
            elif all(d["row"] for d in diffs):
                counts["checks_known"] += 1
            else:
                counts["checks_unexpected"] += 1
            for d in diffs:
                if d["row"]:
                    seen_rows.add(tuple(d["row"]))
    stale = []
    if full_run:
        stale = [(t, d) for t, d, _reason in known
                 if (t, d) not in {r[:2] for r in seen_rows}]
    templates = set(cs.all_templates())
    line = ("compute API samples conformance: %d reference tests: %d passed, %d with known"
            " differences only, %d failed, %d skipped; %d checks: %d matched, %d known"
            " differences, %d unexpected; %d of %d templates exercised; %d known differences"
            " not met any more"
            % (counts["tests"], counts["passed"], counts["known"], counts["failed"],
               counts["skipped"], counts["checks"], counts["checks_passed"],
               counts["checks_known"], counts["checks_unexpected"],
               len(samples & templates), len(templates), len(stale)))
    return line, stale


# ---------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------

def classify(run, known):
    """[(sample, diff, message, row or None)] for every difference of a run."""
    return [(sample, diff, message, listed(known, sample, diff))
            for sample, diff, message in run.diffs()]


def test_reference_is_installed_and_complete():
    """The samples are really there: 709 templates, 745 tests (nova 34.0.0)."""
    assert cs.tests_dir() is not None, "nova is not installed; `pip install -e .[test]`"
    assert _CASES and cs.all_templates()
    if cs.nova_version() == EXPECTED_PACKAGE_VERSION:
        assert len(cs.all_templates()) == EXPECTED_TEMPLATES
        assert len(_CASES) == EXPECTED_TESTS, len(_CASES)
    unloadable = [(c[1], c[3]) for c in _CASES if c[2] is None]
    assert not unloadable, f"reference test modules that could not be read: {unloadable}"


def test_doc_tables_are_sound():
    """Every row of the two tables names something that exists, with a reason."""
    skipped = skipped_resources()
    assert skipped, f"{STATUS_DOC.name} has no '{SKIP_TABLE}' table under '## {SECTION}'"
    resources = {c[4] for c in _CASES} | {t.split("/")[0] for t in cs.all_templates()}
    unknown = sorted(set(skipped) - resources)
    assert not unknown, f"'{SKIP_TABLE}' names no resource of the reference: {unknown}"
    assert all(reason.strip() for reason in skipped.values())
    names = set(cs.all_templates()) | {c[0].split(":", 1)[1] for c in _CASES}
    request = re.compile(r"^(GET|POST|PUT|DELETE|\*) \S")  # a request without a template
    bad = [(t, d) for t, d, reason in known_differences()
           if not reason.strip() or not (request.match(t) or any(_glob(t, n) for n in names))]
    assert not bad, f"'{KNOWN_TABLE}' rows naming no template or test, or without reason: {bad}"


def test_every_template_directory_is_replayed_or_listed():
    """A directory of templates that no replayed test exercises is listed."""
    skipped = skipped_resources()
    exercised = {c[4] for c in _CASES}
    silent = sorted({t.split("/")[0] for t in cs.all_templates()}
                    - exercised - set(skipped))
    assert not silent, (f"template directories no reference test replays, not listed in"
                        f" '{SKIP_TABLE}': {silent}")


@pytest.mark.parametrize("case", _CASES, ids=[c[0] for c in _CASES])
def test_sample(case, request):
    test_id, module_name, class_name, method, resource, microversion = case
    if class_name is None:
        _record(request, test_id, {"outcome": "failed"})
        pytest.fail(f"{module_name} of the reference could not be read: {method}")
    reason = skip_reason(resource, microversion, skipped_resources())
    if reason:
        _record(request, test_id, {"outcome": "skipped"})
        pytest.skip(reason)
    if cs.is_empty(getattr(cs.loader().module(module_name), class_name), method):
        _record(request, test_id, {"outcome": "skipped"})
        pytest.skip("the reference test is empty (`pass`) in this class")
    with cs.quiet_logs():
        run = cs.run_test(module_name, class_name, method)
    known = known_differences()
    found = classify(run, known)
    unexpected = [f for f in found if f[3] is None]
    outcome = "failed" if unexpected else ("known" if found else "passed")
    _record(request, test_id, {"outcome": outcome, "checks": [
        {"sample": c["sample"], "diffs": [
            {"diff": name, "row": list(listed(known, c["sample"], name) or [])[:2]}
            for name, _message in c["diffs"]]} for c in run.checks]})
    assert run.checks, f"{test_id}: the reference test checked nothing"
    if unexpected:
        lines = [f"{test_id}: differences not listed in docs/conformance.md"
                 f" ({SECTION} / {KNOWN_TABLE}):"]
        for check in run.checks:
            mine = [(d, m) for d, m in check["diffs"] if not listed(known, check["sample"], d)]
            if not mine:
                continue
            req = check["request"]
            if req:
                lines.append("%s: %s %s (microversion %s%s)" % (
                    check["sample"], req["method"], req["url"], req["microversion"] or "2.1",
                    ", request %s" % req["template"] if req["template"] else ""))
            for diff, message in mine:
                lines.append(f"| {check['sample']} | {diff} | {message}")
        if run.internals:
            lines.append("(the reference test also relies on, inside the reference: %s)"
                         % "; ".join(run.internals))
        pytest.fail("\n".join(lines), pytrace=False)


def test_matcher_follows_the_reference():
    """Placeholders, integers, lists in any order, JSON in strings, nulls."""
    subs = dict(cs.base_regexes("compute"), hostid="[a-f0-9]+")
    template = cs.objectify(
        '{"a": {"id": "%(id)s", "n": %(int)s, "h": "%(hostid)s"}, "l": [1, 2],'
        ' "s": "{\\"x\\": 1}", "z": null}')
    uuid_ = "8600d31b-d1a1-4632-b2ff-45c2be1a70ff"
    m = cs.Matcher(subs)
    got = m.compare(template, {"a": {"id": uuid_, "n": 3, "h": "ab12"}, "l": [2, 1],
                               "s": '{"x": 1}', "z": ""})
    assert (got, m.diffs) == (uuid_, [])
    m = cs.Matcher(subs)
    m.compare(template, {"a": {"id": "x", "n": 3, "extra": 1}, "l": [1], "s": "y", "z": 1})
    assert [d for d, _ in m.diffs] == ["missing a.h", "extra a.extra", "value a.id",
                                       "items l", "value s", "value z"]


def test_summary_counts_and_known_differences_now_passing():
    known = [("servers/*", "value *x", "why"), ("limits/*", "status", "gone")]
    outcomes = [
        {"outcome": "known", "checks": [
            {"sample": "servers/server-get-resp",
             "diffs": [{"diff": "value server.x", "row": ["servers/*", "value *x"]}]},
            {"sample": "servers/server-create-resp", "diffs": []}]},
        {"outcome": "skipped"}]
    line, stale = summarise(outcomes, full_run=True, known=known)
    assert stale == [("limits/*", "status")]
    assert "2 reference tests: 0 passed, 1 with known differences only" in line
    assert "2 checks: 1 matched, 1 known differences, 0 unexpected" in line
    assert summarise(outcomes, full_run=False, known=known)[1] == []


def test_doc_table_parser(tmp_path):
    doc = tmp_path / "conformance.md"
    doc.write_text(
        "## Other\n| a | b |\n|---|---|\n| x | y |\n"
        f"## {SECTION}\n\ntext\n\n### {SKIP_TABLE}\n\n| Resource | Reason |\n|---|---|\n"
        "| `os-rescue` | not implemented |\n\n"
        f"### {KNOWN_TABLE}\n\n| Template | Difference | Reason |\n|---|---|---|\n"
        "| `servers/*` | `value server.x` | why |\n## Next\n| q | r | s |\n")
    assert skipped_resources(doc) == {"os-rescue": "not implemented"}
    assert known_differences(doc) == [("servers/*", "value server.x", "why")]


# ---------------------------------------------------------------------------
# Command line: every difference as a table row (to maintain the doc)
# ---------------------------------------------------------------------------

def _run_for_report(case):
    test_id, module_name, class_name, method, resource, microversion = case
    with cs.quiet_logs():
        run = cs.run_test(module_name, class_name, method)
    return test_id, [(s, d, m) for s, d, m in run.diffs()], run.internals, [
        (c["sample"], c["request"]) for c in run.checks]


def main(argv=None):
    """``python3 -m tests.conformance.test_api_samples [-j N] [--bindings] [FILTER...]``"""
    import argparse
    import multiprocessing

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("-j", "--jobs", type=int, default=2)
    parser.add_argument("--bindings", action="store_true",
                        help="print which request each template was checked against")
    parser.add_argument("filters", nargs="*", help="substrings of test ids (default: all)")
    args = parser.parse_args(argv)
    skipped = skipped_resources()
    cases = [c for c in _CASES if c[2] is not None
             and not skip_reason(c[4], c[5], skipped)
             and (not args.filters or any(f in c[0] for f in args.filters))]
    with multiprocessing.get_context("spawn").Pool(args.jobs) as pool:
        results = pool.map(_run_for_report, cases, chunksize=4)
    known = known_differences()
    rows = collections.defaultdict(list)
    bindings = set()
    for test_id, diffs, internals, checks in results:
        for sample, diff, message in diffs:
            rows[(sample, diff)].append((test_id, message, internals))
        for sample, req in checks:
            if req:
                bindings.add((sample, req["method"], req["url"], str(req["microversion"]),
                              str(req["template"])))
    for (sample, diff), seen in sorted(rows.items()):
        mark = "" if listed(known, sample, diff) else "  <- not listed"
        test_id, message, internals = seen[0]
        print(f"| `{sample}` | `{diff}` | {message[:200].replace('|', '/')} |{mark}"
              f"  [{len(seen)}x, e.g. {test_id}; stubs: {'; '.join(internals)[:200]}]")
    if args.bindings:
        for row in sorted(bindings):
            print("binding: " + " | ".join(row))
    print(f"{len(cases)} reference tests, {len(rows)} distinct differences,"
          f" {sum(1 for k in rows if not listed(known, *k))} not listed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
