"""/servers/{server_id}/os-interface: list, show, attach and detach ports.

List and show read the network service's ports whose ``device_id`` is the
server (``tag`` from 2.70, as the server's network info cache keeps it).
Attach (``port_id``, or ``net_id`` with an optional fixed IP, or neither:
the one network the project may use; ``tag`` from 2.49) checks the server
and the port here, records the ``attach_interface`` instance action and
calls the server's host (novella/compute/interface_ops.py), which binds the
port there, plugs it and adds it to the server's addresses; the answer is
the attachment (200). Detach records ``detach_interface``, notes the
detach on the server (so that its host finishes it even if it stops first)
and casts (202).

Both need the server ``ACTIVE``, ``PAUSED`` or ``STOPPED`` with no task
state, and unlocked (409). A port that asks for resources (minimum
bandwidth) gets them on the server's host, or the attach fails with 400.
"""

from novella import rpc
from novella.api.compute import actions, errors, instances
from novella.api.compute import validation as v
from novella.compute import interface_ops
from novella.compute import rpcapi as compute_rpcapi
from novella.compute import states
from novella.db import cells as cells_mod
from novella.db import host_operations
from novella.db import records

_RULE = "os_compute_api:os-attach-interfaces:"
_ALLOWED = (states.ACTIVE, states.PAUSED, states.STOPPED)
_TAG = {"type": "string", "minLength": 1, "maxLength": 60, "pattern": "^[^,/]*$"}
_FIXED_IPS = {"type": "array", "minItems": 1, "maxItems": 1, "items": v.obj({
    "ip_address": {"type": "string", "oneOf": [{"format": "ipv4"}, {"format": "ipv6"}]}},
    ["ip_address"])}
_ATTACHMENT = {"net_id": v.uuid, "port_id": v.uuid, "fixed_ips": _FIXED_IPS}
_create_schema = [
    ((2, 0), (2, 48), v.obj({"interfaceAttachment": v.obj(_ATTACHMENT)})),
    ((2, 49), None, v.obj({"interfaceAttachment": v.obj(dict(_ATTACHMENT, tag=_TAG))})),
]
# What the host's errors mean to the caller (their class names, over RPC).
_REMOTE = {"PortInUse": errors.Conflict, "IpAddressAlreadyAllocated": errors.Conflict,
           "PortNotFound": errors.NotFound, "NetworkNotFound": errors.NotFound,
           "NetworkAmbiguous": errors.BadRequest, "IpAddressGenerationFailure": errors.BadRequest,
           "InvalidInput": errors.BadRequest, "SubnetNotFound": errors.BadRequest,
           "InterfaceAttachResourceAllocationFailed": errors.BadRequest,
           "InterfaceAttachFailedNoNetwork": errors.BadRequest,
           "NetworkError": errors.BadRequest}


def _server(req, server_id, action):
    rec = instances.get(req, server_id)
    req.authorize(_RULE + action, {"project_id": rec["project_id"]})
    return rec


def _network_api(req):
    if req.api.network_api is None:
        raise errors.APIError("Network driver does not support this function.", code=501)
    return req.api.network_api


def _view(req, port, rec):
    doc = {"net_id": port["network_id"], "port_id": port["id"],
           "mac_addr": port["mac_address"], "port_state": port["status"],
           "fixed_ips": port.get("fixed_ips")}
    if req.at_least("2.70"):
        doc["tag"] = next((vif.get("tag") for vif in rec["network_info"]
                           if vif.get("id") == port["id"]), None)
    return doc


def _port(req, port_id):
    from novella.network.api import PortNotFound
    try:
        return _network_api(req).get_port(req.context, port_id)
    except PortNotFound:
        raise errors.NotFound(f"Port {port_id} could not be found.")


def index(req, server_id):
    rec = _server(req, server_id, "list")
    ports = _network_api(req).list_ports(req.context, {"device_id": rec["uuid"]})
    return 200, {"interfaceAttachments": [_view(req, p, rec) for p in ports]}


def show(req, server_id, port_id):
    rec = _server(req, server_id, "show")
    port = _port(req, port_id)
    if port["device_id"] != rec["uuid"]:
        raise errors.NotFound(f"Instance {rec['uuid']} does not have a port with id {port_id}")
    return 200, {"interfaceAttachment": _view(req, port, rec)}


def _check_state(req, rec, action):
    actions.check_unlocked(req, rec)
    if rec["vm_state"] not in _ALLOWED:
        raise errors.invalid_state(action, rec["uuid"], "vm_state", rec["vm_state"])
    if rec["task_state"] is not None:
        raise errors.invalid_state(action, rec["uuid"], "task_state", rec["task_state"])
    if rec["cell"] is None or not rec.get("host"):
        raise errors.Conflict(f"Instance {rec['uuid']} is not ready")


def create(req, server_id):
    body = req.body_json(_create_schema).get("interfaceAttachment") or {}
    rec = _server(req, server_id, "create")
    net_id, port_id = body.get("net_id"), body.get("port_id")
    ip = (body.get("fixed_ips") or [{}])[0].get("ip_address")
    if net_id and port_id:
        raise errors.BadRequest("Must not input both network_id and port_id")
    if ip and not net_id:
        raise errors.BadRequest("Must input network_id when request IP address")
    _check_state(req, rec, "attach_interface")
    network_api = _network_api(req)
    if port_id:
        port = _port(req, port_id)
        if port["device_id"]:
            raise errors.Conflict(f"Port {port_id} is still in use.")
    if net_id:
        from novella.network.api import NetworkNotFound
        try:
            network_api.get_network(req.context, net_id)
        except NetworkNotFound:
            raise errors.NotFound(f"Network {net_id} could not be found.")
    cell_db = cells_mod.cell_database(rec["cell"])
    records.start_action(cell_db, req.context, rec["uuid"], "attach_interface")
    client = compute_rpcapi.ComputeAPI(rec["cell"].transport_url)
    try:
        vif = client.attach_interface(req.context, rec["host"], rec["uuid"], network_id=net_id,
                                      port_id=port_id, requested_ip=ip, tag=body.get("tag"))
    except rpc.RemoteError as exc:
        raise _REMOTE.get(exc.exc_type, errors.APIError)(
            exc.message if exc.exc_type in _REMOTE else
            f"Failed to attach network adapter device to {rec['uuid']}")
    except rpc.Timeout:
        raise errors.APIError(f"Failed to attach network adapter device to {rec['uuid']}")
    rec = instances.get(req, rec["uuid"])
    return 200, {"interfaceAttachment": _view(req, _port(req, vif["id"]), rec)}


def delete(req, server_id, port_id):
    rec = _server(req, server_id, "delete")
    _check_state(req, rec, "detach_interface")
    if not any(vif.get("id") == port_id for vif in rec["network_info"]):
        raise errors.NotFound(f"Port {port_id} is not attached")
    cell_db = cells_mod.cell_database(rec["cell"])
    records.start_action(cell_db, req.context, rec["uuid"], "detach_interface")
    # Recorded before the cast: a host that stops before or while it detaches finishes
    # it as it starts again.
    host_operations.begin(cell_db, rec["uuid"], interface_ops.INTERFACE,
                          {"op": "detach", "port_id": port_id})
    compute_rpcapi.ComputeAPI(rec["cell"].transport_url).detach_interface(
        req.context, rec["host"], rec["uuid"], port_id)
    return 202, None


ROUTES = [
    ("GET", "/servers/{server_id}/os-interface", index),
    ("POST", "/servers/{server_id}/os-interface", create),
    ("GET", "/servers/{server_id}/os-interface/{port_id}", show),
    ("DELETE", "/servers/{server_id}/os-interface/{port_id}", delete),
]
