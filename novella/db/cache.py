"""Values read from a database and kept until the rows behind them change.

A ``TokenCache`` pairs a cheap *token* query (counts, largest ids, latest
``updated_at``) with the expensive load it stands for. Each ``get`` runs the
token query; the load runs again only when the token differs from the one
seen at the last load. Every process reads the token from the database
itself, so a change made by another process (another API worker, a
``novella manage`` command) is seen at the next ``get``, never missed.

The token is read before the load: a change landing between the two leaves
an older token beside newer data, so the next ``get`` loads again. Values
are shared between threads and must be treated as read-only.
"""
import threading
import weakref

import sqlalchemy as sa


def token_of(*tables_and_columns):
    """A select of one row: for each ``(table, [aggregate expressions])``, those aggregates.

    ``token_of((services, [count(), max(updated_at)]), ...)`` becomes one
    statement of scalar subqueries, one round trip.
    """
    cols = []
    for table, exprs in tables_and_columns:
        cols += [sa.select(e).select_from(table).scalar_subquery() for e in exprs]
    return sa.select(*cols)


class TokenCache:
    def __init__(self, token_query, load):
        self._token_query = token_query
        self._load = load           # load(db) -> value
        # engine -> (token, value): keyed by engine, not URL, since two
        # in-memory SQLite databases share one URL.
        self._entries = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def get(self, db):
        with db.reader() as conn:
            token = tuple(conn.execute(self._token_query).one())
        return self._value(db, token)

    def _value(self, db, token):
        """The value for ``token``, just read: the one kept, or loaded again."""
        entry = self._entries.get(db.engine)
        if entry is not None and entry[0] == token:
            return entry[1]
        value = self._load(db)
        with self._lock:
            self._entries[db.engine] = (token, value)
        return value


def get_together(db, *caches):
    """``[cache.get(db) for cache in caches]``, every token read in one statement
    (caches of one database wanted together, such as the scheduler's cells and
    aggregates)."""
    columns = [list(cache._token_query.selected_columns) for cache in caches]
    with db.reader() as conn:
        row = tuple(conn.execute(sa.select(*(c for cols in columns for c in cols))).one())
    values, start = [], 0
    for cache, cols in zip(caches, columns):
        values.append(cache._value(db, row[start:start + len(cols)]))
        start += len(cols)
    return values
