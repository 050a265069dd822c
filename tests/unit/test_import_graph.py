"""Novella's modules import each other without a circle, and each service's
package keeps to the layers docs/architecture.md draws. Every import counts,
also one inside a function: a circle there is still two modules that cannot be
understood, or changed, apart."""
import ast
import graphlib
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _modules():
    """{dotted name: path} of every module of the package."""
    out = {}
    for path in (ROOT / "novella").rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _imports(modules):
    """{module: set of novella modules it imports}."""
    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules
                           else base for alias in node.names]
            else:
                continue
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    found.add(target)
        graph[name] = found
    return graph


GRAPH = _imports(_modules())


def test_no_module_takes_part_in_an_import_circle():
    try:
        tuple(graphlib.TopologicalSorter(GRAPH).static_order())
    except graphlib.CycleError as exc:
        pytest.fail(f"import circle: {' -> '.join(exc.args[1])}")


@pytest.mark.parametrize("package, forbidden", [
    ("novella.placement", ("novella.allinone", "novella.cmd", "novella.wsgi")),
])
def test_a_service_does_not_reach_up_into_what_deploys_it(package, forbidden):
    reached = {(module, target) for module, targets in GRAPH.items()
               if module == package or module.startswith(package + ".")
               for target in targets if target.startswith(forbidden)}
    assert reached == set()
