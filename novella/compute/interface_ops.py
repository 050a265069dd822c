"""Attaching a port to, and detaching it from, a server on its host.

Bound into ``ComputeManager``. The API has checked the server's state and
the port or network asked for, and recorded the instance action
(``attach_interface`` / ``detach_interface``). Each is one action event
(``compute_attach_interface`` / ``compute_detach_interface``) with
``instance.interface_attach`` / ``_detach`` notifications.

Before it acts, the host records what it is doing in the server's record of
in-flight work (novella/db/host_operations.py, kind ``INTERFACE``: attach or
detach, the port or network, the address asked for, the tag), and an attach
of the user's port notes it as the user's (novella/network/ownership.py)
before it is the server's. Attach then gives the server the port — the
user's port gets ``device_id``/``device_owner`` and is bound to this host,
or a port is made on the network, bound here — plugs it into the guest
(``network_info`` in the simulated guest's domain.json), adds it to the
server's network info cache (what ``addresses`` shows) and ends the record.
Detach unplugs the port, lets it go (a port made for the server is deleted,
a user's port unbound and released), takes it out of the cache and ends the
record.

Every part may run again, so a host whose service stopped in the middle
finds the record as it starts (``resume_interface_op``) and runs the
operation again from its beginning: an attach whose port was already made on
the network takes that port (recorded once made; else the server's port on
that network that is neither in the cache nor the user's:
novella/network/ownership.py) instead of making a second one. An attach that
fails gives back what it took: the port made is deleted, the user's port
unbound and released, the guest unplugged. A detach that fails keeps its
record: it is tried again when the host's service next starts (the port
stays the server's until then, and the user may ask again).

A port that asks for resources (minimum bandwidth or packet rate QoS rules)
gets them from providers of this host's tree that Placement offers
(``in_tree`` the host's node, the port's groups in one subtree), recorded
(``claimed``) before the server's allocation on them is set to what all its
ports ask (this one included), and its binding profile names them
(``allocation``). None to be had: 400, and the attach is undone. Detach of
such a port gives its share back: the providers its binding names are recorded
first, and the server's allocation on them is set to what its other ports
ask. Setting the allocation from the ports, rather than adding or taking
away, is what lets either run again.
"""
import json
import logging

from novella.compute import cleanup
from novella.compute import steps
from novella.compute import guest
from novella.db import host_operations
from novella.db import journal_rows
from novella.db import records
from novella.network import ownership
from novella.placement import allocations
from novella.placement import client as placement_client
from novella.rpc import notifications

LOG = logging.getLogger(__name__)
# The kind of the host's operation (novella/db/host_operations.py): the attach or
# detach in progress, named as the system-metadata note it replaced.
INTERFACE = "interface_operation"


class InterfaceAttachFailedNoNetwork(Exception):
    """No network asked for, and none the project may use."""


class InterfaceAttachResourceAllocationFailed(Exception):
    """No provider of the host's tree has what the port asks for."""


def attach_interface(compute, ctxt, instance_uuid, network_id=None, port_id=None,
                     requested_ip=None, tag=None):
    """Give the server a port and plug it; returns its network_info entry."""
    note = {"op": "attach", "network_id": network_id, "port_id": port_id,
            "requested_ip": requested_ip, "tag": tag}
    return _run_interface_op(compute, ctxt, instance_uuid, note)


def detach_interface(compute, ctxt, instance_uuid, port_id):
    """Unplug the port and let it go."""
    _run_interface_op(compute, ctxt, instance_uuid, {"op": "detach", "port_id": port_id})


def _run_interface_op(compute, ctxt, instance_uuid, note):
    attach = note["op"] == "attach"
    with steps.step(compute, ctxt, instance_uuid,
                    "compute_attach_interface" if attach else "compute_detach_interface",
                    notifications.INTERFACE_ATTACH if attach
                    else notifications.INTERFACE_DETACH, standalone=True) as st:
        op = host_operations.begin(compute.cell_db, instance_uuid, INTERFACE, note)
        if attach and note.get("port_id"):  # the user's, noted before it is the server's
            mine = ownership.with_noted(records.system_metadata(compute.cell_db, instance_uuid),
                                        [note["port_id"]])
            if mine:
                records.set_system_metadata(compute.cell_db, instance_uuid,
                                            **{ownership.USER_PORTS: mine})
        if attach:
            return _attach(compute, ctxt, st.instance, op)
        _detach(compute, ctxt, st.instance, op)


def _attach(compute, ctxt, inst, op):
    uuid, note = inst.uuid, op.state
    known = {v["id"] for v in guest.network_info_of(inst)}
    port_id = (note["port_id"] or note.get("made")
               or _made_before(compute, ctxt, uuid, note["network_id"], known))
    if port_id:
        requested = [{"port_id": port_id}]
    elif note["network_id"]:
        requested = [{"network_id": note["network_id"], "address": note["requested_ip"]}]
    else:
        requested = None  # the one network the project may use
    vif = None
    try:
        vifs = compute.network_api.allocate_for_instance(
            ctxt, uuid, inst.project_id, requested_networks=requested, host=compute.host,
            availability_zone=inst.availability_zone or "nova")
        if not vifs:
            raise InterfaceAttachFailedNoNetwork(
                f"No specific network was requested and none are available for "
                f"project '{inst.project_id}'.")
        vif = vifs[0]
        if not port_id:  # the port made here, recorded: a run again takes it
            note["made"] = vif["id"]
            host_operations.step(compute.cell_db, op, "make port", journal_rows.DONE)
        port = compute.network_api.get_port(ctxt, vif["id"])
        if (port.get("resource_request") or {}).get("request_groups"):
            vif = _claim_port_resources(compute, ctxt, inst, port, op)
        vif["tag"] = note["tag"]
        # Whose the port is, the server's records know (novella/network/ownership.py):
        # a port this attach made and takes again (noted, or found) was not given.
        vif["preserve_on_delete"] = bool(note["port_id"])
        compute.driver.attach_interface(ctxt, guest.instance_dict(inst),
                                     {"id": inst.image_ref, "properties": {}}, vif)
    except Exception:
        _attach_failed(compute, ctxt, inst, vif and vif["id"] or port_id or note.get("made"),
                            sorted(set((note.get("claimed") or {}).values())),
                            preserve=bool(note["port_id"]))
        raise
    _set_vif(compute, uuid, vif)
    host_operations.end(compute.cell_db, uuid, INTERFACE)
    return vif


def _made_before(compute, ctxt, uuid, network_id, known):
    """The port an interrupted attach made on ``network_id``, if it did: a port
    whose device is the server, neither in its info cache (``known``) nor the
    user's (novella/network/ownership.py). Nothing else makes one between the
    note and the cache."""
    filters = {"device_id": uuid}
    if network_id:
        filters["network_id"] = network_id
    users = ownership.user_ports((), records.system_metadata(compute.cell_db, uuid))
    for p in compute.network_api.list_ports(ctxt, filters):
        if p["id"] not in known and p["id"] not in users:
            return p["id"]
    return None


def _claim_port_resources(compute, ctxt, inst, port, op):
    """What the port asks for, from providers of this host's tree, added to the
    server's allocation (the providers recorded first); its binding names them.
    Returns the port's network_info entry as it then is."""
    claimed = op.state.get("claimed")
    if not claimed:
        claimed = op.state["claimed"] = _choose_providers(compute, inst, port)
        host_operations.step(compute.cell_db, op, "claim port resources", journal_rows.STARTED)
    _set_port_shares(compute, ctxt, inst, sorted(set(claimed.values())),
                          adding=(port, claimed))
    profile = dict(port.get("binding:profile") or {}, allocation=dict(claimed))
    compute.network_api.update_port(ctxt, port["id"], {"binding:profile": profile})
    return next(v for v in compute.network_api.get_instance_nw_info(ctxt, inst.uuid)
                if v["id"] == port["id"])


def _choose_providers(compute, inst, port):
    """{request group id: provider} in this host's tree, as Placement offers."""
    request = port["resource_request"]
    groups = [{"suffix": g["id"], "resources": g["resources"],
               "required": g.get("required") or [], "in_tree": compute.rt.provider_uuid}
              for g in request["request_groups"]]
    subtree = [request["same_subtree"]] if len(request.get("same_subtree") or []) > 1 \
        else None
    failed = InterfaceAttachResourceAllocationFailed(
        f"Failed to allocate additional resources to instance {inst.uuid}.")
    try:
        found = compute.placement.get_allocation_candidates(
            groups, limit=1, group_policy="none", same_subtree=subtree,
            microversion="1.36")
    except placement_client.PlacementError as exc:
        if exc.status != 400:  # a trait no provider has: none to be had
            raise
        raise failed from exc
    if not len(found):
        raise failed
    mappings = found.allocation_requests[0].get("mappings") or {}
    return {g["id"]: mappings[g["id"]][0] for g in request["request_groups"]}


def _attach_failed(compute, ctxt, inst, port_id, providers=(), preserve=False):
    """``preserve``: the port is the user's (unbound and released), else made here
    (deleted)."""
    if port_id is None:
        host_operations.end(compute.cell_db, inst.uuid, INTERFACE)
        return
    with cleanup.step(f"give back what port {port_id} held"):
        _give_back(compute, ctxt, inst, port_id, providers)
    with cleanup.step(f"unplug port {port_id}"):
        compute.driver.detach_interface(ctxt, guest.instance_dict(inst), {"id": port_id})
    with cleanup.step(f"let port {port_id} go"):
        compute.network_api.deallocate_port_for_instance(ctxt, inst.uuid, port_id, preserve)
    host_operations.end(compute.cell_db, inst.uuid, INTERFACE)


def _detach(compute, ctxt, inst, op):
    note = op.state
    port_id = note["port_id"]
    if "providers" not in note:  # the providers of the port's share of the allocation
        note["providers"] = _port_providers(compute, ctxt, port_id)
        host_operations.step(compute.cell_db, op, "give back port resources",
                             journal_rows.STARTED)
    compute.driver.detach_interface(ctxt, guest.instance_dict(inst), {"id": port_id})
    _give_back(compute, ctxt, inst, port_id, note["providers"])
    users = ownership.user_ports(guest.network_info_of(inst),
                                 records.system_metadata(compute.cell_db, inst.uuid))
    compute.network_api.deallocate_port_for_instance(ctxt, inst.uuid, port_id,
                                                  port_id in users)
    _set_vif(compute, inst.uuid, None, drop=port_id)
    host_operations.end(compute.cell_db, inst.uuid, INTERFACE)


def _port_providers(compute, ctxt, port_id):
    from novella.network.api import PortNotFound
    try:
        port = compute.network_api.get_port(ctxt, port_id)
    except PortNotFound:
        return []
    return sorted(set(_by_group(port).values()))


def _give_back(compute, ctxt, inst, port_id, providers):
    """The server's allocation on ``providers`` made what its other ports ask of
    them: the same whether or not it was done before."""
    _set_port_shares(compute, ctxt, inst, providers, without=port_id)


def _set_port_shares(compute, ctxt, inst, providers, without=None, adding=None):
    """The server's allocation on ``providers`` set to what its ports ask of them
    (less the port ``without``; plus ``adding``: (port, {group: provider}))."""
    if not providers:
        return
    needed = {rp: {} for rp in providers}
    ports = [(p, _by_group(p)) for p in compute.network_api.list_ports(
        ctxt, {"device_id": inst.uuid}) if p["id"] not in (without, adding and adding[0]["id"])]
    for p, chosen in ports + ([adding] if adding else []):
        for group in (p.get("resource_request") or {}).get("request_groups") or []:
            rp = chosen.get(group["id"])
            for rc, amount in group["resources"].items() if rp in needed else ():
                needed[rp][rc] = needed[rp].get(rc, 0) + amount
    allocations.set_on_providers(compute.placement, inst.uuid, needed, inst.project_id,
                                 inst.user_id)


def _set_vif(compute, uuid, vif, drop=None):
    """The server's network info cache with ``vif`` added (or replaced), or with
    the port ``drop`` taken out."""
    with compute.cell_db.session(write=True) as s:
        cache = guest.info_cache_in(s, uuid)
        gone = drop or vif["id"]
        nw_info = [v for v in json.loads(cache.network_info or "[]") if v["id"] != gone]
        cache.network_info = json.dumps(nw_info + ([vif] if vif else []))


def resume_interface_op(compute, ctxt, instance_uuid, note):
    """An attach or detach this host's service stopped in the middle of, run again
    from its beginning (its action event ended in error first)."""
    records.finish_open_events(compute.cell_db, None, instance_uuid, "Error")
    _run_interface_op(compute, ctxt, instance_uuid, note)


def _by_group(port):
    """{request group id: provider} of the port's binding profile."""
    allocation = (port.get("binding:profile") or {}).get("allocation") or {}
    if isinstance(allocation, str):  # one group: the provider itself
        groups = (port.get("resource_request") or {}).get("request_groups") or []
        return {g["id"]: allocation for g in groups}
    return dict(allocation)
