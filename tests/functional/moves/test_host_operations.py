"""The compute hosts' journal of their operations (novella/db/host_operations.py)
and, as a host starts, the system-metadata notes written before it: each
becomes the journal's row and is finished as a row would be."""
import datetime
import json

import pytest

from novella.compute import interface_ops
from novella.compute import volume_ops
from novella.context import get_admin_context
from novella.db import cells as cells_mod
from novella.db import host_operations
from novella.db import journal_rows
from novella.db import records
from tests.functional.compute import test_volume_backed_image as frozen
from tests.functional.moves import test_compute_crash_recovery as host_death


def test_the_journal_begins_steps_ends_and_lists_a_hosts_unfinished_operations(cloud):
    sid = cloud.boot()
    cell_db, host = _cell_db(cloud, sid), cloud.host_of(sid)
    op = host_operations.begin(cell_db, sid, "swap_volume", {"old": "a"})
    op.state["new"] = "b"
    host_operations.step(cell_db, op, "connect", journal_rows.STARTED)
    host_operations.step(cell_db, op, "connect", journal_rows.DONE)
    [found] = host_operations.unfinished(cell_db, host)
    assert (found.instance_uuid, found.kind, found.state, found.steps) == (
        sid, "swap_volume", {"old": "a", "new": "b"}, [["connect", "done"]])
    assert host_operations.unfinished(cell_db, "elsewhere") == []
    # Begun again: it replaces the one of its kind.
    host_operations.begin(cell_db, sid, "swap_volume", {"old": "c"})
    assert {k: o.state for k, o in host_operations.of_server(cell_db, sid).items()} == {
        "swap_volume": {"old": "c"}}
    host_operations.end(cell_db, sid, "swap_volume")
    assert host_operations.of_server(cell_db, sid) == {}


def test_a_state_that_is_not_json_is_refused_as_it_is_written(cloud):
    sid = cloud.boot()
    cell_db = _cell_db(cloud, sid)
    with pytest.raises(TypeError):
        host_operations.begin(cell_db, sid, "quiesced_for_snapshot",
                              {"since": datetime.datetime(2025, 1, 1)})
    assert host_operations.of_server(cell_db, sid) == {}
    op = host_operations.begin(cell_db, sid, "quiesced_for_snapshot", {"since": "then"})
    op.state["since"] = datetime.datetime(2025, 1, 1)
    with pytest.raises(TypeError):
        host_operations.step(cell_db, op, "freeze", journal_rows.STARTED)
    assert host_operations.of_server(cell_db, sid)["quiesced_for_snapshot"].state == {
        "since": "then"}


def _cell_db(cloud, sid):
    return cells_mod.cell_database(cells_mod.instance_cell(cloud.aio.api_db, sid))


def _as_old_note(cell_db, sid, kind, value):
    """What a host of before the journal left: the note, and no row."""
    host_operations.end(cell_db, sid, kind)
    records.set_system_metadata(cell_db, sid, **{kind: value})


def test_a_guest_frozen_under_an_old_note_is_thawed_as_its_host_starts(cloud, monkeypatch):
    sid, _root = frozen._from_volume(cloud)
    host = cloud.host_of(sid)
    compute = cloud.aio.computes[host]
    compute.quiesce_instance(get_admin_context(), sid)
    since = host_operations.of_server(compute.cell_db, sid)[volume_ops.QUIESCE].state["since"]
    _as_old_note(compute.cell_db, sid, volume_ops.QUIESCE, since)
    death = host_death.arm_host_deaths(cloud, monkeypatch)
    host_death._restart(cloud, death, host)
    assert frozen._guest(cloud, sid)["quiesced"] is False
    assert volume_ops.QUIESCE not in records.system_metadata(compute.cell_db, sid)
    assert host_operations.of_server(compute.cell_db, sid) == {}


def test_a_detach_under_an_old_note_is_finished_as_its_host_starts(cloud, monkeypatch):
    sid = cloud.boot()
    host = cloud.host_of(sid)
    private = next(n["id"] for n in cloud.aio.network_api.list_networks(get_admin_context())
                   if n["name"] == "private")
    status, body = cloud.api("POST", f"/servers/{sid}/os-interface", {
        "interfaceAttachment": {"net_id": private}})
    assert status == 200, body
    port_id = body["interfaceAttachment"]["port_id"]
    cell_db = _cell_db(cloud, sid)
    # The API of before noted the detach, then the host stopped before it was cast.
    _as_old_note(cell_db, sid, interface_ops.INTERFACE,
                 json.dumps({"op": "detach", "port_id": port_id}))
    death = host_death.arm_host_deaths(cloud, monkeypatch)
    host_death._restart(cloud, death, host)
    cloud.aio.wait_idle()
    ports = cloud.api("GET", f"/servers/{sid}/os-interface")[1]["interfaceAttachments"]
    assert port_id not in {p["port_id"] for p in ports}
    assert interface_ops.INTERFACE not in records.system_metadata(cell_db, sid)
    assert host_operations.of_server(cell_db, sid) == {}


def test_a_rebuild_under_an_old_note_writes_the_image_on_the_root_volume(cloud, monkeypatch):
    """The note is adopted before the rebuild runs again (its task state)."""
    from tests.functional.moves import test_rebuild_volume_backed as rebuild
    sid, root = cloud.boot_from_volume()
    other = rebuild._image(cloud)
    host = cloud.host_of(sid)
    compute = cloud.aio.computes[host]
    # The rebuild was accepted and noted; the host's service stopped before it ran.
    monkeypatch.setattr(compute, "rebuild_in_place", lambda *a, **k: None)
    assert rebuild._rebuild(cloud, sid, other, version="2.93")[0] == 202
    cloud.aio.wait_idle()
    cell_db = _cell_db(cloud, sid)
    _as_old_note(cell_db, sid, volume_ops.REIMAGE_ROOT, other)
    death = host_death.arm_host_deaths(cloud, monkeypatch)
    host_death._restart(cloud, death, host)
    cloud.aio.wait_idle()
    finished = rebuild._books(cloud, sid, root)
    assert finished["volume"] == ("in-use", other) and finished["noted"] is None, finished
    assert finished["server"][:2] == ("ACTIVE", None), finished
    assert volume_ops.REIMAGE_ROOT not in records.system_metadata(cell_db, sid)
