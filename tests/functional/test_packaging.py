"""What a non-editable install ships: every file of the novella package, the
Alembic migration scripts and their templates included, and Alembic finds
the scripts there.

The package's content is what setuptools' ``build_py`` puts in the build
directory: a wheel is that directory zipped with its metadata. This
environment has no ``wheel`` package and setuptools 65 has no
``bdist_wheel`` of its own, so the test runs ``build_py`` (in a copy of the
sources, leaving the working tree untouched) rather than ``pip wheel``.
"""
import pathlib
import shutil
import subprocess
import sys

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
