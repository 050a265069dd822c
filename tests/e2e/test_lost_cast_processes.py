"""A request the broker lost is settled by one of two separately-run conductors.

Every service runs in a process of its own over PostgreSQL and RabbitMQ
(tests/e2e/processes.py), with two `novella serve conductor` processes. Both
conductors are killed (SIGKILL); a resize is accepted by the API, whose cast
waits in the conductors' shared queue; the message is then taken off the
queue, as a broker restart loses a non-durable queue's messages, and kept.
Two conductors start again. Nothing begins the resize; once ``[conductor]
lost_request_timeout`` has passed since the API accepted it, exactly one of
them settles it as a refused move. The kept message is then delivered, as a
cast that was only slow: the conductor that receives it does nothing.

Asserted on state: the settle's claim (the operation named after the request)
was written at least the bound after the migration row, by one of the two
conductors, and is ``undone``; the server is ``ACTIVE`` on its source host with
its old flavor and no task state, the migration ``error``, the conductor's
event ``Error``; Placement holds exactly what the server held before (nothing
for the migration, every provider's usage equal); the late message changes
none of that; deleting the server brings every provider to zero.
"""
import signal
import subprocess

import kombu
import pytest
import requests
import sqlalchemy as sa

from novella.conductor import journal, operations
from novella.db import api_models as am
from novella.db import cell_models as cm
from tests.e2e import processes
from tests.e2e.processes import ADMIN
from tests.e2e.test_crash_processes import HEADERS_274, Books, _delete_and_zero

LEASE = 2    # [conductor] operation_lease
BOUND = 6    # [conductor] lost_request_timeout


def _queue(conn):
    exchange = kombu.Exchange("nova", type="topic", durable=False)
    return kombu.Queue("conductor", exchange, routing_key="conductor",
                       durable=False)(conn.default_channel), exchange


def _take_message(transport_url, method):
    """Take the cast of ``method`` off the conductors' shared queue; its body."""
    with kombu.Connection(transport_url) as conn:
        queue, _exchange = _queue(conn)

        def taken():
            message = queue.get(no_ack=False)
            if message is None:
                return None
            message.ack()
            return message
        message = processes.wait("the cast in the queue", taken, timeout=30, interval=0.05)
        body = message.body.decode() if isinstance(message.body, bytes) else message.body
        assert f'"{method}"' in body, body
        return body


def _deliver(transport_url, body):
    with kombu.Connection(transport_url) as conn:
        _queue_, exchange = _queue(conn)
        kombu.Producer(conn).publish(body, exchange=exchange, routing_key="conductor",
                                     content_type="application/json",
                                     content_encoding="utf-8")


def _rows(url, statement):
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return [tuple(row) for row in conn.execute(statement)]
    finally:
        engine.dispose()


def _state(books, d, sid):
    """Everything the settle decides and the late message must not change."""
    server = books.server(sid)
    migration = books.migration(sid)
    actions = requests.get(f"{books.api}/servers/{sid}/os-instance-actions",
                           headers=ADMIN).json()["instanceActions"]
    resize = next(a for a in actions if a["action"] == "resize")
    events = requests.get(f"{books.api}/servers/{sid}/os-instance-actions/"
                          f"{resize['request_id']}", headers=ADMIN).json()["instanceAction"]
    return {"server": (server["status"], server["OS-EXT-STS:task_state"],
                       server["OS-EXT-SRV-ATTR:host"], server["flavor"]["ram"]),
            "migration": migration["status"],
            "allocations": (books.allocations(sid), books.allocations(migration["uuid"])),
            "usages": books.usages(),
            "action": (events["message"], {e["event"]: e["result"] for e in events["events"]}),
            "operations": _rows(d["db"]["api"], sa.select(
                am.Operation.uuid, am.Operation.kind, am.Operation.status,
                am.Operation.owner).where(am.Operation.instance_uuid == sid)
                .order_by(am.Operation.id))}


@pytest.fixture
def deployment(tmp_path):
    extra = f"[conductor]\noperation_lease = {LEASE}\nlost_request_timeout = {BOUND}\n"
    with processes.deployment(tmp_path, conductors=2, extra_conf=extra) as d:
        d["tmp_path"] = tmp_path
        yield d


@pytest.mark.postgresql
@pytest.mark.rabbitmq
def test_a_resize_whose_cast_the_broker_lost_is_settled_by_one_of_two_conductors(deployment):
    d = deployment
    books = Books(d["api"], d["placement"], ADMIN, "admin")
    image, _image_api = processes.seed(d)
    r = requests.post(f"{d['api']}/servers", headers=dict(ADMIN, **HEADERS_274), json={
        "server": {"name": "mover", "flavorRef": "small", "imageRef": image["id"],
                   "networks": "auto", "host": "cell1-host"}})
    assert r.status_code == 202, r.text
    sid = r.json()["server"]["id"]
    processes.wait("ACTIVE", lambda: books.status(sid) == "ACTIVE")
    source_alloc, usages_before = books.allocations(sid), books.usages()

    # No conductor runs: the API's cast waits in the shared queue, where it is lost.
    for name in ("conductor", "conductor2"):
        d["procs"][name].send_signal(signal.SIGKILL)
        assert d["procs"][name].wait(timeout=10) == -signal.SIGKILL
    r = requests.post(f"{d['api']}/servers/{sid}/action", headers=ADMIN,
                      json={"resize": {"flavorRef": "medium"}})
    assert r.status_code == 202, r.text
    body = _take_message(d["transports"]["super"], "migrate_server")
    migration = books.migration(sid)
    assert migration["status"] == "pre-migrating"

    # Two conductors again; neither began the request, one settles it after the bound.
    logs = {}
    for name in ("conductor-b", "conductor2-b"):
        logs[name] = d["tmp_path"] / f"{name}.log"
        d["procs"][name] = subprocess.Popen(
            processes._service_command("conductor", "--config-file", d["conf"]),
            stdout=open(logs[name], "w"), stderr=subprocess.STDOUT)
    processes.wait("the move settled", lambda: books.migration(sid)["status"] == "error",
                   timeout=BOUND + 4 * LEASE + 60, interval=0.2)
    settled = _state(books, d, sid)
    key = journal.request_key("move", migration["uuid"])
    # The server's operations: its build, and the settled resize's claim, one.
    [(kind, status, owner)] = [op[1:] for op in settled["operations"]
                               if op[1] != operations.BUILD]
    assert [op[0] for op in settled["operations"]][-1] == key
    assert (kind, status) == (operations.RESIZE, "undone")
    pids = {str(d["procs"][name].pid) for name in logs}
    assert owner.split(":")[1] in pids, (owner, pids)
    [(claimed_at,)] = _rows(d["db"]["api"], sa.select(am.Operation.created_at).where(
        am.Operation.uuid == key))
    [(accepted_at,)] = _rows(d["db"]["cell1"], sa.select(cm.Migration.created_at).where(
        cm.Migration.uuid == migration["uuid"]))
    assert (claimed_at - accepted_at).total_seconds() >= BOUND, (claimed_at, accepted_at)
    assert settled["server"] == ("ACTIVE", None, "cell1-host", 512)
    assert settled["allocations"] == (source_alloc, {})
    assert settled["usages"] == usages_before
    assert settled["action"] == ("Error", {"conductor_migrate_server": "Error"})

    # The lost message arrives after all: the conductor that takes it does nothing.
    _deliver(d["transports"]["super"], body)

    def received():
        return any("not begun" in logs[name].read_text() for name in logs)
    # (written as the entry point returns, having written nothing)
    processes.wait("the late cast received", received, timeout=60, interval=0.2)
    assert _state(books, d, sid) == settled
    _delete_and_zero(books, sid)
