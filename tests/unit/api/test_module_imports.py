"""The Compute API's modules import no private name of one another and form no circle."""
import ast
import pathlib

import novella

PACKAGE = "novella.api.compute"
ROOT = pathlib.Path(novella.__file__).parent.parent


def _modules():
    out = {}
    for path in (ROOT / "novella" / "api" / "compute").rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = ast.parse(path.read_text())
    return out


def _imports(name, tree, modules):
    """(modules ``name`` imports, private names it takes from them), wherever the
    import statement is (a function's too)."""
    imported, private = set(), []
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PACKAGE):
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if full in modules:
                    imported.add(full)
                    aliases[alias.asname or alias.name] = full
                else:
                    imported.add(node.module)
                    if alias.name.startswith("_"):
                        private.append(full)
        elif isinstance(node, ast.Import):
            imported.update(a.name for a in node.names if a.name in modules)
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in aliases and node.attr.startswith("_")):
            private.append(f"{aliases[node.value.id]}.{node.attr}")
    return imported - {name}, private


def test_no_module_takes_a_private_name_of_another():
    modules = _modules()
    found = {name: _imports(name, tree, modules)[1] for name, tree in modules.items()}
    assert {name: p for name, p in found.items() if p} == {}


def test_no_import_circle():
    modules = _modules()
    graph = {name: _imports(name, tree, modules)[0] for name, tree in modules.items()}
    done, path = set(), []

    def visit(name):
        if name in path:
            raise AssertionError("import circle: " + " -> ".join(path[path.index(name):] + [name]))
        if name in done:
            return
        path.append(name)
        for other in sorted(graph[name]):
            visit(other)
        path.pop()
        done.add(name)

    for name in sorted(graph):
        visit(name)
