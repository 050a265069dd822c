"""The allocation ledger: every SQL statement of placement lives here.

The database is the authority. Each process keeps a read model of the whole
ledger in memory (providers with inventories, usage, traits, aggregates;
consumers with their allocations; custom resource classes and traits) and
keeps it exact with a ledger-wide version counter: every write transaction
increments the counter first (which also serialises writers on every
backend: a row lock on PostgreSQL/MySQL, BEGIN IMMEDIATE on SQLite), brings
the read model up to date under that lock, validates against it, writes the
rows and records which providers and consumers it touched. Readers compare
the counter with their model's and replay the recorded changes when behind.
"""
import contextlib
import datetime
import threading

import os_resource_classes
import os_traits
import sqlalchemy as sa

from novella.db import placement_models as m
from novella.db.timestamps import utcnow

STANDARD_CLASSES = tuple(os_resource_classes.STANDARDS)
STANDARD_CLASS_SET = frozenset(STANDARD_CLASSES)
_CLASS_RANK = {name: i for i, name in enumerate(STANDARD_CLASSES)}


def class_order(names):
    """Resource class names in catalogue order (standard first, then custom)."""
    return sorted(names, key=lambda n: (_CLASS_RANK.get(n, len(_CLASS_RANK)), n))
STANDARD_TRAITS = frozenset(os_traits.get_traits())
_BOOT = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0, tzinfo=None)
_CHUNK = 500
_KEEP_CHANGES = 2000

# The statements every request or write runs, built once (building a
# statement costs several times more than executing it on SQLite).
_SELECT_VERSION = sa.select(m.ledger.c.version)
_BUMP_VERSION = m.ledger.update().values(version=m.ledger.c.version + 1)
_BUMP_VERSION_RETURNING = _BUMP_VERSION.returning(m.ledger.c.version)
_RECORD_CHANGES = m.changes.insert().values(
    version=sa.bindparam("v"), catalog=sa.bindparam("c"), providers=sa.bindparam("p"),
    consumers=sa.bindparam("u"))
_BUMP_GENERATION = (m.providers.update().where(m.providers.c.id == sa.bindparam("pid"))
                    .values(generation=sa.bindparam("gen"), updated_at=sa.bindparam("now")))
_DELETE_ALLOCATIONS = m.allocations.delete().where(
    m.allocations.c.consumer.in_(sa.bindparam("uuids", expanding=True)))
_DELETE_CONSUMERS = m.consumers.delete().where(
    m.consumers.c.uuid.in_(sa.bindparam("uuids", expanding=True)))
_INSERT_CONSUMERS = m.consumers.insert()
_UPDATE_CONSUMERS = m.consumers.update().where(m.consumers.c.uuid == sa.bindparam("u")).values(
    project_id=sa.bindparam("p"), user_id=sa.bindparam("us"),
    consumer_type=sa.bindparam("ct"), generation=sa.bindparam("g"),
    updated_at=sa.bindparam("now"))
_INSERT_ALLOCATIONS = m.allocations.insert()


class Inventory(tuple):
    """(total, reserved, min_unit, max_unit, step_size, allocation_ratio)."""
    __slots__ = ()
    FIELDS = ("total", "reserved", "min_unit", "max_unit", "step_size", "allocation_ratio")

    def capacity(self):
        return (self[0] - self[1]) * self[5]

    def fits(self, used, amount):
        """Whether ``amount`` more fits (capacity and unit constraints)."""
        return (used + amount <= (self[0] - self[1]) * self[5] and self[2] <= amount
                <= self[3] and amount % self[4] == 0)

    def as_dict(self):
        return dict(zip(self.FIELDS, self))


class Provider:
    __slots__ = ("id", "uuid", "name", "generation", "parent", "root", "children",
                 "inv", "used", "traits", "aggs", "created", "updated", "memo")

    def __init__(self, pid, uuid, name, generation, created, updated):
        self.id, self.uuid, self.name, self.generation = pid, uuid, name, generation
        self.created, self.updated = created, updated
        self.parent = None
        self.root = self
        self.children = []
        self.inv, self.used = {}, {}
        self.traits, self.aggs = set(), set()
        self.memo = None  # (key, rendered summary) for candidate responses

    def descendants(self):
        out, todo = [], [self]
        while todo:
            p = todo.pop()
            out.append(p)
            todo.extend(p.children)
        return out


class Consumer:
    __slots__ = ("uuid", "project", "user", "ctype", "generation", "allocs",
                 "created", "updated")

    def __init__(self, uuid, project, user, ctype, generation, created, updated):
        self.uuid, self.project, self.user, self.ctype = uuid, project, user, ctype
        self.generation, self.created, self.updated = generation, created, updated
        self.allocs = {}  # provider id -> {resource class: used}


class State:
    def __init__(self):
        self.version = None
        self.by_uuid, self.by_id, self.by_name = {}, {}, {}
        self.consumers = {}
        self.custom_classes = {}  # name -> (created, updated)
        self.custom_traits = {}  # name -> created
        # Ids of providers whose inventory, usage, traits, aggregates or tree
        # changed since the candidates fast path last looked (fastpath.Index).
        self.touched = set()
        self.fast_index = None

    def class_exists(self, name):
        return name in STANDARD_CLASS_SET or name in self.custom_classes

    def trait_exists(self, name):
        return name in STANDARD_TRAITS or name in self.custom_traits

    def all_traits(self):
        out = dict.fromkeys(STANDARD_TRAITS, _BOOT)
        out.update(self.custom_traits)
        return out

    def _add_used(self, consumer, sign):
        for pid, res in consumer.allocs.items():
            p = self.by_id.get(pid)
            if p is None:
                continue
            used = p.used
            p.memo = None
            self.touched.add(pid)
            for rc, n in res.items():
                v = used.get(rc, 0) + sign * n
                if v:
                    used[rc] = v
                else:
                    used.pop(rc, None)


def _link(state, p, parent_id, root_id):
    if p.parent is not None and p in p.parent.children:
        p.parent.children.remove(p)
    p.parent = state.by_id.get(parent_id) if parent_id else None
    if p.parent is not None:
        p.parent.children.append(p)


class Ledger:
    def __init__(self, engine):
        self.engine = engine
        self.state = State()
        self.lock = threading.RLock()

    # -- schema / bootstrap -------------------------------------------------
    def ensure_counter(self):
        try:
            with self.engine.begin() as conn:
                if conn.execute(sa.select(m.ledger.c.version)).first() is None:
                    conn.execute(m.ledger.insert().values(id=1, version=0))
        except sa.exc.IntegrityError:
            pass  # another process (a WSGI server's other worker) wrote it first

    # -- transactions ---------------------------------------------------------
    @contextlib.contextmanager
    def read(self):
        """Yield the read model, brought up to date with the database."""
        with self.lock:
            with self.engine.connect() as conn:
                conn.info["begin"] = "BEGIN"
                if conn.dialect.name != "sqlite":
                    # The refresh reads several tables: on a server database,
                    # whose engines read committed, another worker's commit
                    # between two of them would show an inventory before its
                    # provider. One snapshot for the whole refresh.
                    conn.execution_options(isolation_level="REPEATABLE READ")
                with conn.begin():
                    version = conn.execute(_SELECT_VERSION).scalar()
                    if version != self.state.version:
                        self._refresh(conn, version)
            yield self.state

    @contextlib.contextmanager
    def write(self):
        """Yield a Txn holding the ledger's write lock with a fresh model."""
        with self.lock:
            with self.engine.connect() as conn:
                conn.info["begin"] = "BEGIN IMMEDIATE"
                txn = None
                try:
                    with conn.begin():
                        version = self._bump_version(conn)
                        if self.state.version != version - 1:
                            self._refresh(conn, version - 1)
                        txn = Txn(conn, self.state, version)
                        yield txn
                        txn.finish()
                    self.state.version = version
                    self.state.touched.update(txn.providers)
                except BaseException:
                    if txn is not None and txn.dirty:
                        self.state.version = None
                    raise

    @staticmethod
    def _bump_version(conn):
        """Increment the ledger's version; the new one (one statement where the
        database returns what an UPDATE wrote)."""
        if conn.dialect.update_returning:
            return conn.execute(_BUMP_VERSION_RETURNING).scalar()
        conn.execute(_BUMP_VERSION)
        return conn.execute(_SELECT_VERSION).scalar()

    def register_providers(self, providers):
        """``Txn.create_providers`` in one transaction of its own. Returns, for
        each provider given that exists now under its uuid (made here or
        before), ``{uuid: {"generation", "inventories", "traits", "created"}}``:
        a caller registering many hosts learns in the same call which of those
        that existed already hold what it would write."""
        with self.write() as txn:
            created = {p.uuid for p in txn.create_providers(providers)}
            by_uuid = txn.state.by_uuid
            return {p.uuid: {"generation": p.generation, "created": p.uuid in created,
                             "inventories": {rc: inv.as_dict() for rc, inv in p.inv.items()},
                             "traits": sorted(p.traits)}
                    for p in (by_uuid.get(d["uuid"]) for d in providers) if p is not None}

    # -- read model loading ---------------------------------------------------
    def _refresh(self, conn, version):
        st = self.state
        if st.version is not None and version > st.version:
            rows = conn.execute(
                sa.select(m.changes).where(m.changes.c.version > st.version,
                                           m.changes.c.version <= version)).all()
            if len(rows) == version - st.version:
                self._replay(conn, rows)
                st.version = version
                return
        self._full_load(conn)
        self.state.version = version

    def _full_load(self, conn):
        st = State()
        self.state = st
        self._load_catalog(conn, st)
        # Providers in id order: the candidate searches list them in this order.
        for r in conn.execute(sa.select(m.providers).order_by(m.providers.c.id)):
            p = Provider(r.id, r.uuid, r.name, r.generation, r.created_at, r.updated_at)
            st.by_id[r.id] = p
        self._relink(conn, st, None)
        for p in st.by_id.values():
            st.by_uuid[p.uuid] = p
            st.by_name[p.name] = p
        self._load_details(conn, st, None)
        self._load_consumers(conn, st, None)

    @staticmethod
    def _load_catalog(conn, st):
        st.custom_classes = {r.name: (r.created_at, r.updated_at)
                             for r in conn.execute(sa.select(m.resource_classes))}
        st.custom_traits = {r.name: r.created_at for r in conn.execute(sa.select(m.traits))}

    @staticmethod
    def _chunks(ids):
        ids = list(ids)
        for i in range(0, len(ids), _CHUNK):
            yield ids[i:i + _CHUNK]

    def _select(self, conn, table, column, ids):
        if ids is None:
            yield from conn.execute(sa.select(table))
            return
        for chunk in self._chunks(ids):
            yield from conn.execute(sa.select(table).where(column.in_(chunk)))

    def _relink(self, conn, st, ids):
        q = sa.select(m.providers.c.id, m.providers.c.parent_id, m.providers.c.root_id)
        if ids is not None:
            rows = []
            for chunk in self._chunks(ids):
                rows.extend(conn.execute(q.where(m.providers.c.id.in_(chunk))))
        else:
            rows = conn.execute(q)
        for pid, parent_id, root_id in rows:
            p = st.by_id[pid]
            _link(st, p, parent_id, root_id)
            p.root = st.by_id.get(root_id, p)

    def _load_details(self, conn, st, ids):
        by_id = st.by_id
        if ids is not None:
            for pid in ids:
                p = by_id[pid]
                p.inv, p.traits, p.aggs = {}, set(), set()
        intern = {}
        for r in self._select(conn, m.inventories, m.inventories.c.provider_id, ids):
            rc = intern.setdefault(r.resource_class, r.resource_class)
            by_id[r.provider_id].inv[rc] = Inventory(
                (r.total, r.reserved, r.min_unit, r.max_unit, r.step_size,
                 r.allocation_ratio))
        for r in self._select(conn, m.provider_traits, m.provider_traits.c.provider_id, ids):
            by_id[r.provider_id].traits.add(intern.setdefault(r.trait, r.trait))
        for r in self._select(conn, m.provider_aggregates,
                              m.provider_aggregates.c.provider_id, ids):
            by_id[r.provider_id].aggs.add(intern.setdefault(r.aggregate, r.aggregate))

    def _load_consumers(self, conn, st, uuids):
        if uuids is not None:
            for u in uuids:
                c = st.consumers.pop(u, None)
                if c is not None:
                    st._add_used(c, -1)
        loaded = {}
        for r in self._select(conn, m.consumers, m.consumers.c.uuid, uuids):
            loaded[r.uuid] = Consumer(r.uuid, r.project_id, r.user_id, r.consumer_type,
                                      r.generation, r.created_at, r.updated_at)
        intern = {}
        for r in self._select(conn, m.allocations, m.allocations.c.consumer, uuids):
            c = loaded.get(r.consumer)
            if c is not None:
                rc = intern.setdefault(r.resource_class, r.resource_class)
                c.allocs.setdefault(r.provider_id, {})[rc] = r.used
        for c in loaded.values():
            st._add_used(c, 1)
        st.consumers.update(loaded)

    def _replay(self, conn, rows):
        st = self.state
        pids, cuuids, catalog = set(), set(), False
        for r in rows:
            pids.update(int(x) for x in r.providers.split(",") if x)
            cuuids.update(x for x in r.consumers.split(",") if x)
            catalog = catalog or r.catalog
        if catalog:
            self._load_catalog(conn, st)
        if pids:
            present = set()
            for r in sorted(self._select(conn, m.providers, m.providers.c.id, pids),
                            key=lambda r: r.id):
                present.add(r.id)
                p = st.by_id.get(r.id)
                if p is None:
                    p = st.by_id[r.id] = Provider(r.id, r.uuid, r.name, r.generation,
                                                  r.created_at, r.updated_at)
                    st.by_uuid[p.uuid] = p
                else:
                    if st.by_name.get(p.name) is p:
                        del st.by_name[p.name]
                    p.name, p.generation, p.updated = r.name, r.generation, r.updated_at
                st.by_name[p.name] = p
            for pid in pids - present:
                p = st.by_id.pop(pid, None)
                if p is not None:
                    st.by_uuid.pop(p.uuid, None)
                    if st.by_name.get(p.name) is p:
                        del st.by_name[p.name]
                    if p.parent is not None and p in p.parent.children:
                        p.parent.children.remove(p)
            self._relink(conn, st, present)
            self._load_details(conn, st, present)
            st.touched.update(pids)
        if cuuids:
            self._load_consumers(conn, st, cuuids)


class Txn:
    """One write transaction: SQL statements plus the matching model changes."""

    def __init__(self, conn, state, version):
        self.conn, self.state, self.version = conn, state, version
        self.now = utcnow()
        self.dirty = False
        self.providers, self.consumers, self.catalog = set(), set(), False

    def x(self, stmt, params=None):
        self.dirty = True
        return self.conn.execute(stmt, params) if params is not None else self.conn.execute(stmt)

    def finish(self):
        self.conn.execute(_RECORD_CHANGES, {
            "v": self.version, "c": self.catalog,
            "p": ",".join(str(i) for i in self.providers), "u": ",".join(self.consumers)})
        if self.version % 200 == 0:
            self.conn.execute(m.changes.delete().where(
                m.changes.c.version < self.version - _KEEP_CHANGES))

    # -- catalog -------------------------------------------------------------------
    def create_class(self, name):
        self.x(m.resource_classes.insert().values(name=name, created_at=self.now))
        self.state.custom_classes[name] = (self.now, None)
        self.catalog = True

    def delete_class(self, name):
        self.x(m.resource_classes.delete().where(m.resource_classes.c.name == name))
        del self.state.custom_classes[name]
        self.catalog = True

    def create_trait(self, name):
        self.x(m.traits.insert().values(name=name, created_at=self.now))
        self.state.custom_traits[name] = self.now
        self.catalog = True

    def delete_trait(self, name):
        self.x(m.traits.delete().where(m.traits.c.name == name))
        del self.state.custom_traits[name]
        self.catalog = True

    # -- providers -----------------------------------------------------------------
    def _bump(self, providers):
        """Increment the generation of each provider (one statement)."""
        providers = [p for p in providers]
        if not providers:
            return
        self.x(_BUMP_GENERATION,
               [{"pid": p.id, "gen": p.generation + 1, "now": self.now} for p in providers])
        for p in providers:
            p.generation += 1
            p.updated = self.now
            self.providers.add(p.id)

    def create_provider(self, uuid, name, parent):
        st = self.state
        pid = max(st.by_id, default=0) + 1
        root = parent.root if parent else None
        self.x(m.providers.insert().values(
            id=pid, uuid=uuid, name=name, generation=0,
            parent_id=parent.id if parent else None,
            root_id=root.id if root else pid, created_at=self.now, updated_at=self.now))
        p = Provider(pid, uuid, name, 0, self.now, self.now)
        if parent:
            p.parent, p.root = parent, root
            parent.children.append(p)
        st.by_id[pid] = st.by_uuid[uuid] = st.by_name[name] = p
        self.providers.add(pid)
        return p

    def create_providers(self, providers):
        """Create root providers with their inventories and traits, in a few
        statements: ``[{"uuid", "name", "inventories": {rc: {field: value}},
        "traits": [...]}]``. One whose uuid or name is taken is left out.
        Returns the providers created. ValueError (nothing written) for an
        unknown resource class or trait or an inventory placement would refuse."""
        st = self.state
        todo, uuids, names = [], set(), set()
        for d in providers:
            if d["uuid"] in st.by_uuid or d["name"] in st.by_name or \
                    d["uuid"] in uuids or d["name"] in names:
                continue
            uuids.add(d["uuid"])
            names.add(d["name"])
            inv = {}
            for rc, fields in d["inventories"].items():
                if not st.class_exists(rc):
                    raise ValueError(f"No such resource class {rc}.")
                total = fields["total"]
                inv[rc] = Inventory((total, fields.get("reserved", 0), fields.get("min_unit", 1),
                                     fields.get("max_unit", total), fields.get("step_size", 1),
                                     float(fields.get("allocation_ratio", 1.0))))
                if not (0 <= inv[rc][1] <= total and 1 <= inv[rc][2] <= inv[rc][3]
                        and inv[rc][4] >= 1 and inv[rc][5] > 0):
                    raise ValueError(f"Invalid inventory for {rc} on {d['uuid']}.")
            unknown = [t for t in d["traits"] if not st.trait_exists(t)]
            if unknown:
                raise ValueError(f"No such trait(s): {', '.join(sorted(unknown))}.")
            todo.append((d, inv))
        if not todo:
            return []
        pid = max(st.by_id, default=0)
        created, rows, inv_rows, trait_rows = [], [], [], []
        for d, inv in todo:
            pid += 1
            rows.append({"id": pid, "uuid": d["uuid"], "name": d["name"], "generation": 0,
                         "parent_id": None, "root_id": pid, "created_at": self.now,
                         "updated_at": self.now})
            inv_rows += [dict(i.as_dict(), provider_id=pid, resource_class=rc)
                         for rc, i in inv.items()]
            trait_rows += [{"provider_id": pid, "trait": t} for t in set(d["traits"])]
            p = Provider(pid, d["uuid"], d["name"], 0, self.now, self.now)
            p.inv, p.traits = inv, set(d["traits"])
            st.by_id[pid] = st.by_uuid[p.uuid] = st.by_name[p.name] = p
            created.append(p)
        for table, batch in ((m.providers, rows), (m.inventories, inv_rows),
                             (m.provider_traits, trait_rows)):
            for k in range(0, len(batch), _CHUNK):
                self.x(table.insert(), batch[k:k + _CHUNK])
        self._bump(created)  # generation 1: as written by one request after creation
        return created

    def update_provider(self, p, name, parent):
        st = self.state
        values = {"name": name, "updated_at": self.now}
        moved = parent is not p.parent
        if moved:
            values["parent_id"] = parent.id if parent else None
        self.x(m.providers.update().where(m.providers.c.id == p.id).values(**values))
        if st.by_name.get(p.name) is p:
            del st.by_name[p.name]
        p.name, p.updated = name, self.now
        st.by_name[name] = p
        self.providers.add(p.id)
        if moved:
            if p.parent is not None:
                p.parent.children.remove(p)
            p.parent = parent
            if parent is not None:
                parent.children.append(p)
            new_root = parent.root if parent else p
            tree = p.descendants()
            for q in tree:
                q.root = new_root
                self.providers.add(q.id)
            self.x(m.providers.update().where(m.providers.c.id.in_([q.id for q in tree]))
                   .values(root_id=new_root.id))

    def delete_provider(self, p):
        st = self.state
        for table in (m.inventories, m.provider_traits, m.provider_aggregates):
            self.x(table.delete().where(table.c.provider_id == p.id))
        self.x(m.providers.delete().where(m.providers.c.id == p.id))
        del st.by_id[p.id], st.by_uuid[p.uuid]
        if st.by_name.get(p.name) is p:
            del st.by_name[p.name]
        if p.parent is not None:
            p.parent.children.remove(p)
        self.providers.add(p.id)

    def set_inventories(self, p, inventories, bump=True):
        """Replace the provider's inventory with ``{rc: Inventory}``."""
        old = p.inv
        gone = [rc for rc in old if rc not in inventories]
        if gone:
            self.x(m.inventories.delete().where(m.inventories.c.provider_id == p.id,
                                                m.inventories.c.resource_class.in_(gone)))
        changed = [(rc, inv) for rc, inv in inventories.items() if old.get(rc) != inv]
        upd = [(rc, inv) for rc, inv in changed if rc in old]
        new = [(rc, inv) for rc, inv in changed if rc not in old]
        if upd:
            t = m.inventories
            self.x(t.update().where(t.c.provider_id == p.id,
                                    t.c.resource_class == sa.bindparam("rc"))
                   .values({f: sa.bindparam("v_" + f) for f in Inventory.FIELDS}),
                   [dict({"rc": rc}, **{"v_" + k: v for k, v in inv.as_dict().items()})
                    for rc, inv in upd])
        if new:
            self.x(m.inventories.insert(),
                   [dict(inv.as_dict(), provider_id=p.id, resource_class=rc)
                    for rc, inv in new])
        p.inv = dict(inventories)
        if bump:
            self._bump([p])
        else:
            self.providers.add(p.id)

    def set_traits(self, p, traits):
        t = m.provider_traits
        gone, new = p.traits - traits, traits - p.traits
        if gone:
            self.x(t.delete().where(t.c.provider_id == p.id, t.c.trait.in_(list(gone))))
        if new:
            self.x(t.insert(), [{"provider_id": p.id, "trait": n} for n in new])
        p.traits = set(traits)
        self._bump([p])

    def set_aggregates(self, p, aggs, bump=True):
        t = m.provider_aggregates
        gone, new = p.aggs - aggs, aggs - p.aggs
        if gone:
            self.x(t.delete().where(t.c.provider_id == p.id, t.c.aggregate.in_(list(gone))))
        if new:
            self.x(t.insert(), [{"provider_id": p.id, "aggregate": a} for a in new])
        p.aggs = set(aggs)
        if bump:
            self._bump([p])
        else:
            self.providers.add(p.id)

    # -- consumers and allocations -------------------------------------------------
    def replace_allocations(self, requests, bump_providers):
        """Write the allocations of several consumers at once.

        ``requests`` is a list of (uuid, project, user, ctype, {pid: {rc: n}})
        whose consumer generations and capacities were already checked. A
        consumer left with no allocation is deleted. ``bump_providers`` are
        the providers whose generation moves.
        """
        st = self.state
        uuids = [r[0] for r in requests]
        existing = [u for u in uuids if u in st.consumers]
        if existing:
            self.x(_DELETE_ALLOCATIONS, {"uuids": existing})
        rows, upd, ins, dele = [], [], [], []
        for uuid, project, user, ctype, allocs in requests:
            c = st.consumers.get(uuid)
            if c is not None:
                st._add_used(c, -1)
            for pid, res in allocs.items():
                for rc, n in res.items():
                    rows.append({"consumer": uuid, "provider_id": pid,
                                 "resource_class": rc, "used": n, "created_at": self.now})
            self.consumers.add(uuid)
            if not allocs:
                if c is not None:
                    dele.append(uuid)
                    del st.consumers[uuid]
                continue
            if c is None:
                c = st.consumers[uuid] = Consumer(uuid, project, user, ctype, 1,
                                                  self.now, self.now)
                ins.append({"uuid": uuid, "project_id": project, "user_id": user,
                            "consumer_type": ctype, "generation": 1,
                            "created_at": self.now, "updated_at": self.now})
            else:
                c.project, c.user, c.generation, c.updated = project, user, c.generation + 1, self.now
                if ctype is not None:
                    c.ctype = ctype
                upd.append({"u": uuid, "p": project, "us": user, "ct": c.ctype,
                            "g": c.generation, "now": self.now})
            c.allocs = allocs
            st._add_used(c, 1)
        if dele:
            self.x(_DELETE_CONSUMERS, {"uuids": dele})
        if ins:
            self.x(_INSERT_CONSUMERS, ins)
        if upd:
            self.x(_UPDATE_CONSUMERS, upd)
        if rows:
            self.x(_INSERT_ALLOCATIONS, rows)
        self._bump(bump_providers)
