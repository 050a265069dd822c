"""SIGKILL in the middle of a move, with real processes; the books must stay exact.

- `novella up` (the all-in-one, SQLite files in its data directory) is
  killed with SIGKILL while a resize copies the server's disks, once inside
  a cell and once across cells, then started again on the same data
  directory: as it starts it takes over what its previous run left.
- Two `novella serve conductor` processes over PostgreSQL and RabbitMQ (every
  other service in a process of its own too, tests/e2e/processes.py): the
  one owning a cross-cell resize is killed with SIGKILL and the other must
  finish or undo the move within two lease periods.

"Mid" is real: the API database's ``operations`` row must show the disk
copy's step started, and the simulated host must be in the copy
(``[simulated] resize_disk_copy_seconds``), before the kill. Afterwards:
the server is stable (VERIFY_RESIZE if the move was finished forward,
ACTIVE on its source with the migration ``error`` if it was undone), the
operation and migration statuses are final, Placement's allocations by
consumer (server and migration) and every provider's usage agree with that
state, the guest files are where the server is and nowhere else, and
deleting the server brings every provider's usage to zero.

The measured times are printed and reported as warnings (docs/recovery.md).
"""
import json
import os
import signal
import subprocess
import sys
import time
import warnings

import pytest
import requests
import sqlalchemy as sa

from novella.conductor import operations
from novella.conductor.tasks import cross_cell as cross_cell_tasks
from novella.conductor.tasks import resize as resize_tasks
from novella.db import api_models as am
from novella.db import cell_models as cm
from novella.db.timestamps import utcnow
from tests.e2e import processes
from tests.e2e.processes import ADMIN

N_PORTS = 9            # identity, compute, ... optimize, novncproxy, serialproxy
COPY_SECONDS = 3.0     # [simulated] resize_disk_copy_seconds: the window the kill lands in
LEASE = 2              # [conductor] operation_lease of the two-conductor test
HEADERS_274 = {"OpenStack-API-Version": "compute 2.74"}
HEADERS_259 = {"OpenStack-API-Version": "compute 2.59"}
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# -- reading the books ------------------------------------------------------------------

def _operation(api_db_url, sid):
    """(kind, status, steps, owner, updated_at) of the server's newest operation, or None."""
    engine = sa.create_engine(api_db_url)
    try:
        with engine.connect() as conn:
            row = conn.execute(sa.select(am.Operation.kind, am.Operation.status,
                                         am.Operation.steps, am.Operation.owner,
                                         am.Operation.updated_at)
                               .where(am.Operation.instance_uuid == sid)
                               .order_by(am.Operation.id.desc()).limit(1)).first()
    finally:
        engine.dispose()
    return None if row is None else (row.kind, row.status, json.loads(row.steps), row.owner,
                                     row.updated_at)


def _step_started(api_db_url, sid, step):
    op = _operation(api_db_url, sid)
    return op is not None and op[1] == "running" and [step, "started"] in op[2] and op


class Books:
    """The Compute and Placement APIs as an admin client reads them."""

    def __init__(self, api, placement, headers, placement_token):
        self.api, self.placement = api, placement
        self.headers, self.token = headers, placement_token

    def server(self, sid):
        r = requests.get(f"{self.api}/servers/{sid}", headers=self.headers)
        return r.json()["server"] if r.status_code == 200 else r.status_code

    def status(self, sid):
        s = self.server(sid)
        return s["status"] if isinstance(s, dict) else s

    def migration(self, sid):
        (m,) = requests.get(f"{self.api}/os-migrations?instance_uuid={sid}",
                            headers=dict(self.headers, **HEADERS_259)).json()["migrations"]
        return m

    def allocations(self, consumer):
        return processes.allocations(self.placement, consumer, self.token)

    def usages(self):
        return processes.usages(self.placement, self.token)

    def providers(self):
        return processes.providers(self.placement, self.token)


def _check_books(books, sid, op, source_host, source_alloc, new_ram, guests=None):
    """The books agree with the move's end (forward or back); returns 'forward' or 'back'.

    ``source_alloc``: {provider uuid: resources} the server held before the
    move; ``guests``: a function host -> whether that host keeps guest files
    of the server (the simulated hosts' directories), or None.
    """
    kind, op_status, steps = op[:3]
    assert op_status in ("done", "undone", "failed"), op
    server = books.server(sid)
    migration = books.migration(sid)
    host = server["OS-EXT-SRV-ATTR:host"]
    (source_rp,) = source_alloc
    names = books.providers()
    if op_status == "done":
        direction = "forward"
        assert (server["status"], server["OS-EXT-STS:task_state"]) == ("VERIFY_RESIZE", None)
        assert host != source_host and migration["status"] == "finished"
        assert server["flavor"]["ram"] == new_ram
        assert books.allocations(migration["uuid"]) == source_alloc
        (dest_rp, dest_alloc), = books.allocations(sid).items()
        assert dest_rp != source_rp and names[dest_rp] == host
        assert dest_alloc["MEMORY_MB"] == new_ram
        expected = {source_rp: source_alloc[source_rp], dest_rp: dest_alloc}
    else:
        direction = "back"
        assert (server["status"], server["OS-EXT-STS:task_state"]) == ("ACTIVE", None)
        assert host == source_host and migration["status"] == "error", (host, migration)
        assert server["flavor"]["ram"] != new_ram
        assert books.allocations(sid) == source_alloc
        assert books.allocations(migration["uuid"]) == {}
        expected = dict(source_alloc)
    # Every provider's usage is exactly what those consumers hold, nothing more.
    usages = books.usages()
    for rp_uuid, name in names.items():
        want = expected.get(rp_uuid, {})
        got = {rc: v for rc, v in usages[name].items() if v}
        assert got == want, (name, got, want, kind, steps)
    if guests is not None:
        holders = guests()
        want_holders = {host, source_host} if direction == "forward" else {source_host}
        assert holders == want_holders, (holders, want_holders)
    return direction


def _check_cells(api_db_url, cell_urls, sid, host, network_url, image_url, headers):
    """The server's rows, mapping, port and images agree with where it is now.

    ``cell_urls``: {cell name: database URL}; the cell whose shown (not
    hidden) row names ``host`` must be the one the instance mapping names; a
    copy elsewhere may only be a hidden one (a finished cross-cell move).
    """
    rows = {}
    for name, url in cell_urls.items():
        engine = sa.create_engine(url)
        try:
            with engine.connect() as conn:
                rows[name] = [tuple(r) for r in conn.execute(
                    sa.select(cm.Instance.hidden, cm.Instance.host, cm.Instance.task_state)
                    .where(cm.Instance.uuid == sid, cm.Instance.deleted == 0))]
        finally:
            engine.dispose()
    shown = [name for name, found in rows.items() if found and not found[0][0]]
    assert len(shown) == 1 and rows[shown[0]] == [(False, host, None)], rows
    assert all(not found or (len(found) == 1 and found[0][0] and found[0][2] is None)
               for name, found in rows.items() if name != shown[0]), rows
    engine = sa.create_engine(api_db_url)
    try:
        with engine.connect() as conn:
            mapped = conn.execute(sa.select(am.CellMapping.name).join(
                am.InstanceMapping, am.InstanceMapping.cell_id == am.CellMapping.id)
                .where(am.InstanceMapping.instance_uuid == sid)).scalar_one()
    finally:
        engine.dispose()
    assert mapped == shown[0], (mapped, rows)
    ports = requests.get(f"{network_url}/v2.0/ports?device_id={sid}",
                         headers=headers).json()["ports"]
    assert [p["binding:host_id"] for p in ports] == [host], ports
    images = requests.get(f"{image_url}/v2/images", headers=headers).json()["images"]
    assert [i["name"] for i in images if i["name"].endswith("-resize-temp")] == [], images


def _delete_and_zero(books, sid):
    assert requests.delete(f"{books.api}/servers/{sid}", headers=books.headers).status_code == 204
    processes.wait("server gone", lambda: books.status(sid) == 404)
    processes.wait("usages back to zero",
                   lambda: processes.all_zero(books.placement, books.token))


def _report(what, seconds, detail):
    line = f"{what}: {seconds:.2f} s ({detail})"
    print(line)
    warnings.warn(line, stacklevel=2)


# -- `novella up` killed and started again ----------------------------------------------



class AllInOne:
    """`novella up` runs on one data directory, started and killed as an operator would."""

    def __init__(self, data_dir, conf_file):
        self.data_dir = data_dir
        self.conf_file = conf_file
        self.port_base = processes.free_port_base(N_PORTS)
        self.proc = None
        self.runs = 0
        self.log_path = None

    def url(self, offset):
        return f"http://127.0.0.1:{self.port_base + offset}"

    def db_url(self, name):
        return f"sqlite:///{os.path.join(self.data_dir, name)}.db"

    @property
    def api_db(self):
        return self.db_url("api")

    def start(self):
        """Start `novella up`; returns the seconds until it serves."""
        self.runs += 1
        self.log_path = os.path.join(os.path.dirname(self.data_dir),
                                     f"novella-up-{self.runs}.log")
        log = open(self.log_path, "w")
        t0 = time.monotonic()
        self.started_at = utcnow()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "novella.cmd.main", "up", "--data-dir", self.data_dir,
             "--port-base", str(self.port_base), "--host", "127.0.0.1",
             "--config-file", self.conf_file],
            stdout=log, stderr=subprocess.STDOUT, cwd=REPO,
            env=dict(os.environ, PYTHONUNBUFFERED="1"))

        def ready():
            if self.proc.poll() is not None:
                raise AssertionError(f"novella up exited: {self.log()[-3000:]}")
            return "Novella is up." in self.log()
        processes.wait("novella up", ready, interval=0.1)
        elapsed = time.monotonic() - t0
        self._login()
        return elapsed

    def log(self):
        with open(self.log_path) as f:
            return f.read()

    def _login(self):
        with open(os.path.join(self.data_dir, "passwords.json")) as f:
            password = json.load(f)["admin"]
        domain = {"name": "Default"}
        r = requests.post(f"{self.url(0)}/v3/auth/tokens", json={"auth": {
            "identity": {"methods": ["password"], "password": {"user": {
                "name": "admin", "domain": domain, "password": password}}},
            "scope": {"project": {"name": "admin", "domain": domain}}}})
        assert r.status_code == 201, r.text
        token = r.headers["X-Subject-Token"]
        self.books = Books(f"{self.url(1)}/v2.1", self.url(2),
                           dict(ADMIN, **{"X-Auth-Token": token}), token)

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        assert self.proc.wait(timeout=10) == -signal.SIGKILL

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def guest_hosts(self, sid):
        """The simulated hosts holding files of the server (its directory, or one set aside)."""
        root = os.path.join(self.data_dir, "instances")
        return {host for host in os.listdir(root)
                if os.path.isdir(os.path.join(root, host)) and any(
                    entry.startswith(sid) for entry in os.listdir(os.path.join(root, host)))}


@pytest.fixture
def all_in_one(tmp_path, request):
    clouds = []
    failed_before = request.session.testsfailed

    def make(cross_cell):
        conf = tmp_path / "novella.conf"
        text = f"[simulated]\nresize_disk_copy_seconds = {COPY_SECONDS}\n"
        if cross_cell:
            # Cross-cell moves allowed for admins and preferred (a negative
            # weight drains the source cell), so the resize leaves cell1.
            (tmp_path / "policy.yaml").write_text(
                '"compute:servers:resize:cross_cell": "rule:admin_api"\n')
            text += (f"[oslo_policy]\npolicy_file = {tmp_path / 'policy.yaml'}\n"
                     "[filter_scheduler]\ncross_cell_move_weight_multiplier = -1000000\n")
        conf.write_text(text)
        cloud = AllInOne(str(tmp_path / "data"), str(conf))
        clouds.append(cloud)
        return cloud

    yield make
    for cloud in clouds:
        cloud.stop()
        if request.session.testsfailed > failed_before and cloud.log_path:
            sys.stderr.write(f"--- {cloud.log_path} (tail) ---\n{cloud.log()[-2000:]}\n")


def _boot(books, image_url, host):
    images = requests.get(f"{image_url}/v2/images", headers=books.headers).json()["images"]
    image = next(i for i in images if i["name"] == "cirros")
    r = requests.post(f"{books.api}/servers", headers=dict(books.headers, **HEADERS_274), json={
        "server": {"name": "mover", "flavorRef": "1", "imageRef": image["id"],
                   "networks": "auto", "host": host}})
    assert r.status_code == 202, r.text
    sid = r.json()["server"]["id"]
    processes.wait("ACTIVE", lambda: books.status(sid) == "ACTIVE")
    return sid


# The step that copies the disks, of a resize in a cell and across cells.
COPY_STEP = {False: resize_tasks.ResizeInstance.__name__,
             True: cross_cell_tasks.PrepResizeAtSourceTask.__name__}


@pytest.mark.parametrize("cross_cell,step", sorted(COPY_STEP.items()),
                         ids=["in-cell", "cross-cell"])
def test_sigkill_novella_up_mid_resize(all_in_one, cross_cell, step):
    cloud = all_in_one(cross_cell)
    cloud.start()
    books = cloud.books
    source = "cell1-host1"
    sid = _boot(books, cloud.url(3), source)
    source_alloc = books.allocations(sid)
    assert len(source_alloc) == 1

    r = requests.post(f"{books.api}/servers/{sid}/action", headers=books.headers,
                      json={"resize": {"flavorRef": "2"}})           # m1.tiny -> m1.small
    assert r.status_code == 202, r.text
    kind = processes.wait(
        f"{step} started", lambda: _step_started(cloud.api_db, sid, step), interval=0.02)[0]
    assert kind == (operations.CROSS_CELL_RESIZE if cross_cell else operations.RESIZE)

    # The host is in the middle of the copy: in a cell, the source's guest set
    # aside and nothing yet on the destination; across cells, the guest powered
    # off for its snapshot.
    guest = os.path.join(cloud.data_dir, "instances", source, sid)

    def copying():
        if not cross_cell:
            return os.path.isdir(guest + "_resize")
        with open(os.path.join(guest, "domain.json")) as f:
            return json.load(f)["power_state"] != 1
    processes.wait("the disk copy", copying, timeout=COPY_SECONDS, interval=0.02)
    cloud.kill()
    at_kill = _operation(cloud.api_db, sid)
    assert at_kill[1] == "running" and [step, "started"] in at_kill[2], at_kill

    restart = cloud.start()
    books = cloud.books
    op = _operation(cloud.api_db, sid)
    assert "Recovered 1 operations left by the previous run." in cloud.log()
    direction = _check_books(books, sid, op, source, source_alloc, new_ram=2048,
                             guests=lambda: cloud.guest_hosts(sid))
    _check_cells(cloud.api_db, {c: cloud.db_url(c) for c in ("cell1", "cell2")}, sid,
                 books.server(sid)["OS-EXT-SRV-ATTR:host"], cloud.url(4), cloud.url(3),
                 books.headers)
    recovered = (op[4] - cloud.started_at).total_seconds()
    assert 0 < recovered < restart, (recovered, restart)
    _report(f"novella up restart after SIGKILL mid "
            f"{'cross-cell' if cross_cell else 'in-cell'} resize, until it serves", restart,
            f"killed in {step}; the move was {op[1]} ({direction}) {recovered:.2f} s after "
            f"the process started; steps {op[2]}")

    _delete_and_zero(books, sid)
    assert cloud.guest_hosts(sid) == set()


# -- two conductors, the owner killed --------------------------------------------------

@pytest.fixture
def two_conductors(tmp_path, request):
    extra = (f"[conductor]\noperation_lease = {LEASE}\n"
             f"[simulated]\nresize_disk_copy_seconds = {request.param}\n")
    with processes.deployment(tmp_path, conductors=2, extra_conf=extra) as d:
        yield d


@pytest.mark.postgresql
@pytest.mark.rabbitmq
@pytest.mark.parametrize("two_conductors", [0.5, 3 * LEASE], indirect=True,
                         ids=["host-done-before-takeover", "host-still-copying-at-takeover"])
def test_sigkill_owning_conductor_mid_cross_cell_resize(two_conductors):
    """The source host's copy takes 0.5 s (over before the lease runs out) or three
    lease periods (the other conductor's undo meets the host still in the step)."""
    d = two_conductors
    api, api_db = d["api"], d["db"]["api"]
    books = Books(api, d["placement"], ADMIN, "admin")
    image, _image_api = processes.seed(d)
    r = requests.post(f"{api}/servers", headers=dict(ADMIN, **HEADERS_274), json={"server": {
        "name": "mover", "flavorRef": "small", "imageRef": image["id"], "networks": "auto",
        "host": "cell1-host"}})
    assert r.status_code == 202, r.text
    sid = r.json()["server"]["id"]
    processes.wait("ACTIVE", lambda: books.status(sid) == "ACTIVE")
    source_alloc = books.allocations(sid)

    r = requests.post(f"{api}/servers/{sid}/action", headers=ADMIN,
                      json={"resize": {"flavorRef": "medium"}})
    assert r.status_code == 202, r.text
    step = COPY_STEP[True]
    kind, _status, _steps, owner, _at = processes.wait(
        f"{step} started", lambda: _step_started(api_db, sid, step), interval=0.02)
    assert kind == operations.CROSS_CELL_RESIZE
    guest = os.path.join(d["state_path"], "instances", "cell1-host", sid, "domain.json")

    def copying():  # the source host powered the guest off for its snapshot
        with open(guest) as f:
            return json.load(f)["power_state"] != 1
    processes.wait("the disk copy", copying, timeout=10, interval=0.02)
    pids = {name: p.pid for name, p in d["procs"].items() if name.startswith("conductor")}
    owner_pid = int(owner.split(":")[1])
    (victim,) = [name for name, pid in pids.items() if pid == owner_pid]
    d["procs"][victim].send_signal(signal.SIGKILL)
    killed_at = time.monotonic()
    assert d["procs"][victim].wait(timeout=10) == -signal.SIGKILL

    processes.wait("another owner", lambda: _operation(api_db, sid)[3] != owner,
                   timeout=4 * LEASE + 10, interval=0.05)
    taken = time.monotonic() - killed_at

    def ended():
        op = _operation(api_db, sid)
        return op[1] != "running" and op
    op = processes.wait("the other conductor to end the move", ended, interval=0.05)
    took = time.monotonic() - killed_at
    direction = _check_books(books, sid, op, "cell1-host", source_alloc, new_ram=1024)
    _check_cells(api_db, {c: d["db"][c] for c in ("cell1", "cell2")}, sid,
                 books.server(sid)["OS-EXT-SRV-ATTR:host"], d["network"], d["image"],
                 processes.TOKEN)
    _report("takeover of a cross-cell resize after SIGKILL of its conductor", taken,
            f"lease {LEASE} s; {victim} killed in {step}; the other conductor took it over, "
            f"ended it {direction} ({op[1]}) {took:.2f} s after the kill")
    # Two lease periods, plus the poll's own step.
    assert taken <= 2 * LEASE + 0.5, f"takeover took {taken:.2f} s, lease {LEASE} s"

    _delete_and_zero(books, sid)
