"""The remote consoles' tokens, in the cell database of the server they open.

A compute host ``authorize``s a console: a new random token, of which only
a SHA-256 hash is stored, with where the guest's console listens (TCP host
and port, or a unix socket) and when the token expires. A console proxy
``consume``s it on a client's first connect: the row is deleted as it is
read, so a token opens one connection only, and never once expired. ``show``
reads one without using it (``GET /os-console-auth-tokens/{token}``).
Expired rows go when the next token of their cell is made.
"""
import hashlib
import time
import uuid

import sqlalchemy as sa

from novella.db import cell_models as m
from novella.db import cells as cells_mod
from novella.db.engine import insert_row

_t = m.ConsoleAuthToken
_COLUMNS = (_t.id, _t.console_type, _t.instance_uuid, _t.host, _t.port, _t.unix_socket,
            _t.internal_access_path)
_LIVE = sa.select(*_COLUMNS).where(_t.token_hash == sa.bindparam("token_hash"),
                                   _t.expires > sa.bindparam("now"))
_DELETE_ONE = sa.delete(_t).where(_t.id == sa.bindparam("b_id"))
_DELETE_EXPIRED = sa.delete(_t).where(_t.expires <= sa.bindparam("now"))


def token_hash(token):
    return hashlib.sha256(token.encode()).hexdigest()


def authorize(cell_db, instance_uuid, console_type, address, ttl):
    """A new token for the console at ``address`` (the driver's ``console_address``)
    of the server, valid for ``ttl`` seconds; returns the token."""
    token = str(uuid.uuid4())
    now = int(time.time())
    with cell_db.connection(write=True) as conn:
        conn.execute(_DELETE_EXPIRED, {"now": now})
        insert_row(conn, _t, {
            "token_hash": token_hash(token), "console_type": console_type,
            "instance_uuid": instance_uuid, "host": address.get("host"),
            "port": address.get("port"), "unix_socket": address.get("unix_socket"),
            "internal_access_path": address.get("internal_access_path"),
            "expires": now + ttl})
    return token


def show(cell_db, token):
    """The token's console as a dict (``console_type, instance_uuid, host, port,
    unix_socket, internal_access_path``), or None if unknown or expired."""
    with cell_db.reader() as conn:
        row = conn.execute(_LIVE, {"token_hash": token_hash(token),
                                   "now": int(time.time())}).first()
    return _console(row)


def consume(cell_db, token):
    """As ``show``, the token deleted: of two connects with one token, one gets the
    console, the other None."""
    with cell_db.connection(write=True) as conn:
        row = conn.execute(_LIVE, {"token_hash": token_hash(token),
                                   "now": int(time.time())}).first()
        if row is None or conn.execute(_DELETE_ONE, {"b_id": row.id}).rowcount != 1:
            return None
    return _console(row)


def _console(row):
    if row is None:
        return None
    out = dict(row._mapping)
    del out["id"]
    return out


def find(api_db, token, use=False):
    """The token's console in whichever cell holds it (``show``, or ``consume`` with
    ``use``), or None. A token names no cell, so every cell is asked; a cell that
    cannot be reached has none."""
    lookup = consume if use else show
    results = cells_mod.scatter(cells_mod.list_cells(api_db, include_cell0=False),
                                lambda _cell, db: lookup(db, token))
    return next((r for r in results.values() if r and not isinstance(r, Exception)), None)
