"""What a non-editable install ships: every file of the novella package, the
Alembic migration scripts and their templates included, and Alembic finds
the scripts there.

The package's content is what setuptools' ``build_py`` puts in the build
directory: a wheel is that directory zipped with its metadata. This
environment has no ``wheel`` package and setuptools 65 has no
``bdist_wheel`` of its own, so the test runs ``build_py`` (in a copy of the
sources, leaving the working tree untouched) rather than ``pip wheel``.
"""
import ast
import importlib.metadata
import pathlib
import re
import shutil
import subprocess
import sys
import tomllib

from packaging.requirements import Requirement

from novella.db import migrate

ROOT = pathlib.Path(__file__).resolve().parents[2]

# Run from the built package: replay every schema's revisions with Alembic.
_REPLAY = """
import sys
import sqlalchemy as sa
from alembic import command
import novella
from novella.db import migrate
assert novella.__file__.startswith(sys.argv[1]), novella.__file__
for name in sorted(migrate.MODELS):
    engine = sa.create_engine(f"sqlite:///{sys.argv[2]}/{name}.db")
    with engine.begin() as conn:
        command.upgrade(migrate._config(name, conn), "head")
    with engine.connect() as conn:
        print(name, migrate.current(conn, name), len(sa.inspect(conn).get_table_names()))
"""


def _files(top):
    return {p.relative_to(top).as_posix() for p in top.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
            and not any(part.startswith(".") for part in p.relative_to(top).parts)}


def test_build_ships_every_file_and_the_migrations_run_from_it(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "novella", src / "novella",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".*"))
    out = tmp_path / "build"
    subprocess.run([sys.executable, "-c", "from setuptools import setup; setup()",
                    "-q", "build_py", "--build-lib", str(out)],
                   cwd=src, check=True, capture_output=True, timeout=120)

    shipped = _files(out / "novella")
    assert shipped == _files(src / "novella")
    for name in migrate.MODELS:
        scripts = {f"db/migrations/{name}/env.py", f"db/migrations/{name}/script.py.mako"}
        scripts |= {f"db/migrations/{name}/versions/{p.name}"
                    for p in (src / "novella/db/migrations" / name / "versions").glob("0*.py")}
        assert len(scripts) > 2 and scripts <= shipped, name

    dbs = tmp_path / "dbs"
    dbs.mkdir()
    ran = subprocess.run([sys.executable, "-c", _REPLAY, str(out), str(dbs)],
                         env={"PYTHONPATH": str(out), "PATH": "/usr/bin:/bin"}, cwd=tmp_path,
                         check=True, capture_output=True, text=True, timeout=120)
    heads = {line.split()[0]: line.split()[1] for line in ran.stdout.splitlines()}
    assert heads == {name: migrate.head(name) for name in migrate.MODELS}
    tables = {line.split()[0]: int(line.split()[2]) for line in ran.stdout.splitlines()}
    # Every table of the models, and the version table.
    assert tables == {name: len(migrate.metadata(name).tables) + 1 for name in migrate.MODELS}


# Declared, and needed, though no module of the package imports them:
# SQLAlchemy loads the database drivers named by the connection URLs.
USED_WITHOUT_IMPORT = {"psycopg2-binary", "pymysql"}


def _canonical(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return {_canonical(Requirement(dep).name) for dep in project["dependencies"]}


def _third_party_imports():
    """{top-level module: [files importing it]} of every import under novella/,
    those inside functions included."""
    found = {}
    for path in sorted((ROOT / "novella").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top != "novella" and top not in sys.stdlib_module_names:
                    found.setdefault(top, []).append(str(path.relative_to(ROOT)))
    return found


def test_every_third_party_import_is_a_declared_dependency():
    """A plain `pip install .` brings every package novella/ imports, and
    nothing declared goes unused."""
    declared = _declared()
    distributions = importlib.metadata.packages_distributions()
    imported, undeclared = set(), {}
    for top, files in _third_party_imports().items():
        dists = {_canonical(d) for d in distributions.get(top, [top])}
        imported |= dists
        if not dists & declared:
            undeclared[top] = sorted(set(files))
    assert undeclared == {}
    assert declared - imported == USED_WITHOUT_IMPORT


def _install_closure(names):
    """Every distribution a plain install of ``names`` brings (no extras)."""
    todo, seen = list(names), set()
    while todo:
        name = _canonical(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for text in requires:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return seen


# Imports every module of the package, and builds the services' option
# registries, with every module outside a plain install's closure hidden.
_IMPORT_ALL = """
import importlib, importlib.abc, pkgutil, sys
allowed = set(sys.argv[1].split(","))
owners = {top: {d.lower().replace("_", "-").replace(".", "-") for d in dists}
          for top, dists in __import__("importlib.metadata").metadata.packages_distributions().items()}

class Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        top = name.split(".")[0]
        if top in owners and not owners[top] & allowed and top != "novella":
            raise ModuleNotFoundError(f"{name} is not in a plain install", name=name)
        return None

sys.meta_path.insert(0, Hide())
import novella
count = 0
for mod in pkgutil.walk_packages(novella.__path__, "novella."):
    if ".migrations." in mod.name or mod.name.startswith("novella.wsgi."):
        continue  # Alembic scripts; the WSGI modules read a configuration on import
    importlib.import_module(mod.name)
    count += 1
from novella.conf import opts
from novella.placement import conf
print(count, len(opts.list_opts()), len(conf.list_opts()))
"""


def test_every_module_imports_with_only_the_install_dependencies():
    allowed = _install_closure(_declared()) | {"novella"}
    assert {"gunicorn", "oslo-middleware", "webob"} <= allowed
    assert not {"gabbi", "wsgi-intercept", "openstack-placement", "nova", "pytest"} & allowed
    ran = subprocess.run([sys.executable, "-c", _IMPORT_ALL, ",".join(sorted(allowed))],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr[-3000:]
    modules, nova_groups, placement_groups = map(int, ran.stdout.split())
    assert modules > 100 and nova_groups > 10 and placement_groups >= 3
