"""Attaching a port to, and detaching it from, a server on its host.

A mixin of ``ComputeManager``. The API has checked the server's state and
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

import sqlalchemy as sa

from novella.compute import cleanup
from novella.compute import steps
from novella.db import cell_models as m
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


class ComputeInterfaces:
    def attach_interface(self, ctxt, instance_uuid, network_id=None, port_id=None,
                         requested_ip=None, tag=None):
        """Give the server a port and plug it; returns its network_info entry."""
        note = {"op": "attach", "network_id": network_id, "port_id": port_id,
                "requested_ip": requested_ip, "tag": tag}
        return self._run_interface_op(ctxt, instance_uuid, note)

    def detach_interface(self, ctxt, instance_uuid, port_id):
        """Unplug the port and let it go."""
        self._run_interface_op(ctxt, instance_uuid, {"op": "detach", "port_id": port_id})

    def _run_interface_op(self, ctxt, instance_uuid, note):
        attach = note["op"] == "attach"
        with steps.step(self, ctxt, instance_uuid,
                        "compute_attach_interface" if attach else "compute_detach_interface",
                        notifications.INTERFACE_ATTACH if attach
                        else notifications.INTERFACE_DETACH, standalone=True) as st:
            op = host_operations.begin(self.cell_db, instance_uuid, INTERFACE, note)
            if attach and note.get("port_id"):  # the user's, noted before it is the server's
                mine = ownership.with_noted(records.system_metadata(self.cell_db, instance_uuid),
                                            [note["port_id"]])
                if mine:
                    records.set_system_metadata(self.cell_db, instance_uuid,
                                                **{ownership.USER_PORTS: mine})
            if attach:
                return self._attach(ctxt, st.instance, op)
            self._detach(ctxt, st.instance, op)

    def _attach(self, ctxt, inst, op):
        uuid, note = inst.uuid, op.state
        known = {v["id"] for v in self.network_info(inst)}
        port_id = (note["port_id"] or note.get("made")
                   or self._made_before(ctxt, uuid, note["network_id"], known))
        if port_id:
            requested = [{"port_id": port_id}]
        elif note["network_id"]:
            requested = [{"network_id": note["network_id"], "address": note["requested_ip"]}]
        else:
            requested = None  # the one network the project may use
        vif = None
        try:
            vifs = self.network_api.allocate_for_instance(
                ctxt, uuid, inst.project_id, requested_networks=requested, host=self.host,
                availability_zone=inst.availability_zone or "nova")
            if not vifs:
                raise InterfaceAttachFailedNoNetwork(
                    f"No specific network was requested and none are available for "
                    f"project '{inst.project_id}'.")
            vif = vifs[0]
            if not port_id:  # the port made here, recorded: a run again takes it
                note["made"] = vif["id"]
                host_operations.step(self.cell_db, op, "make port", journal_rows.DONE)
            port = self.network_api.get_port(ctxt, vif["id"])
            if (port.get("resource_request") or {}).get("request_groups"):
                vif = self._claim_port_resources(ctxt, inst, port, op)
            vif["tag"] = note["tag"]
            # Whose the port is, the server's records know (novella/network/ownership.py):
            # a port this attach made and takes again (noted, or found) was not given.
            vif["preserve_on_delete"] = bool(note["port_id"])
            self.driver.attach_interface(ctxt, self.instance_dict(inst),
                                         {"id": inst.image_ref, "properties": {}}, vif)
        except Exception:
            self._attach_failed(ctxt, inst, vif and vif["id"] or port_id or note.get("made"),
                                sorted(set((note.get("claimed") or {}).values())),
                                preserve=bool(note["port_id"]))
            raise
        self._set_vif(uuid, vif)
        host_operations.end(self.cell_db, uuid, INTERFACE)
        return vif

    def _made_before(self, ctxt, uuid, network_id, known):
        """The port an interrupted attach made on ``network_id``, if it did: a port
        whose device is the server, neither in its info cache (``known``) nor the
        user's (novella/network/ownership.py). Nothing else makes one between the
        note and the cache."""
        filters = {"device_id": uuid}
        if network_id:
            filters["network_id"] = network_id
        users = ownership.user_ports((), records.system_metadata(self.cell_db, uuid))
        for p in self.network_api.list_ports(ctxt, filters):
            if p["id"] not in known and p["id"] not in users:
                return p["id"]
        return None

    def _claim_port_resources(self, ctxt, inst, port, op):
        """What the port asks for, from providers of this host's tree, added to the
        server's allocation (the providers recorded first); its binding names them.
        Returns the port's network_info entry as it then is."""
        claimed = op.state.get("claimed")
        if not claimed:
            claimed = op.state["claimed"] = self._choose_providers(inst, port)
            host_operations.step(self.cell_db, op, "claim port resources", journal_rows.STARTED)
        self._set_port_shares(ctxt, inst, sorted(set(claimed.values())),
                              adding=(port, claimed))
        profile = dict(port.get("binding:profile") or {}, allocation=dict(claimed))
        self.network_api.update_port(ctxt, port["id"], {"binding:profile": profile})
        return next(v for v in self.network_api.get_instance_nw_info(ctxt, inst.uuid)
                    if v["id"] == port["id"])

    def _choose_providers(self, inst, port):
        """{request group id: provider} in this host's tree, as Placement offers."""
        request = port["resource_request"]
        groups = [{"suffix": g["id"], "resources": g["resources"],
                   "required": g.get("required") or [], "in_tree": self.rt.provider_uuid}
                  for g in request["request_groups"]]
        subtree = [request["same_subtree"]] if len(request.get("same_subtree") or []) > 1 \
            else None
        failed = InterfaceAttachResourceAllocationFailed(
            f"Failed to allocate additional resources to instance {inst.uuid}.")
        try:
            found = self.placement.get_allocation_candidates(
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

    def _attach_failed(self, ctxt, inst, port_id, providers=(), preserve=False):
        """``preserve``: the port is the user's (unbound and released), else made here
        (deleted)."""
        if port_id is None:
            host_operations.end(self.cell_db, inst.uuid, INTERFACE)
            return
        with cleanup.step(f"give back what port {port_id} held"):
            self._give_back(ctxt, inst, port_id, providers)
        with cleanup.step(f"unplug port {port_id}"):
            self.driver.detach_interface(ctxt, self.instance_dict(inst), {"id": port_id})
        with cleanup.step(f"let port {port_id} go"):
            self.network_api.deallocate_port_for_instance(ctxt, inst.uuid, port_id, preserve)
        host_operations.end(self.cell_db, inst.uuid, INTERFACE)

    def _detach(self, ctxt, inst, op):
        note = op.state
        port_id = note["port_id"]
        if "providers" not in note:  # the providers of the port's share of the allocation
            note["providers"] = self._port_providers(ctxt, port_id)
            host_operations.step(self.cell_db, op, "give back port resources",
                                 journal_rows.STARTED)
        self.driver.detach_interface(ctxt, self.instance_dict(inst), {"id": port_id})
        self._give_back(ctxt, inst, port_id, note["providers"])
        users = ownership.user_ports(self.network_info(inst),
                                     records.system_metadata(self.cell_db, inst.uuid))
        self.network_api.deallocate_port_for_instance(ctxt, inst.uuid, port_id,
                                                      port_id in users)
        self._set_vif(inst.uuid, None, drop=port_id)
        host_operations.end(self.cell_db, inst.uuid, INTERFACE)

    def _port_providers(self, ctxt, port_id):
        from novella.network.api import PortNotFound
        try:
            port = self.network_api.get_port(ctxt, port_id)
        except PortNotFound:
            return []
        return sorted(set(_by_group(port).values()))

    def _give_back(self, ctxt, inst, port_id, providers):
        """The server's allocation on ``providers`` made what its other ports ask of
        them: the same whether or not it was done before."""
        self._set_port_shares(ctxt, inst, providers, without=port_id)

    def _set_port_shares(self, ctxt, inst, providers, without=None, adding=None):
        """The server's allocation on ``providers`` set to what its ports ask of them
        (less the port ``without``; plus ``adding``: (port, {group: provider}))."""
        if not providers:
            return
        needed = {rp: {} for rp in providers}
        ports = [(p, _by_group(p)) for p in self.network_api.list_ports(
            ctxt, {"device_id": inst.uuid}) if p["id"] not in (without, adding and adding[0]["id"])]
        for p, chosen in ports + ([adding] if adding else []):
            for group in (p.get("resource_request") or {}).get("request_groups") or []:
                rp = chosen.get(group["id"])
                for rc, amount in group["resources"].items() if rp in needed else ():
                    needed[rp][rc] = needed[rp].get(rc, 0) + amount
        allocations.set_on_providers(self.placement, inst.uuid, needed, inst.project_id,
                                     inst.user_id)

    def _set_vif(self, uuid, vif, drop=None):
        """The server's network info cache with ``vif`` added (or replaced), or with
        the port ``drop`` taken out."""
        with self.cell_db.session(write=True) as s:
            cache = s.scalars(sa.select(m.InstanceInfoCache).where(
                m.InstanceInfoCache.instance_uuid == uuid)).first()
            if cache is None:
                cache = m.InstanceInfoCache(instance_uuid=uuid)
                s.add(cache)
            gone = drop or vif["id"]
            nw_info = [v for v in json.loads(cache.network_info or "[]") if v["id"] != gone]
            cache.network_info = json.dumps(nw_info + ([vif] if vif else []))

    def resume_interface_op(self, ctxt, instance_uuid, note):
        """An attach or detach this host's service stopped in the middle of, run again
        from its beginning (its action event ended in error first)."""
        records.finish_open_events(self.cell_db, None, instance_uuid, "Error")
        self._run_interface_op(ctxt, instance_uuid, note)


def _by_group(port):
    """{request group id: provider} of the port's binding profile."""
    allocation = (port.get("binding:profile") or {}).get("allocation") or {}
    if isinstance(allocation, str):  # one group: the provider itself
        groups = (port.get("resource_request") or {}).get("request_groups") or []
        return {g["id"]: allocation for g in groups}
    return dict(allocation)
