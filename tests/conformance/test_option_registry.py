"""Novella's configuration options against the reference's registries.

The reference's options come from the installed packages through the
``oslo.config.opts`` entry points the reference's sample generators use:
``nova.conf`` for the compute side, ``placement.conf`` for Placement, and,
for the library options the compute side declares itself, ``oslo.messaging``
and ``oslo.middleware`` (both in the reference's nova.conf generator). An option is compared by
group, name, type and default (its sample default where it has one, as
machine-dependent defaults have). Every difference kept is a row of the
tables "Configuration options: nova.conf" and "Configuration options:
placement.conf" of docs/conformance.md.
"""
import ast
import json
import pathlib
import re
import subprocess
import sys

import pytest

from novella.conf import opts as compute_opts
from novella.placement import conf as placement_conf
from tests.conformance import registry_diff

# What a ConfigOpts registers for itself, not part of any registry.
_BUILTIN = {"config_file", "config_dir", "config_source", "shell_completion"}

# Importing nova.conf registers the reference's options on oslo.config's
# global object, which Novella's compute side registers its own options on:
# the reference's registries are read in a separate interpreter.
_READ_REFERENCE = """
import json, sys
from importlib import metadata
points = {e.name: e for e in metadata.entry_points(group="oslo.config.opts")}
out = []
for namespace in sys.argv[1:]:
    for group, opts in points[namespace].load()():
        group = getattr(group, "name", group) or "DEFAULT"
        for opt in opts:
            default = opt.sample_default if opt.sample_default is not None else opt.default
            out.append([group, opt.name, type(opt).__name__, repr(default)])
print(json.dumps(out))
"""


def _load(*namespaces):
    for module in ("nova", "placement"):
        pytest.importorskip(module)
    done = subprocess.run([sys.executable, "-c", _READ_REFERENCE, *namespaces],
                          capture_output=True, text=True, timeout=60, check=True)
    return {(group, name.replace("-", "_")): (kind, default)
            for group, name, kind, default in json.loads(done.stdout)
            if name not in _BUILTIN}


def _index(groups):
    """{(group, name): (type, default)}; names with dashes as with underscores."""
    out = {}
    for group, opts in groups:
        group = getattr(group, "name", group) or "DEFAULT"
        for opt in opts:
            if opt.name in _BUILTIN:
                continue
            default = opt.sample_default if opt.sample_default is not None else opt.default
            out[(group, opt.name.replace("-", "_"))] = (type(opt).__name__, repr(default))
    return out


def differences(ours, reference):
    found = []
    for key in sorted(set(ours) | set(reference)):
        group, name = key
        if key not in reference:
            found.append((group, name, "not in the reference"))
        elif key not in ours:
            continue  # the reference's options Novella does not read are not compared
        else:
            (mine_type, mine_default), (ref_type, ref_default) = ours[key], reference[key]
            if mine_type != ref_type:
                found.append((group, name, f"type {mine_type}, reference {ref_type}"))
            if mine_default != ref_default:
                found.append((group, name, f"default {mine_default}, reference {ref_default}"))
    return found


def test_nova_conf_options_match_the_reference():
    ours = _index(compute_opts.list_opts())
    reference = _load("nova.conf", "oslo.messaging", "oslo.middleware")
    registry_diff.check(differences(ours, reference), "Configuration options: nova.conf")


def test_placement_conf_options_match_the_reference():
    # The oslo.policy and CORS options Placement registers are the libraries'
    # own objects: only Placement's own options are compared.
    ours = _index(placement_conf.list_opts())
    reference = _load("placement.conf")
    registry_diff.check(differences(ours, reference), "Configuration options: placement.conf")


def test_placement_database_connection_is_required():
    with pytest.raises(placement_conf.cfg.RequiredOptError):
        placement_conf.make_conf()
    conf = placement_conf.make_conf(overrides={"placement_database": {"connection": "sqlite://"}})
    assert conf.placement_database.connection == "sqlite://"


def test_comparison_sees_each_kind_of_difference():
    from oslo_config import cfg
    ref = [("g", [cfg.IntOpt("a", default=1), cfg.StrOpt("b", default="x"),
                  cfg.StrOpt("d")])]
    ours = [("g", [cfg.BoolOpt("a", default=False), cfg.StrOpt("b", default="y"),
                   cfg.StrOpt("c")])]
    assert differences(_index(ours), _index(ref)) == [
        ("g", "a", "type BoolOpt, reference IntOpt"),
        ("g", "a", "default False, reference 1"),
        ("g", "b", "default 'y', reference 'x'"),
        ("g", "c", "not in the reference")]


@pytest.mark.parametrize("namespace, source", [
    ("novella", compute_opts.list_opts), ("novella.placement", placement_conf.list_opts)])
def test_config_generator_writes_every_group_and_option(namespace, source):
    done = subprocess.run([sys.executable, "-m", "oslo_config.generator",
                           "--namespace", namespace], capture_output=True, text=True,
                          timeout=60, check=True)
    sections = {line[1:-1] for line in done.stdout.splitlines() if line.startswith("[")}
    expected = dict(source())
    assert set(expected) <= sections
    for group, opts in expected.items():
        for opt in opts:
            assert f"\n#{opt.dest} =" in done.stdout, (group, opt.dest)


# --- every option declared is read and documented --------------------------------------------
_PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "novella"


def _names_read(sources):
    """Attribute names and string constants of Python sources, where an option
    is read (``conf.group.name``, ``getattr(conf, "name")``, a weigher's
    ``multiplier_option = "name"``), and the f-strings that make names
    (``f"initial_{field}_allocation_ratio"``) as patterns."""
    names, patterns = set(), set()
    for text in sources:
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Attribute):
                names.add(node.attr)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                names.add(node.value)
            elif isinstance(node, ast.JoinedStr):
                literal = [p.value for p in node.values if isinstance(p, ast.Constant)]
                if len(re.findall(r"[a-z]{3,}", " ".join(literal))) >= 2:  # names, not text
                    patterns.add("".join(re.escape(p.value) if isinstance(p, ast.Constant)
                                         else r"[a-z]+" for p in node.values))
    return names, re.compile("|".join(f"(?:{p})" for p in patterns) or "(?!)")


def unread(groups, sources, declarations):
    """[group] name of each option Novella declares (its name is a string of
    ``declarations``, the declaring modules) that no source reads. A
    library's options that Novella registers (keystoneauth's,
    oslo.middleware's) are read by that library."""
    declared, _ = _names_read(declarations)
    names, made = _names_read(sources)
    return sorted(f"[{getattr(group, 'name', group) or 'DEFAULT'}] {opt.name}"
                  for group, opts in groups for opt in opts if opt.name in declared
                  and opt.dest not in names and not made.fullmatch(opt.dest))


def test_every_declared_option_is_read():
    from novella import conf
    declaring = {f"conf/{m.__name__.rsplit('.', 1)[1]}.py" for m in conf.MODULES}
    declaring |= {"conf/__init__.py", "conf/opts.py", "placement/conf.py"}
    modules = {p.relative_to(_PACKAGE).as_posix(): p.read_text()
               for p in _PACKAGE.rglob("*.py")}
    sources = [text for name, text in modules.items() if name not in declaring]
    declarations = [modules[name] for name in declaring if name in modules]
    assert unread(compute_opts.list_opts(), sources, declarations) == []
    assert unread(placement_conf.list_opts(), sources, declarations) == []


def test_an_option_nobody_reads_is_found():
    from oslo_config import cfg
    groups = [("g", [cfg.IntOpt("used_interval"), cfg.IntOpt("forgotten_interval"),
                     cfg.IntOpt("cpu_allocation_ratio")])]
    sources = ["conf.g.used_interval\n", 'getattr(conf.g, f"{kind}_allocation_ratio")\n',
               'print(f"{a} {b}")\n']
    declarations = ['IntOpt("used_interval"), IntOpt("forgotten_interval"), '
                    'IntOpt("cpu_allocation_ratio")']
    assert unread(groups, sources, declarations) == ["[g] forgotten_interval"]
    # A library's option, not declared by Novella, is the library's to read.
    assert unread([("g", [cfg.IntOpt("library_timeout")])], sources, declarations) == []


@pytest.mark.parametrize("source", [compute_opts.list_opts, placement_conf.list_opts])
def test_every_option_has_help(source):
    assert [(group, opt.name) for group, opts in source() for opt in opts
            if not (opt.help or "").strip()] == []
