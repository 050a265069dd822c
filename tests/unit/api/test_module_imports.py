"""The Compute API's modules import no private name of one another, form no circle
and hold no SQL (novella/db/ does); no handler module imports another (what they
share is in novella/api/compute/common.py and actions.py)."""
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


def _absolute(name, node):
    """The module a ``from ... import`` names, a relative one made absolute (``name``
    is taken for a module, not a package's ``__init__``)."""
    if not node.level:
        return node.module or ""
    anchor = name.split(".")[:-node.level]
    return ".".join(anchor + ([node.module] if node.module else []))


def _imports(name, tree, modules):
    """(modules ``name`` imports, private names it takes from them), wherever the
    import statement is (a function's too)."""
    imported, private = set(), []
    aliases = {}
    for node in ast.walk(tree):
        module = _absolute(name, node) if isinstance(node, ast.ImportFrom) else ""
        if module.startswith(PACKAGE):
            for alias in node.names:
                full = f"{module}.{alias.name}"
                if full in modules:
                    imported.add(full)
                    aliases[alias.asname or alias.name] = full
                else:
                    imported.add(module)
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


HANDLERS = PACKAGE + ".handlers"


def _handlers_imported(name, tree, modules):
    """The handler modules (or their package) the handler module ``name`` imports."""
    return sorted(m for m in _imports(name, tree, modules)[0]
                  if m == HANDLERS or m.startswith(HANDLERS + "."))


def test_the_check_finds_a_handler_importing_another():
    tree = ast.parse("from novella.api.compute import common\n"
                     "from novella.api.compute.handlers import servers as s\n"
                     "from novella.api.compute.handlers.server_extras import diagnostics\n"
                     "from . import flavors\n"
                     "from novella.api.compute import handlers\n"
                     "def show(req):\n"
                     "    import novella.api.compute.handlers.images\n")
    assert _handlers_imported(HANDLERS + ".keypairs", tree, _modules()) == [
        HANDLERS, HANDLERS + ".flavors", HANDLERS + ".images", HANDLERS + ".server_extras",
        HANDLERS + ".servers"]


def test_no_handler_module_imports_another():
    modules = _modules()
    found = {name: _handlers_imported(name, tree, modules) for name, tree in modules.items()
             if name.startswith(HANDLERS + ".")}
    assert {name: m for name, m in found.items() if m} == {}


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


# What only the database layer (novella/db/) does: SQLAlchemy, the mapped
# models, and opening a session or a connection on a database.
_MODELS = ("novella.db.api_models", "novella.db.cell_models", "novella.db.placement_models",
           "novella.db.optimize_models")
_OPENERS = ("session", "read_session", "connection", "reader")


def _database_use(tree):
    """["line: what"] of the module's imports of SQLAlchemy or of the models and of
    the sessions and connections it opens."""
    found = []
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        for name in names:
            if name.split(".")[0] == "sqlalchemy" or name in _MODELS:
                found.append(f"{node.lineno}: imports {name}")
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in _OPENERS):
            found.append(f"{node.lineno}: opens {node.func.attr}()")
    return sorted(set(found))


def test_the_check_finds_sql_in_a_module():
    tree = ast.parse("import sqlalchemy as sa\n"
                     "from novella.db import cell_models as cm\n"
                     "def read(req):\n"
                     "    with req.api.api_db.session() as s:\n"
                     "        return s.scalars(sa.select(cm.Instance))\n")
    assert _database_use(tree) == ["1: imports sqlalchemy", "2: imports novella.db.cell_models",
                                   "4: opens session()"]


def test_no_module_holds_sql():
    """The handlers and their helpers call novella/db/ for every read and write."""
    found = {name: _database_use(tree) for name, tree in _modules().items()}
    assert {name: f for name, f in found.items() if f} == {}
