"""Resize and cold migrate of servers with volumes and ports on two networks.

At each visible step the tests check, besides placement (allocations by
consumer, usages by provider): every port's bindings ({host: status}, and
``binding:host_id``), the live volume attachments (volume, host, status),
the block device mappings (attachment id and the host their connection was
made for) and what the hypervisor of each host holds.

Inside a cell a move re-makes the volume attachments with the destination's
connector when the destination finishes (the source's are deleted then) and
moves the ports' active bindings there, so a server in VERIFY_RESIZE has
nothing left on the source but its kept disks and the migration's allocation.
"""
import json
import os

import pytest
import sqlalchemy as sa

from novella.context import get_admin_context
from novella.db import cell_models as cm
from novella.db import cells as cells_mod
from novella.virt import simulated

TINY = {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}
SMALL = {"VCPU": 1, "MEMORY_MB": 2048, "DISK_GB": 20}
BFV = {"VCPU": 1, "MEMORY_MB": 512}  # the root disk is a volume: no DISK_GB
ZERO = {"VCPU": 0, "MEMORY_MB": 0, "DISK_GB": 0}


# -- building the server ----------------------------------------------------------------

def _second_network_port(cloud):
    """A port the user made on a second network (not the default one)."""
    ctxt = get_admin_context()
    net = cloud.aio.network_api
    second = net.create_network(ctxt, name="second", cidr="10.1.0.0/24", shared=True)
    return net.create_port(ctxt, {"network_id": second["id"], "name": "user-port"})


def _default_network(cloud):
    return next(n for n in cloud.aio.network_api.list_networks(get_admin_context())
                if n["name"] == "private")


def _server_with_data_volume(cloud):
    """A server booted on two networks (one port made for it, one given), plus a data volume."""
    ctxt = get_admin_context()
    port = _second_network_port(cloud)
    sid = cloud.boot(flavor="1", networks=[{"uuid": _default_network(cloud)["id"]},
                                           {"port": port["id"]}])
    vol = cloud.aio.volume_api.create(ctxt, 1, name="data")
    status, body = cloud.api("POST", f"/servers/{sid}/os-volume_attachments",
                             {"volumeAttachment": {"volumeId": vol["id"]}})
    assert status == 200, body
    cloud.aio.wait_idle()
    return sid, [vol["id"]]


def _server_from_volume(cloud):
    """A server whose root disk is a volume (block_device_mapping_v2), with a second port."""
    ctxt = get_admin_context()
    port = _second_network_port(cloud)
    root = cloud.aio.volume_api.create(ctxt, 1, name="root",
                                       image_id=cloud.aio.demo_image["id"])
    status, body = cloud.api("POST", "/servers", {"server": {
        "name": "bfv", "flavorRef": "1",
        "networks": [{"uuid": _default_network(cloud)["id"]}, {"port": port["id"]}],
        "block_device_mapping_v2": [{"source_type": "volume", "destination_type": "volume",
                                     "uuid": root["id"], "boot_index": 0}]}})
    assert status == 202, body
    cloud.aio.wait_idle()
    sid = body["server"]["id"]
    assert cloud.server(sid)["status"] == "ACTIVE", cloud.fault(sid)
    return sid, [root["id"]]


# -- what the services and hosts hold -----------------------------------------------------

def _ports(cloud, sid):
    """{port id: (network id, fixed ips, binding:host_id, {host: binding status})}."""
    ctxt = get_admin_context()
    net = cloud.aio.network_api
    return {p["id"]: (p["network_id"], tuple(ip["ip_address"] for ip in p["fixed_ips"]),
                      p["binding:host_id"],
                      {b["host"]: b["status"] for b in net.list_port_bindings(ctxt, p["id"])})
            for p in net.list_ports(ctxt, device_id=sid)}


def _bound_to(cloud, sid, host):
    """Every port of the server has exactly one binding, active on ``host``."""
    ports = _ports(cloud, sid)
    assert len(ports) == 2 and len({p[0] for p in ports.values()}) == 2  # two networks
    for port_id, (_net, _ips, bound, bindings) in ports.items():
        assert (bound, bindings) == (host, {host: "ACTIVE"}), port_id


def _attachments(cloud, sid):
    """Sorted (volume id, attached host, status) of the server's live attachments."""
    return sorted((a["volume_id"], a["attached_host"], a["status"])
                  for a in cloud.aio.volume_api.attachment_list(get_admin_context(),
                                                                instance_uuid=sid))


def _bdms(cloud, sid):
    """{volume id: (attachment id, host the connection was made for)} of the server's BDMs."""
    with cells_mod.cell_database(cloud.aio.cells[0]).session() as s:
        rows = s.scalars(sa.select(cm.BlockDeviceMapping).where(
            cm.BlockDeviceMapping.instance_uuid == sid,
            cm.BlockDeviceMapping.deleted == 0)).all()
        return {r.volume_id: (r.attachment_id,
                              json.loads(r.connection_info)["data"]["target_host"])
                for r in rows if r.volume_id}


def _attached_on(cloud, sid, volumes, host):
    """Each volume has one live attachment, on ``host``, and its BDM points at it."""
    assert _attachments(cloud, sid) == sorted((v, host, "attached") for v in volumes)
    live = {a["volume_id"]: a["id"] for a in cloud.aio.volume_api.attachment_list(
        get_admin_context(), instance_uuid=sid)}
    assert _bdms(cloud, sid) == {v: (live[v], host) for v in volumes}
    for v in volumes:
        vol = cloud.aio.volume_api.get(get_admin_context(), v)
        assert vol["status"] == "in-use"
        assert [(a["server_id"], a["host_name"]) for a in vol["attachments"]] == [(sid, host)]


def _guest(host, sid):
    """(volume ids, port ids) the host's hypervisor has plugged into the guest, or None."""
    try:
        domain = simulated.driver_for(host)._load(sid)
    except simulated.InstanceNotFound:
        return None
    return sorted(domain.get("volumes", {})), sorted(v["id"] for v in domain["network_info"])


def _where(cloud, sid):
    srv = cloud.server(sid)
    return srv["status"], srv["OS-EXT-SRV-ATTR:host"], srv["OS-EXT-SRV-ATTR:hypervisor_hostname"]


def _other(cloud, host):
    (other,) = [h for h in cloud.aio.computes if h != host]
    return other


def _state(cloud, sid, host):
    """Everything a failed move must leave as it was, the server being on ``host``."""
    drv = simulated.driver_for(host)
    return {"where": _where(cloud, sid), "books": cloud.books(sid),
            "flavor": cloud.server(sid)["flavor"]["original_name"],
            "ports": _ports(cloud, sid), "attachments": _attachments(cloud, sid),
            "guest": _guest(host, sid), "power": drv.get_info({"uuid": sid})["state"],
            "disks": sorted(os.listdir(drv.instance_dir(sid)))}


def _act(cloud, sid, body, code=202, **kw):
    status, resp = cloud.action(sid, body, **kw)
    assert status == code, resp
    cloud.aio.wait_idle()


def _moved(cloud, sid, body, volumes, old, new):
    """Resize/migrate ``sid`` and check VERIFY_RESIZE everywhere; returns (migration, dest)."""
    src = cloud.host_of(sid)
    _act(cloud, sid, body)
    (mig,) = cloud.migrations(sid)
    dest = mig["dest_compute"]
    assert dest != src and mig["status"] == "finished", cloud.fault(sid)
    assert _where(cloud, sid) == ("VERIFY_RESIZE", dest, dest)
    books, usages = cloud.books(sid, mig["uuid"])
    assert books == {sid: {dest: new}, mig["uuid"]: {src: old}}
    assert usages[src] == dict(ZERO, **old) and usages[dest] == dict(ZERO, **new)
    # The ports and volumes followed the guest: nothing of them is left on the source.
    _bound_to(cloud, sid, dest)
    _attached_on(cloud, sid, volumes, dest)
    ports = sorted(_ports(cloud, sid))
    assert _guest(dest, sid) == (sorted(volumes), ports)
    assert _guest(src, sid) is None  # powered off, its disks kept aside for a revert
    assert os.path.isdir(simulated.driver_for(src).instance_dir(sid) + "_resize")
    return mig, dest


# -- the tests ------------------------------------------------------------------------------

def test_resize_confirm_with_a_data_volume_and_two_networks(cloud):
    sid, volumes = _server_with_data_volume(cloud)
    src = cloud.host_of(sid)
    ports_before = _ports(cloud, sid)
    _bound_to(cloud, sid, src)
    _attached_on(cloud, sid, volumes, src)
    assert cloud.books(sid) == ({sid: {src: TINY}}, {src: TINY, _other(cloud, src): ZERO})

    mig, dest = _moved(cloud, sid, {"resize": {"flavorRef": "2"}}, volumes, TINY, SMALL)
    # Same ports, same addresses: only their bindings moved.
    assert {p: v[:2] for p, v in _ports(cloud, sid).items()} == \
        {p: v[:2] for p, v in ports_before.items()}

    _act(cloud, sid, {"confirmResize": None}, code=204)
    assert _where(cloud, sid) == ("ACTIVE", dest, dest)
    assert cloud.migrations(sid)[0]["status"] == "confirmed"
    books, usages = cloud.books(sid, mig["uuid"])
    assert books == {sid: {dest: SMALL}, mig["uuid"]: {}}
    assert usages == {src: ZERO, dest: SMALL}
    _bound_to(cloud, sid, dest)  # no binding, active or not, left on the source
    _attached_on(cloud, sid, volumes, dest)
    assert _guest(dest, sid) == (volumes, sorted(ports_before))
    assert not os.path.exists(simulated.driver_for(src).instance_dir(sid))
    assert not os.path.exists(simulated.driver_for(src).instance_dir(sid) + "_resize")


def test_resize_revert_with_a_data_volume_and_two_networks(cloud):
    sid, volumes = _server_with_data_volume(cloud)
    src = cloud.host_of(sid)
    ports_before = _ports(cloud, sid)
    assert cloud.books(sid) == ({sid: {src: TINY}}, {src: TINY, _other(cloud, src): ZERO})
    mig, dest = _moved(cloud, sid, {"resize": {"flavorRef": "2"}}, volumes, TINY, SMALL)

    _act(cloud, sid, {"revertResize": None})
    assert _where(cloud, sid) == ("ACTIVE", src, src)
    assert cloud.server(sid)["flavor"]["original_name"] == "m1.tiny"
    assert cloud.migrations(sid)[0]["status"] == "reverted"
    books, usages = cloud.books(sid, mig["uuid"])
    assert books == {sid: {src: TINY}, mig["uuid"]: {}}
    assert usages == {src: TINY, dest: ZERO}
    assert _ports(cloud, sid) == ports_before  # bindings and addresses as before the resize
    _attached_on(cloud, sid, volumes, src)
    # Nothing left on the destination: no guest, no disks, no binding, no attachment.
    assert _guest(src, sid) == (volumes, sorted(ports_before))
    assert not os.path.exists(simulated.driver_for(dest).instance_dir(sid))
    assert not os.path.exists(simulated.driver_for(src).instance_dir(sid) + "_resize")


def test_revert_after_the_volume_was_detached_while_resized(cloud):
    sid, volumes = _server_with_data_volume(cloud)
    src = cloud.host_of(sid)
    ports_before = _ports(cloud, sid)
    mig, dest = _moved(cloud, sid, {"resize": {"flavorRef": "2"}}, volumes, TINY, SMALL)
    status, body = cloud.api("DELETE", f"/servers/{sid}/os-volume_attachments/{volumes[0]}")
    assert status == 202, body
    cloud.aio.wait_idle()
    assert _attachments(cloud, sid) == [] and _bdms(cloud, sid) == {}
    assert _guest(dest, sid) == ([], sorted(ports_before))
    assert cloud.books(sid, mig["uuid"]) == ({sid: {dest: SMALL}, mig["uuid"]: {src: TINY}},
                                             {src: TINY, dest: SMALL})

    _act(cloud, sid, {"revertResize": None})
    assert _where(cloud, sid) == ("ACTIVE", src, src)
    assert cloud.books(sid, mig["uuid"]) == ({sid: {src: TINY}, mig["uuid"]: {}},
                                             {src: TINY, dest: ZERO})
    assert _ports(cloud, sid) == ports_before
    # The detach holds: the old guest comes back without the volume.
    assert _attachments(cloud, sid) == [] and _bdms(cloud, sid) == {}
    assert cloud.aio.volume_api.get(get_admin_context(), volumes[0])["status"] == "available"
    assert _guest(src, sid) == ([], sorted(ports_before))
    status, body = cloud.api("GET", f"/servers/{sid}/os-volume_attachments")
    assert status == 200 and body["volumeAttachments"] == []


def test_delete_while_resized_releases_volumes_and_ports_on_both_hosts(cloud):
    ctxt = get_admin_context()
    sid, volumes = _server_with_data_volume(cloud)
    src = cloud.host_of(sid)
    ports = cloud.aio.network_api.list_ports(ctxt, device_id=sid)
    mig, dest = _moved(cloud, sid, {"resize": {"flavorRef": "2"}}, volumes, TINY, SMALL)

    assert cloud.api("DELETE", f"/servers/{sid}")[0] == 204
    cloud.aio.wait_idle()
    assert cloud.api("GET", f"/servers/{sid}")[0] == 404
    assert cloud.books(sid, mig["uuid"]) == ({sid: {}, mig["uuid"]: {}},
                                             {src: ZERO, dest: ZERO})
    # The port made for the server is gone; the one the user gave is kept, unbound.
    assert cloud.aio.network_api.list_ports(ctxt, device_id=sid) == []
    (given,) = [p for p in ports if p["name"] == "user-port"]
    kept = cloud.aio.network_api.get_port(ctxt, given["id"])
    assert (kept["device_id"], kept["binding:host_id"]) == ("", "")
    assert cloud.aio.network_api.list_port_bindings(ctxt, given["id"]) == []
    assert len(cloud.aio.network_api.list_ports(ctxt)) == 1
    assert _attachments(cloud, sid) == []
    assert cloud.aio.volume_api.get(ctxt, volumes[0])["status"] == "available"
    for host in (src, dest):
        assert not os.path.exists(simulated.driver_for(host).instance_dir(sid))
        assert not os.path.exists(simulated.driver_for(host).instance_dir(sid) + "_resize")


@pytest.mark.parametrize("finish", ["confirmResize", "revertResize"])
def test_cold_migrate_a_server_booted_from_volume(cloud, finish):
    sid, volumes = _server_from_volume(cloud)
    src = cloud.host_of(sid)
    ports_before = _ports(cloud, sid)
    _bound_to(cloud, sid, src)
    _attached_on(cloud, sid, volumes, src)
    assert cloud.books(sid) == ({sid: {src: BFV}}, {src: dict(ZERO, **BFV),
                                                    _other(cloud, src): ZERO})

    mig, dest = _moved(cloud, sid, {"migrate": None}, volumes, BFV, BFV)
    assert mig["migration_type"] == "migration"
    files = os.listdir(simulated.driver_for(dest).instance_dir(sid))
    assert "disk" not in files  # the root disk is the volume: nothing copied for it

    _act(cloud, sid, {finish: None}, code=204 if finish == "confirmResize" else 202)
    home, away = (dest, src) if finish == "confirmResize" else (src, dest)
    assert _where(cloud, sid) == ("ACTIVE", home, home)
    books, usages = cloud.books(sid, mig["uuid"])
    assert books == {sid: {home: BFV}, mig["uuid"]: {}}
    assert usages == {home: dict(ZERO, **BFV), away: ZERO}
    _bound_to(cloud, sid, home)
    _attached_on(cloud, sid, volumes, home)
    assert _guest(home, sid) == (volumes, sorted(ports_before))
    assert not os.path.exists(simulated.driver_for(away).instance_dir(sid))


def _fail_finish_migration(cloud, src, dest, sid):
    simulated.inject_fault(dest, "finish_migration", instance_uuid=sid)


def _fail_binding_at_dest(cloud, src, dest, sid):
    cloud.aio.network_api.unbindable_hosts.add(dest)  # finish_resize cannot bind the ports


def _fail_disk_move(cloud, src, dest, sid):
    simulated.inject_fault(src, "migrate_disk_and_power_off", instance_uuid=sid)


@pytest.mark.parametrize("make", [_server_with_data_volume, _server_from_volume])
@pytest.mark.parametrize("inject,step", [
    (_fail_finish_migration, "compute_finish_resize"),
    (_fail_binding_at_dest, "compute_finish_resize"),
    (_fail_disk_move, "compute_resize_instance"),
])
def test_a_failed_move_puts_volumes_and_ports_back(cloud, make, inject, step):
    sid, volumes = make(cloud)
    src = cloud.host_of(sid)
    dest = _other(cloud, src)
    before = _state(cloud, sid, src)
    _attached_on(cloud, sid, volumes, src)
    inject(cloud, src, dest, sid)

    _act(cloud, sid, {"resize": {"flavorRef": "2"}})
    assert simulated.pending_faults(src) == simulated.pending_faults(dest) == []
    (mig,) = cloud.migrations(sid)
    assert (mig["status"], mig["dest_compute"]) == ("error", dest)
    assert cloud.events(sid, "resize")[step] == "Error"
    assert cloud.events(sid, "resize")["conductor_migrate_server"] == "Error"
    assert cloud.fault(sid)
    assert _state(cloud, sid, src) == before
    assert cloud.allocations(mig["uuid"]) == {}
    _attached_on(cloud, sid, volumes, src)  # the BDMs point at the live source attachments
    assert not os.path.exists(simulated.driver_for(dest).instance_dir(sid))
    assert not os.path.exists(simulated.driver_for(src).instance_dir(sid) + "_resize")

    # Healthy again, the server moves with its volumes and ports.
    cloud.aio.network_api.unbindable_hosts.clear()
    _act(cloud, sid, {"resize": {"flavorRef": "2"}})
    assert _where(cloud, sid) == ("VERIFY_RESIZE", dest, dest), cloud.fault(sid)
    again = next(m for m in cloud.migrations(sid) if m["uuid"] != mig["uuid"])
    old = before["books"][0][sid][src]
    new = dict(SMALL) if "DISK_GB" in old else {"VCPU": 1, "MEMORY_MB": 2048}
    assert again["status"] == "finished"
    assert cloud.books(sid, again["uuid"], mig["uuid"]) == (
        {sid: {dest: new}, again["uuid"]: {src: old}, mig["uuid"]: {}},
        {src: dict(ZERO, **old), dest: dict(ZERO, **new)})
    _bound_to(cloud, sid, dest)
    _attached_on(cloud, sid, volumes, dest)

