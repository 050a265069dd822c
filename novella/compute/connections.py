"""The server's ports and volumes on this host: made and moved here.

Plain functions over the host's ``ComputeManager`` (``compute``: its network
and volume services, driver, tracker and cell database), imported by the
modules of each operation: the ports a build allocates; the volumes
attached; the ports bound and the volumes attached here when a server
arrives from another host (``take_in``, then ``switch_attachments``).
novella/compute/teardown.py gives them back.
"""
import contextlib
import json

import sqlalchemy as sa

from novella.compute import cleanup
from novella.compute import guest
from novella.compute import pci
from novella.db import cell_models as m
from novella.db import records
from novella.network import ownership
from novella.virt import pci as virt_pci


def allocate_network(compute, ctxt, inst, requested_networks, port_profiles=None,
                      security_groups=None):
    """Ports for the server, bound to this host (with ``port_profiles``
    in their bindings, in ``security_groups``); returns its network_info."""
    if compute.network_api is None:
        return []
    given = ownership.requested_port_ids(requested_networks)
    if given:  # the user's before they are the server's (novella/network/ownership.py)
        records.set_system_metadata(compute.cell_db, inst.uuid,
                                    **{ownership.USER_PORTS: json.dumps(given)})
    return compute.network_api.allocate_for_instance(
        ctxt, inst.uuid, inst.project_id, requested_networks=requested_networks,
        host=compute.host, availability_zone=inst.availability_zone or "nova",
        port_profiles=port_profiles, security_groups=security_groups) or []


def sriov_ports(compute, ctxt, instance_uuid=None, requested_networks=None, read=None):
    """The server's ports (or those ``requested_networks`` names) that need a
    device of this host (novella/compute/pci.py). ``read``: the server's row read
    under its lock: when its info cache names each port's vNIC type and none is
    SR-IOV's, none needs a device and the network service is not asked."""
    if compute.network_api is None:
        return []
    if read is not None and not requested_networks:
        vifs = guest.network_info_of(read)
        if all(vif.get("vnic_type") for vif in vifs) and not any(
                vif["vnic_type"] in virt_pci.SRIOV_VNIC_TYPES for vif in vifs):
            return []
    port_ids = [r.get("port_id") or r.get("port") for r in requested_networks or []
                if isinstance(r, dict) and (r.get("port_id") or r.get("port"))]
    if not (instance_uuid or port_ids):
        return []
    return compute.network_api.sriov_ports(ctxt, instance_uuid=instance_uuid,
                                        port_ids=port_ids)


def attach_volumes(compute, ctxt, inst, attached, bdms=None):
    """Attach every volume BDM; record each attachment in ``attached``."""
    volumes = [b for b in (guest.bdms_of(compute, inst.uuid) if bdms is None else bdms)
               if guest.is_volume(b)]
    if not volumes:
        return
    connector = compute.driver.get_volume_connector(guest.instance_dict(inst))
    for bdm in volumes:
        if compute.volume_api is not None:
            att = compute.volume_api.attachment_create(
                ctxt, bdm.volume_id, inst.uuid, connector=connector,
                mountpoint=bdm.device_name)
            attachment_id = att["id"]
            attached.append(attachment_id)
            info = att.get("connection_info") or {}
            compute.volume_api.attachment_complete(ctxt, attachment_id)
        else:
            attachment_id, info = None, {}
        info = dict(info, volume_id=bdm.volume_id)
        info.setdefault("driver_volume_type", "simulated")
        with compute.cell_db.session(write=True) as s:
            row = s.get(m.BlockDeviceMapping, bdm.id)
            row.attachment_id = attachment_id
            row.connection_info = json.dumps(info)


def reattach_volumes(compute, ctxt, inst):
    """Point every volume attachment at this host: new attachment, old one deleted.
    Returns the instance's BDM rows as read (None without a volume service)."""
    if compute.volume_api is None:
        return None
    connector = compute.driver.get_volume_connector(guest.instance_dict(inst))
    bdms = guest.bdms_of(compute, inst.uuid)
    for bdm in bdms:
        if bdm.destination_type != "volume" or not bdm.volume_id:
            continue
        att = compute.volume_api.attachment_create(ctxt, bdm.volume_id, inst.uuid,
                                                connector=connector,
                                                mountpoint=bdm.device_name)
        compute.volume_api.attachment_complete(ctxt, att["id"])
        if bdm.attachment_id:
            with contextlib.suppress(Exception):
                compute.volume_api.attachment_delete(ctxt, bdm.attachment_id)
        info = dict(att.get("connection_info") or {}, volume_id=bdm.volume_id)
        with compute.cell_db.session(write=True) as s:
            row = s.get(m.BlockDeviceMapping, bdm.id)
            row.attachment_id = att["id"]
            row.connection_info = json.dumps(info)
    return bdms


def bind_network_here(compute, ctxt, inst, port_profiles=None, claim="current"):
    """The server's ports are active on this host, with ``port_profiles``
    (what this host's providers give them) and the devices of its ``claim``
    here (``ResourceTracker.port_profiles``) in their bindings; returns its
    network_info. ``inst``: the row read under the instance's lock."""
    if compute.network_api is None:
        return guest.network_info_of(inst)
    network_info = compute.network_api.migrate_instance_finish(
        ctxt, inst.uuid, compute.host,
        port_profiles=compute.rt.port_profiles(inst.uuid, port_profiles, claim, instance=inst))
    guest.save_network_info(compute, inst.uuid, network_info, read=inst)
    return network_info


def take_in(compute, ctxt, inst, migration_uuid, port_profiles, made):
    """This host's share of taking in a server from another host: the claim,
    INACTIVE port bindings naming this host's providers (``port_profiles``),
    a second attachment of each volume connected here. ``made`` records each
    for ``teardown.give_back``; returns the driver's view of the volumes."""
    mig = guest.migration(compute, migration_uuid)
    made["claim"] = compute.rt.resize_claim(
        ctxt, inst.uuid, records.flavor_of(inst),
        {"uuid": migration_uuid, "source_compute": mig["source_compute"],
         "source_node": mig["source_node"]},
        ports=sriov_ports(compute, ctxt, inst.uuid), port_profiles=port_profiles)
    if compute.network_api is not None:
        compute.network_api.bind_ports_to_host(
            ctxt, inst.uuid, compute.host,
            port_profiles=pci.with_devices(port_profiles, made["claim"].pci_devices))
        made["bindings"] = True
    return attach_volumes_here(compute, ctxt, inst, made["attachments"])


def attach_volumes_here(compute, ctxt, inst, attachments):
    """A second attachment of every volume, connected to this host; the
    driver's view of them. ``attachments`` collects {volume id: attachment id}."""
    vols = []
    if compute.volume_api is None:
        return {"block_device_mapping": vols}
    connector = compute.driver.get_volume_connector(guest.instance_dict(inst))
    for bdm in guest.bdms_of(compute, inst.uuid):
        if not guest.is_volume(bdm):
            continue
        att = compute.volume_api.attachment_create(ctxt, bdm.volume_id, inst.uuid,
                                                connector=connector,
                                                mountpoint=bdm.device_name)
        attachments[bdm.volume_id] = att["id"]
        vols.append(guest.driver_volume(bdm, att["id"], dict(att.get("connection_info") or {},
                                                             volume_id=bdm.volume_id)))
    return {"block_device_mapping": vols}


def strays(volume_api, cell_db, ctxt, instance_uuid):
    """{volume id: attachment id} of the server's attachments its BDMs do not point
    at: those a move made for a host it did not end on (a move is the server's only
    task).
    Read from the services alone, for a host or a conductor that has nothing of
    the move in memory."""
    if volume_api is None:
        return {}
    with cell_db.read_session() as s:
        kept = set(s.scalars(sa.select(m.BlockDeviceMapping.attachment_id).where(
            m.BlockDeviceMapping.instance_uuid == instance_uuid,
            m.BlockDeviceMapping.deleted == 0)))
    return {a["volume_id"]: a["id"]
            for a in volume_api.attachment_list(ctxt, instance_uuid=instance_uuid)
            if a["id"] not in kept}


def set_bdm(compute, bdm_id, **values):
    """Write ``values`` (columns) into a block device mapping row."""
    with compute.cell_db.session(write=True) as s:
        row = s.get(m.BlockDeviceMapping, bdm_id)
        for key, value in values.items():
            setattr(row, key, value)


def switch_attachments(compute, ctxt, instance_uuid, attachments):
    """The BDMs take this host's attachments; the source's are deleted."""
    for bdm in guest.bdms_of(compute, instance_uuid):
        new = attachments.get(bdm.volume_id)
        if not guest.is_volume(bdm) or not new:
            continue
        att = compute.volume_api.attachment_complete(ctxt, new)
        if bdm.attachment_id and bdm.attachment_id != new:
            with cleanup.step("delete the source's volume attachment"):
                compute.volume_api.attachment_delete(ctxt, bdm.attachment_id)
        with compute.cell_db.session(write=True) as s:
            row = s.get(m.BlockDeviceMapping, bdm.id)
            row.attachment_id = new
            row.connection_info = json.dumps(dict(att.get("connection_info") or {},
                                                  volume_id=bdm.volume_id))
