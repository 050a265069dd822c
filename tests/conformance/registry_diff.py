"""Shared by the policy and option registry tests: the tables of kept
differences in docs/conformance.md, and the check that they match what a
comparison with the reference finds."""
import fnmatch
import pathlib

import pytest

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "conformance.md"


def listed(section):
    """Rows of the table under ``## <section>`` (None without that section):
    tuples of the cells but the last (the reason)."""
    rows, inside, header_seen, present = [], False, False, False
    for line in DOC.read_text().splitlines():
        if line.startswith("## "):
            inside = line[3:].strip() == section
            present = present or inside
            header_seen = False
            continue
        if not inside or not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not header_seen:
            header_seen = True  # the header row
            continue
        if set(cells[0]) <= {"-", ":"}:
            continue
        assert cells[-1], f"no reason given for {cells}"
        rows.append(tuple(c.strip("`") for c in cells[:-1]))
    return rows if present else None


def check(found, section):
    """Every difference found is listed; every listed row matches one found."""
    rows = listed(section)
    if rows is None:
        pytest.fail(f"docs/conformance.md has no section '## {section}'")

    def matches(row, diff):
        """A cell with ``*`` is a pattern (``*`` only); others are compared as they are."""
        return len(row) == len(diff) and all(
            fnmatch.fnmatchcase(value, pattern.replace("[", "[[]")) if "*" in pattern
            else value == pattern for pattern, value in zip(row, diff))

    unlisted = [d for d in found if not any(matches(r, d) for r in rows)]
    stale = [r for r in rows if not any(matches(r, d) for d in found)]
    message = []
    if unlisted:
        message.append("Differences not listed in docs/conformance.md (%s):\n  %s" % (
            section, "\n  ".join(" | ".join(d) for d in sorted(unlisted))))
    if stale:
        message.append("Listed differences that no longer exist (%s):\n  %s" % (
            section, "\n  ".join(" | ".join(r) for r in stale)))
    assert not message, "\n".join(message)
