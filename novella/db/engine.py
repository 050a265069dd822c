"""Engines and sessions for Novella's databases (API, cells, placement).

One place decides how a connection URL becomes an engine, so SQLite,
PostgreSQL and MySQL/MariaDB behave alike for every service.
"""
import contextlib
import threading
import weakref

import sqlalchemy as sa
from sqlalchemy import event, orm

_engines = {}
_lock = threading.Lock()

SQLITE_BUSY_TIMEOUT = 30  # seconds a writer waits for another's commit


def _sqlite_pragmas(dbapi_conn, _record):
    cur = dbapi_conn.cursor()
    # WAL lets readers proceed while one writer commits; busy_timeout makes
    # concurrent writers queue instead of failing with "database is locked".
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT * 1000}")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


def normalise_url(url):
    """Accept the URL spellings oslo.db users write in nova.conf."""
    if url.startswith("mysql://"):
        url = "mysql+pymysql://" + url[len("mysql://"):]
    if url.startswith("postgres://"):
        url = "postgresql://" + url[len("postgres://"):]
    return url


def get_engine(url):
    """Return the process-wide engine for a URL (created once)."""
    url = normalise_url(url)
    with _lock:
        engine = _engines.get(url)
        if engine is None:
            engine = _create_engine(url)
            _engines[url] = engine
        return engine


# engine -> the lock its writers in this process take (SQLite only; see Database.connection)
_sqlite_writers = weakref.WeakKeyDictionary()


def _create_engine(url):
    if url.startswith("sqlite"):
        kwargs = {"connect_args": {"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT}}
        if url in ("sqlite://", "sqlite:///:memory:"):
            kwargs["poolclass"] = sa.pool.StaticPool
        engine = sa.create_engine(url, **kwargs)
        _sqlite_writers[engine] = threading.RLock()
        event.listen(engine, "connect", _sqlite_pragmas)
        # pysqlite's own transaction handling defers BEGIN; issue it ourselves
        # so a read-then-write transaction holds its snapshot.
        @event.listens_for(engine, "connect")
        def _no_autobegin(dbapi_conn, _rec):
            dbapi_conn.isolation_level = None

        @event.listens_for(engine, "checkout")
        def _plain_begin(_dbapi_conn, record, _proxy):
            # info outlives a checkout: whoever asks for no or another BEGIN says so again.
            record.info["begin"] = "BEGIN"

        @event.listens_for(engine, "begin")
        def _begin(conn):
            # Straight to the driver: BEGIN through exec_driver_sql cost as much
            # as a whole statement's round of SQLAlchemy bookkeeping.
            statement = conn.info.get("begin", "BEGIN")
            if statement:  # None: a reader, outside any transaction
                conn.connection.driver_connection.execute(statement)
        return engine
    kwargs = {"pool_pre_ping": True, "pool_size": 10, "max_overflow": 20}
    if url.startswith("mysql"):
        kwargs["isolation_level"] = "READ COMMITTED"
    return sa.create_engine(url, **kwargs)


_INSERTS = {}  # table -> its INSERT, built once


def _insert_of(model):
    q = _INSERTS.get(model)
    if q is None:
        q = _INSERTS[model] = getattr(model, "__table__", model).insert()
    return q


def insert_row(conn, model, values):
    """INSERT one row of ``model`` (a mapped class or a table) by Core; returns its key.

    The statement is built once per table and its values go as parameters:
    building and keying a new statement per row cost about as much as
    running it. (Core, not the ORM: these rows need no unit of work.)
    """
    return conn.execute(_insert_of(model), values).inserted_primary_key[0]


def insert_rows(conn, model, rows):
    """``insert_row`` for a list of rows (each with the same columns)."""
    if rows:
        conn.execute(_insert_of(model), rows)


def release_connections():
    """Close every pooled connection, keeping the engines (before a fork: a
    child must open connections of its own)."""
    with _lock:
        for engine in _engines.values():
            engine.dispose()


def dispose_under(prefix):
    """Close and forget the engines whose URL starts with ``prefix`` (a stopped
    all-in-one's databases: each engine keeps a connection to its file open)."""
    with _lock:
        for url in [u for u in _engines if u.startswith(prefix)]:
            _engines.pop(url).dispose()


def dispose_all():
    with _lock:
        for engine in _engines.values():
            engine.dispose()
        _engines.clear()


class Database:
    """A database reached through one URL, with ORM sessions.

    ``with db.session() as s:`` opens a transaction that commits on success and
    rolls back on any exception, so a failure half-way writes nothing.
    """

    def __init__(self, url):
        self.url = normalise_url(url)
        self.engine = get_engine(self.url)

    @contextlib.contextmanager
    def connection(self, write=False):
        """A Core connection in one transaction (commit on success).

        ``write=True`` takes SQLite's write lock at BEGIN, so two writers
        queue instead of failing when the second upgrades its read lock.
        Writers of one process also queue on a lock of their own first:
        SQLite's busy handler retries by sleeping (1 ms, 2 ms, 5 ms, ...), so
        a writer finding the database locked would sleep long after the
        other's commit; the lock hands over the moment it is released.
        """
        lock = _sqlite_writers.get(self.engine) if write else None
        if lock is None:
            with self._connection(write) as conn:
                yield conn
            return
        # As long as SQLite's own busy_timeout, and failing as it would.
        if not lock.acquire(timeout=SQLITE_BUSY_TIMEOUT):
            raise sa.exc.OperationalError("BEGIN IMMEDIATE", None, Exception("database is locked"))
        try:
            with self._connection(write) as conn:
                yield conn
        finally:
            lock.release()

    @contextlib.contextmanager
    def _connection(self, write):
        with self.engine.connect() as conn:
            conn.info["begin"] = "BEGIN IMMEDIATE" if write else "BEGIN"
            with conn.begin():
                yield conn

    @contextlib.contextmanager
    def reader(self):
        """A connection for reads that need no snapshot across statements.

        On SQLite no BEGIN and COMMIT: each statement runs on its own, which
        saves two driver calls and a round of transaction bookkeeping per
        read. Elsewhere the driver's implicit transaction ends at release.
        """
        with self.engine.connect() as conn:
            conn.info["begin"] = None
            yield conn

    @contextlib.contextmanager
    def read_session(self):
        """An ORM session over ``reader()``: for loading rows, never for writing."""
        with self.reader() as conn, orm.Session(bind=conn, expire_on_commit=False) as s:
            yield s

    @contextlib.contextmanager
    def session(self, write=False):
        """An ORM session in one transaction (commit on success)."""
        with self.connection(write) as conn:
            with orm.Session(bind=conn, expire_on_commit=False) as s:
                yield s
                s.flush()
