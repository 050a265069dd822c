"""Values cached until the rows behind them change (novella/db/cache.py), alone and
with their tokens read together in one statement."""
import sqlalchemy as sa

from novella.db import cache
from novella.db.engine import Database

META = sa.MetaData()
A = sa.Table("a", META, sa.Column("id", sa.Integer, primary_key=True), sa.Column("v", sa.String))
B = sa.Table("b", META, sa.Column("id", sa.Integer, primary_key=True), sa.Column("v", sa.String))


def _cache_of(table, loads):
    def load(db):
        loads.append(table.name)
        with db.reader() as conn:
            return sorted(v for (v,) in conn.execute(sa.select(table.c.v)))
    return cache.TokenCache(cache.token_of((table, [sa.func.count(), sa.func.max(table.c.id)])),
                            load)


def test_tokens_read_together_load_again_only_what_changed(tmp_path):
    db = Database(f"sqlite:///{tmp_path}/t.db")
    META.create_all(db.engine)
    loads, statements = [], []
    a, b = _cache_of(A, loads), _cache_of(B, loads)
    with db.connection(write=True) as conn:
        conn.execute(sa.insert(A), [{"v": "a1"}])
        conn.execute(sa.insert(B), [{"v": "b1"}])
    assert cache.get_together(db, a, b) == [["a1"], ["b1"]] and loads == ["a", "b"]

    sa.event.listen(db.engine, "before_cursor_execute",
                    lambda *args: statements.append(args[2]))
    assert cache.get_together(db, a, b) == [["a1"], ["b1"]]
    assert loads == ["a", "b"] and len(statements) == 1  # both tokens, one statement

    with db.connection(write=True) as conn:
        conn.execute(sa.insert(B), [{"v": "b2"}])
    assert cache.get_together(db, a, b) == [["a1"], ["b1", "b2"]]
    assert loads == ["a", "b", "b"]
    assert b.get(db) == ["b1", "b2"] and a.get(db) == ["a1"]  # alone, the same values
    assert loads == ["a", "b", "b"]
