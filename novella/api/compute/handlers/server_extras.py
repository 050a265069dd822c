"""A server's diagnostics, its encrypted password, and events other services send about it.

- ``GET /servers/{id}/diagnostics``: the guest as its simulated host sees it,
  worked out from the server's records (flavor, power state, ports, disks). The
  simulated hypervisor stands in for libvirt/KVM, so it reports as that driver
  does (``driver: libvirt``, ``hypervisor: kvm``); the counters of a simulated
  guest are zero. Before 2.48 the body is the libvirt driver's flat form.
- ``/servers/{id}/os-server-password``: the encrypted password a guest posted,
  kept as the reference keeps it in the server's system metadata, in four
  255-character chunks (``password_0..3``); DELETE clears it. (Simulated guests
  post none: it reads empty unless a tool wrote those keys.)
- ``POST /os-server-external-events``: ``network-changed`` refreshes the server's
  network info cache from the network service; the other events are accepted
  for a server on a host (the simulated hosts wait for none of them). A server
  not found is 404, one on no host 422, as per-event codes; 207 when not all
  were accepted.
"""
import datetime

from novella.api.compute import common, errors, instances, validation as v
from novella.compute import states
from novella.db import cells as cells_mod, records, servers as servers_db

_POWER_NAMES = {states.power_state.RUNNING: "running", states.power_state.PAUSED: "paused",
                states.power_state.SHUTDOWN: "shutdown", states.power_state.CRASHED: "crashed",
                states.power_state.SUSPENDED: "suspended"}
_PASSWORD_KEYS = [f"password_{i}" for i in range(4)]


# --- diagnostics ---------------------------------------------------------------------
def _disks(rec):
    return servers_db.block_device_mappings(cells_mod.cell_database(rec["cell"]), rec["uuid"])


def diagnostics(req, server_id):
    rec = instances.get(req, server_id)
    req.authorize("os_compute_api:os-server-diagnostics",
                  {"project_id": rec["project_id"], "user_id": rec["user_id"]})
    if rec["cell"] is None or rec["vm_state"] == states.BUILDING:
        raise errors.invalid_state("get_diagnostics", server_id, "vm_state", states.BUILDING)
    if not rec.get("host"):
        raise errors.Conflict(f"Instance {server_id} is not ready")
    flavor = rec.get("flavor") or {}
    vcpus, memory_mb = flavor.get("vcpus", rec.get("vcpus") or 1), \
        flavor.get("memory_mb", rec.get("memory_mb") or 0)
    macs = [vif.get("address") for vif in rec.get("network_info") or []]
    disks = _disks(rec) or [None]
    if not req.at_least("2.48"):
        out = {f"cpu{i}_time": 0 for i in range(vcpus)}
        out["memory"] = memory_mb * 1024
        for i, _disk in enumerate(disks):
            name = "vd" + chr(ord("a") + i)
            out.update({f"{name}_read": 0, f"{name}_read_req": 0, f"{name}_write": 0,
                        f"{name}_write_req": 0, f"{name}_errors": -1})
        for mac in macs:
            tap = "tap" + (mac or "").replace(":", "")[-8:]
            out.update({f"{tap}_{k}": 0 for k in ("rx", "rx_drop", "rx_errors", "rx_packets",
                                                  "tx", "tx_drop", "tx_errors", "tx_packets")})
        return 200, out
    launched = rec.get("launched_at")
    now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    running = rec.get("power_state") == states.power_state.RUNNING
    return 200, {
        "state": _POWER_NAMES.get(rec.get("power_state"), "pending"),
        "driver": "libvirt", "hypervisor": "kvm", "hypervisor_os": "linux",
        "uptime": int((now - launched).total_seconds()) if launched and running else 0,
        "config_drive": bool(rec.get("config_drive")), "num_cpus": vcpus,
        "num_nics": len(macs), "num_disks": len(disks),
        "memory_details": {"maximum": memory_mb, "used": memory_mb if running else 0},
        "cpu_details": [{"id": i, "time": 0, "utilisation": None} for i in range(vcpus)],
        "nic_details": [{"mac_address": mac, **{k: 0 for k in (
            "rx_octets", "rx_errors", "rx_drop", "rx_packets", "tx_octets", "tx_errors",
            "tx_drop", "tx_packets")}, "rx_rate": None, "tx_rate": None} for mac in macs],
        "disk_details": [{"read_bytes": 0, "read_requests": 0, "write_bytes": 0,
                          "write_requests": 0, "errors_count": 0} for _disk in disks]}


# --- os-server-password --------------------------------------------------------------------
def _password_server(req, server_id, rule):
    rec = instances.get(req, server_id)
    req.authorize("os_compute_api:os-server-password:" + rule,
                  {"project_id": rec["project_id"], "user_id": rec["user_id"]})
    return rec, cells_mod.cell_database(rec["cell"]) if rec["cell"] is not None else None


def show_password(req, server_id):
    rec, db = _password_server(req, server_id, "show")
    meta = records.system_metadata(db, rec["uuid"]) if db is not None else {}
    return 200, {"password": "".join(meta.get(k, "") for k in _PASSWORD_KEYS)}


def clear_password(req, server_id):
    rec, db = _password_server(req, server_id, "clear")
    if db is not None:  # a server still being scheduled has none yet
        records.set_system_metadata(db, rec["uuid"], **dict.fromkeys(_PASSWORD_KEYS))
    return 204, None


# --- os-server-external-events ---------------------------------------------------------------
_NAMES = [("network-changed", None), ("network-vif-plugged", None),
          ("network-vif-unplugged", None), ("network-vif-deleted", None),
          ("volume-extended", "2.51"), ("power-update", "2.76"),
          ("accelerator-request-bound", "2.82"), ("volume-reimaged", "2.93")]


def _events_body(version):
    names = [n for n, since in _NAMES if since is None or version >= tuple(
        int(p) for p in since.split("."))]
    event = v.obj({"name": {"type": "string", "enum": names},
                   "server_uuid": {"type": "string", "format": "uuid"},
                   "status": {"type": "string", "enum": ["failed", "completed", "in-progress"]},
                   "tag": {"type": "string", "maxLength": 255}}, ["name", "server_uuid"])
    return v.obj({"events": {"type": "array", "minItems": 1, "items": event}}, ["events"])


def external_events(req):
    req.authorize("os_compute_api:os-server-external-events:create", {})
    body = req.body_json(_events_body)
    out, accepted = [], 0
    for event in body["events"]:
        result = dict(event, status=event.get("status", "completed"))
        if event["name"] == "power-update" and event.get("tag") not in ("POWER_ON", "POWER_OFF"):
            raise errors.BadRequest(f"Invalid input for tag of power-update: {event.get('tag')}")
        rec = instances.load(req.api.api_db, event["server_uuid"], view=False)
        if rec is None:
            result["code"] = 404
        elif rec["cell"] is None or not rec.get("host"):
            result["code"] = 422
        else:
            result["code"] = 200
            accepted += 1
            if event["name"] == "network-changed":
                common.refresh_network_info(req, rec)
        out.append(result)
    if not accepted:
        raise errors.NotFound("No instances found for any event")
    return (200 if accepted == len(out) else 207), {"events": out}


ROUTES = [
    ("GET", "/servers/{server_id}/diagnostics", diagnostics),
    ("GET", "/servers/{server_id}/os-server-password", show_password),
    ("DELETE", "/servers/{server_id}/os-server-password", clear_password),
    ("POST", "/os-server-external-events", external_events),
]
