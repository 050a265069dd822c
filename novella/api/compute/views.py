"""How a server record is shown, per microversion."""
import hashlib
import logging

from novella.api.compute import common
from novella.api.compute.common import iso
from novella.compute import states

LOG = logging.getLogger(__name__)


def host_id(rec):
    if not rec.get("host"):
        return ""
    return hashlib.sha224((rec["project_id"] + rec["host"]).encode()).hexdigest()


def status(rec):
    if rec.get("deleted"):
        return "DELETED" if rec.get("vm_state") != states.SOFT_DELETED else "SOFT_DELETED"
    return states.server_status(rec.get("vm_state"), rec.get("task_state"))


def addresses(rec, extended=True):
    """{network label: [addresses]} from the VIFs in the info cache; without
    ``extended`` (an update's answer before 2.75) no type and MAC address."""
    out = _addresses(rec)
    if not extended:
        out = {label: [{"version": ip["version"], "addr": ip["addr"]} for ip in ips]
               for label, ips in out.items()}
    return out


def _addresses(rec):
    out = {}
    for vif in rec.get("network_info") or []:
        net = vif.get("network") or {}
        label = net.get("label") or net.get("name") or net.get("id") or "network"
        ips = out.setdefault(label, [])
        for subnet in net.get("subnets") or []:
            for ip in subnet.get("ips") or []:
                entry = {"version": ip.get("version") or (6 if ":" in ip.get("address", "") else 4),
                         "addr": ip.get("address")}
                ips.append({**entry, "OS-EXT-IPS:type": ip.get("type", "fixed"),
                            "OS-EXT-IPS-MAC:mac_addr": vif.get("address")})
                floating = ip.get("floating_ips") or []
                if "floating_ips" in rec:  # as the network service has them now
                    floating = [{"address": a} for a in
                                rec["floating_ips"].get((vif.get("id"), ip.get("address")), [])]
                for fip in floating:
                    ips.append({"version": entry["version"], "addr": fip.get("address"),
                                "OS-EXT-IPS:type": "floating",
                                "OS-EXT-IPS-MAC:mac_addr": vif.get("address")})
        for ip in vif.get("fixed_ips") or []:  # flat port-style VIFs
            addr = ip.get("ip_address") or ip.get("address")
            ips.append({"version": 6 if ":" in addr else 4, "addr": addr,
                        "OS-EXT-IPS:type": "fixed",
                        "OS-EXT-IPS-MAC:mac_addr": vif.get("address") or vif.get("mac_address")})
    return out


def flavor(req, rec):
    fl = rec.get("flavor") or {}
    if not req.at_least("2.47"):
        fid = fl.get("flavorid")
        return {"id": fid, "links": [{"rel": "bookmark",
                                      "href": req.links("flavors", fid)[1]["href"]}]}
    out = {"vcpus": fl.get("vcpus"), "ram": fl.get("memory_mb"), "disk": fl.get("root_gb"),
           "ephemeral": fl.get("ephemeral_gb", 0), "swap": fl.get("swap", 0),
           "original_name": fl.get("name")}
    if req.can("os_compute_api:servers:show:flavor-extra-specs"):
        out["extra_specs"] = dict(fl.get("extra_specs") or {})
    return out


def image(req, rec):
    if not rec.get("image_ref"):
        return ""
    out = {"id": rec["image_ref"],
           "links": [{"rel": "bookmark", "href": req.links("images", rec["image_ref"])[1]["href"]}]}
    if req.at_least("2.98"):
        out["properties"] = image_properties(rec.get("image_properties"))
    return out


def host_status(req, rec):
    """UP, DOWN, MAINTENANCE (disabled) or UNKNOWN, from the server's host's compute service.

    A page of servers has its hosts' services read first, one query per cell
    (``add_host_statuses``); a single server reads its host's alone.
    """
    host = rec.get("host")
    if not host:
        return ""
    if "host_status" not in rec:
        add_host_statuses(req, [rec])
    return rec["host_status"]


def host_status_shown(req):
    """Which host statuses policy lets the caller see: "all"
    (show:host_status), "unknown" (show:host_status:unknown-only: the field
    only when it is UNKNOWN), or None."""
    if req.can("os_compute_api:servers:show:host_status"):
        return "all"
    if req.can("os_compute_api:servers:show:host_status:unknown-only"):
        return "unknown"
    return None


def add_host_statuses(req, recs):
    """Set ``host_status`` on each record from the services rows of the page's
    hosts only, read with one query per cell holding some of them."""
    from novella.api.compute import hosts
    from novella.db import cells as cells_mod, services as services_db
    wanted = {}
    for rec in recs:
        if rec.get("host") and rec.get("cell") is not None:
            wanted.setdefault(rec["cell"].uuid, (rec["cell"], set()))[1].add(rec["host"])
    found = {}
    for cell, names in wanted.values():
        try:
            rows = services_db.compute_services_of(cells_mod.cell_database(cell), sorted(names))
        except Exception:  # noqa: BLE001 - a cell that does not answer: its hosts are UNKNOWN
            LOG.warning("host status: cell %s did not answer", cell.name, exc_info=True)
            continue
        for svc in rows:
            found[(cell.uuid, svc.host)] = svc
    conf = req.api.conf
    for rec in recs:
        cell = rec.get("cell")
        svc = found.get((cell.uuid, rec.get("host"))) if cell is not None else None
        if svc is None:
            rec["host_status"] = "UNKNOWN"
        elif not hosts.is_up(conf, svc):
            rec["host_status"] = "DOWN"
        else:
            rec["host_status"] = "MAINTENANCE" if svc.disabled else "UP"


def add_pinned_zones(api, recs):
    """From the request specs of the servers (one query): the zone each asked
    for (2.96), its scheduler hints (2.100) and its image's properties (2.98)."""
    from novella.db import request_specs
    by_uuid = {r["uuid"]: r for r in recs}
    if not by_uuid:
        return
    for uuid, spec in request_specs.of_servers(api.api_db, list(by_uuid)):
        rec = by_uuid[uuid]
        rec["pinned_availability_zone"] = spec.get("availability_zone")
        rec["scheduler_hints"] = {
            k: [str(x) for x in (v if isinstance(v, list) else [v])]
            for k, v in (spec.get("scheduler_hints") or {}).items()}
        rec["image_properties"] = (spec.get("image") or {}).get("properties") or {}


# The image properties the reference keeps with a server (its ImageMetaProps:
# hardware, image and guest OS families, and their older plain names).
_IMAGE_PROPERTY_PREFIXES = ("hw_", "img_", "os_")
_LEGACY_IMAGE_PROPERTIES = frozenset((
    "architecture", "auto_disk_config", "bdm_v2", "bittorrent", "block_device_mapping",
    "cache_in_nova", "hypervisor_type", "hypervisor_version_requires", "ipxe_boot",
    "mappings", "owner_id", "root_device_name", "vm_mode", "vmware_disktype",
    "vmware_image_version", "vmware_linked_clone", "vmware_ostype"))


def image_properties(props):
    """2.98: the standard properties of the server's image, as strings (at most 255
    characters, as the server's system metadata keeps them)."""
    return {k: str(v)[:255] for k, v in (props or {}).items()
            if v is not None and not k.startswith("os_glance")
            and (k.startswith(_IMAGE_PROPERTY_PREFIXES) or k in _LEGACY_IMAGE_PROPERTIES)}


def add_network_details(req, recs):
    """The names of the groups of each server's ports, and the floating IPs associated
    with them, as the network service has them now (one call each): a change made
    through the network API shows at once, as the reference's info cache refreshed by
    the network service's events would."""
    api = req.api.network_api
    if api is None or not hasattr(api, "instances_security_group_names") or not recs:
        return
    uuids = [r["uuid"] for r in recs]
    names = api.instances_security_group_names(req.context, uuids)
    floating = api.instances_floating_ips(req.context, uuids)
    for rec in recs:
        rec["security_groups"] = names.get(rec["uuid"], [])
        rec["floating_ips"] = floating.get(rec["uuid"], {})


def show(req, rec, update=False):
    """The body of ``GET /servers/{id}`` (as an update answers, with ``update``)."""
    from novella.db import server_groups as server_groups_db
    if req.at_least("2.96"):
        add_pinned_zones(req.api, [rec])
    add_network_details(req, [rec])
    if req.at_least("2.71"):
        rec["server_groups"] = server_groups_db.of_server(req.api.api_db, rec["uuid"])
    return {"server": detail(req, rec, show=True, update=update)}


def basic(req, rec):
    return {"id": rec["uuid"], "name": rec.get("display_name"),
            "links": req.links("servers", rec["uuid"])}


def detail(req, rec, show=False, update=False):
    """The detailed view; ``update``: as an update answers, which before 2.75
    leaves out the zone, config drive, key name, usage times, security groups,
    extended attributes and status, attached volumes and host status."""
    st = status(rec)
    everything = not update or req.at_least("2.75")
    out = basic(req, rec)
    out.update({
        "status": st, "tenant_id": rec["project_id"], "user_id": rec["user_id"],
        "metadata": dict(rec.get("metadata") or {}), "hostId": host_id(rec),
        "image": image(req, rec), "flavor": flavor(req, rec),
        "created": iso(rec.get("created_at")),
        "updated": iso(rec.get("updated_at") or rec.get("created_at")),
        "addresses": addresses(rec, extended=everything),
        "accessIPv4": rec.get("access_ip_v4") or "", "accessIPv6": rec.get("access_ip_v6") or "",
        "OS-DCF:diskConfig": "AUTO" if rec.get("auto_disk_config") else "MANUAL",
    })
    if everything:
        out.update({
            "OS-EXT-AZ:availability_zone": rec.get("availability_zone") or "",
            "config_drive": rec.get("config_drive") or "",
            "key_name": rec.get("key_name"),
            "OS-SRV-USG:launched_at": _usec(rec.get("launched_at")),
            "OS-SRV-USG:terminated_at": _usec(rec.get("terminated_at")),
            "OS-EXT-STS:task_state": rec.get("task_state"),
            "OS-EXT-STS:vm_state": rec.get("vm_state"),
            "OS-EXT-STS:power_state": rec.get("power_state") or 0,
            "os-extended-volumes:volumes_attached": [
                {"id": v["id"], **({"delete_on_termination": v["delete_on_termination"]}
                                  if req.at_least("2.3") else {})}
                for v in rec.get("volumes") or []],
        })
    if st in ("ACTIVE", "BUILD", "REBUILD", "RESIZE", "VERIFY_RESIZE", "MIGRATING"):
        out["progress"] = rec.get("progress") or 0
    if everything and (rec.get("cell") is not None or st != "BUILD"):
        names = rec.get("security_groups", ["default"])
        if names:  # the groups of its ports; a server without ports shows none
            out["security_groups"] = [{"name": n} for n in names]
    if everything and req.can("os_compute_api:os-extended-server-attributes",
                              {"project_id": rec["project_id"], "user_id": rec["user_id"]}):
        out["OS-EXT-SRV-ATTR:host"] = rec.get("host")
        out["OS-EXT-SRV-ATTR:hypervisor_hostname"] = rec.get("node")
        out["OS-EXT-SRV-ATTR:instance_name"] = "instance-%08x" % (rec.get("id") or 0)
        if req.at_least("2.3"):
            out.update({"OS-EXT-SRV-ATTR:reservation_id": rec.get("reservation_id"),
                        "OS-EXT-SRV-ATTR:launch_index": rec.get("launch_index"),
                        "OS-EXT-SRV-ATTR:hostname": rec.get("hostname"),
                        "OS-EXT-SRV-ATTR:kernel_id": "", "OS-EXT-SRV-ATTR:ramdisk_id": "",
                        "OS-EXT-SRV-ATTR:root_device_name": None,
                        "OS-EXT-SRV-ATTR:user_data": rec.get("user_data")})
    if req.at_least("2.9"):
        out["locked"] = bool(rec.get("locked"))
    shown = host_status_shown(req) if everything and req.at_least("2.16") else None
    if shown:
        found = host_status(req, rec)
        if shown == "all" or found == "UNKNOWN":
            out["host_status"] = found
    if req.at_least("2.19"):
        out["description"] = rec.get("display_description")
    if req.at_least("2.26"):
        out["tags"] = list(rec.get("tags") or [])
    if req.at_least("2.63"):
        out["trusted_image_certificates"] = None
    if req.at_least("2.73"):
        out["locked_reason"] = common.locked_reason(rec)
    if req.at_least("2.90"):
        out["OS-EXT-SRV-ATTR:hostname"] = rec.get("hostname")
    if everything and req.at_least("2.96"):
        out["pinned_availability_zone"] = rec.get("pinned_availability_zone")
    if req.at_least("2.100"):
        out["scheduler_hints"] = rec.get("scheduler_hints", {})
    if show and req.at_least("2.71"):
        out["server_groups"] = rec.get("server_groups", [])
    fault = rec.get("fault")
    if fault and st in ("ERROR", "DELETED"):
        f = {"code": fault["code"], "message": fault["message"], "created": iso(fault["created"])}
        if fault["code"] != 500 or req.is_admin():
            if fault.get("details"):
                f["details"] = fault["details"]
        out["fault"] = f
    return out


def _usec(ts):
    return ts.strftime("%Y-%m-%dT%H:%M:%S.%f") if ts is not None else None
